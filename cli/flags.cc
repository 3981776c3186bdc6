#include "cli/flags.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/cli.h"

namespace hlab::cli {

std::string ParsedArgs::Get(const std::string& name,
                            const std::string& fallback) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return fallback;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return {};
  return it->second;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagDef>& flags) {
  ParsedArgs parsed;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done || a.size() < 2 || a[0] != '-') {
      parsed.positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      flags_done = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '", a, "'"));
    }
    std::string name = a.substr(2);
    std::string value;
    bool has_inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    const FlagDef* def = nullptr;
    for (const FlagDef& f : flags) {
      if (f.name == name) def = &f;
    }
    if (def == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '--", name, "'"));
    }
    if (!def->takes_value) {
      if (has_inline_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("option --", name, " takes no value"));
      }
      parsed.values_[name].push_back("true");
      continue;
    }
    if (!has_inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("option --", name, " needs a value"));
      }
      value = args[++i];
    }
    parsed.values_[name].push_back(value);
  }
  return parsed;
}

int UsageError(std::ostream& err, absl::string_view command,
               absl::string_view what) {
  err << "hlab " << command << ": error: " << what << "; run 'hlab " << command
      << " --help'\n";
  return kExitUsage;
}

int Failure(std::ostream& err, absl::string_view command,
            absl::string_view message) {
  err << "hlab " << command << ": error: " << message << "\n";
  return kExitFailed;
}

absl::StatusOr<long long> ParseCount(absl::string_view flag,
                                     absl::string_view text) {
  long long value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " must be a non-negative integer, got '", text, "'"));
  }
  return value;
}

}  // namespace hlab::cli
