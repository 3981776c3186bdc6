// Readers of deploy/ files for the deploy tests: metric names in PromQL
// expressions (of the Grafana dashboard and the alerting rules), and a
// Dockerfile's instructions and apt-get packages.
//
// Thread-safe (pure functions).
//
//   std::set<std::string> names = MetricNames("rate(hlab_retries_total[5m])");
//   // {"hlab_retries_total"}
#ifndef HLAB_TESTS_DEPLOY_DEPLOY_FILES_H_
#define HLAB_TESTS_DEPLOY_DEPLOY_FILES_H_

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace hlab::deploy_testing {

// Metric names in a PromQL expression: identifiers outside quotes and
// brackets that are not functions, keywords or label names (a name is
// followed by "{", "[", whitespace, an operator or the end, never by "(";
// label names inside by()/on() are skipped with their parentheses).
inline std::set<std::string> MetricNames(const std::string& expr) {
  // Drop string literals, then grouping clauses' label lists.
  std::string text = std::regex_replace(expr, std::regex(R"("[^"]*")"), "\"\"");
  text = std::regex_replace(
      text,
      std::regex(
          R"(\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))"),
      " ");
  text = std::regex_replace(text, std::regex(R"(\{[^}]*\})"), " ");
  text = std::regex_replace(text, std::regex(R"(\[[^\]]*\])"), " ");
  static const std::set<std::string> kKeywords = {
      "and",         "or",       "unless", "by",   "without",
      "on",          "ignoring", "offset", "bool", "group_left",
      "group_right", "inf",      "nan"};
  std::set<std::string> names;
  const std::regex ident(R"([a-zA-Z_:][a-zA-Z0-9_:]*)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), ident);
       it != std::sregex_iterator(); ++it) {
    const std::string name = it->str();
    const size_t end = static_cast<size_t>(it->position() + it->length());
    size_t next = end;
    while (next < text.size() && text[next] == ' ') ++next;
    if (next < text.size() && text[next] == '(') continue;  // a function
    if (kKeywords.count(name) != 0) continue;
    if (it->position() > 0 &&
        std::isdigit(static_cast<unsigned char>(text[it->position() - 1]))) {
      continue;  // "5m", "1e3"
    }
    names.insert(name);
  }
  return names;
}

inline std::set<std::string> DashboardMetricNames(
    const std::filesystem::path& path) {
  std::ifstream in(path);
  const nlohmann::json dash = nlohmann::json::parse(in);
  std::set<std::string> names;
  for (const nlohmann::json& panel : dash.at("panels")) {
    if (!panel.contains("targets")) continue;
    for (const nlohmann::json& target : panel.at("targets")) {
      for (const std::string& n : MetricNames(target.at("expr")))
        names.insert(n);
    }
  }
  return names;
}

inline std::set<std::string> AlertMetricNames(
    const std::filesystem::path& path) {
  std::set<std::string> names;
  const YAML::Node rules = YAML::LoadFile(path.string());
  for (const YAML::Node& group : rules["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      for (const std::string& n : MetricNames(rule["expr"].as<std::string>())) {
        names.insert(n);
      }
    }
  }
  return names;
}

struct DockerInstruction {
  std::string op;    // "RUN", upper case
  std::string args;  // the rest, continuation lines joined with spaces
};

inline std::vector<DockerInstruction> ParseDockerfile(const std::string& text) {
  std::vector<DockerInstruction> out;
  std::string current;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line[0] == '#') continue;
    const bool more = line.back() == '\\';
    if (more) line.pop_back();
    current += line + " ";
    if (more) continue;
    const std::string joined(absl::StripAsciiWhitespace(current));
    current.clear();
    const size_t space = joined.find(' ');
    DockerInstruction in;
    in.op = absl::AsciiStrToUpper(joined.substr(0, space));
    in.args =
        space == std::string::npos
            ? ""
            : std::string(absl::StripAsciiWhitespace(joined.substr(space)));
    out.push_back(in);
  }
  return out;
}

// Package names after "apt-get install" in a RUN command, up to the next
// "&&", ";" or "|" (options and shell expansions are skipped).
inline std::vector<std::string> AptInstalledPackages(const std::string& run) {
  std::vector<std::string> packages;
  size_t at = 0;
  while ((at = run.find("apt-get install", at)) != std::string::npos) {
    at += 15;
    size_t end = run.find_first_of("&;|", at);
    if (end == std::string::npos) end = run.size();
    for (absl::string_view word :
         absl::StrSplit(run.substr(at, end - at), ' ', absl::SkipEmpty())) {
      if (absl::StartsWith(word, "-") || absl::StrContains(word, "$") ||
          absl::StrContains(word, "/")) {
        continue;
      }
      packages.emplace_back(word);
    }
  }
  return packages;
}

}  // namespace hlab::deploy_testing

#endif  // HLAB_TESTS_DEPLOY_DEPLOY_FILES_H_
