#include "coordinator/sweep/internal/document.h"
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace hlab::sweep::internal {
namespace {

absl::Status YamlError(const std::string& what, const YAML::Mark& mark) {
  if (mark.is_null()) return absl::InvalidArgumentError(what);
  return absl::InvalidArgumentError(absl::StrCat(
      what, " (line ", mark.line + 1, ", column ", mark.column + 1, ")"));
}

absl::StatusOr<DocNode> FromYaml(const YAML::Node& node) {
  DocNode out;
  const YAML::Mark mark = node.Mark();
  if (!mark.is_null()) {
    out.line = mark.line + 1;
    out.column = mark.column + 1;
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      out.kind = DocNode::Kind::kNull;
      return out;
    case YAML::NodeType::Scalar:
      out.kind = DocNode::Kind::kScalar;
      out.scalar = node.Scalar();
      // Plain scalars have the non-specific tag "?"; quoted ones "!".
      out.quoted = node.Tag() == "!";
      return out;
    case YAML::NodeType::Sequence:
      out.kind = DocNode::Kind::kList;
      for (const YAML::Node& item : node) {
        HLAB_ASSIGN_OR_RETURN(DocNode child, FromYaml(item));
        out.items.push_back(std::move(child));
      }
      return out;
    case YAML::NodeType::Map: {
      out.kind = DocNode::Kind::kMap;
      std::set<std::string> seen;
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return YamlError("map keys must be plain names", kv.first.Mark());
        }
        const std::string key = kv.first.Scalar();
        if (!seen.insert(key).second) {
          return YamlError(absl::StrCat("duplicate key '", key, "'"),
                           kv.first.Mark());
        }
        DocEntry entry;
        entry.key = key;
        const YAML::Mark key_mark = kv.first.Mark();
        entry.line = key_mark.line + 1;
        entry.column = key_mark.column + 1;
        HLAB_ASSIGN_OR_RETURN(entry.value, FromYaml(kv.second));
        if (entry.value.line == 0) {
          // A null value has no mark of its own: point at its key.
          entry.value.line = entry.line;
          entry.value.column = entry.column;
        }
        out.entries.push_back(std::move(entry));
      }
      return out;
    }
  }
  return out;
}

DocNode FromJson(const nlohmann::json& j) {
  DocNode out;
  if (j.is_null()) {
    out.kind = DocNode::Kind::kNull;
  } else if (j.is_object()) {
    out.kind = DocNode::Kind::kMap;
    for (auto it = j.begin(); it != j.end(); ++it) {
      DocEntry entry;
      entry.key = it.key();
      entry.value = FromJson(it.value());
      out.entries.push_back(std::move(entry));
    }
  } else if (j.is_array()) {
    out.kind = DocNode::Kind::kList;
    for (const auto& item : j) out.items.push_back(FromJson(item));
  } else {
    out.kind = DocNode::Kind::kScalar;
    if (j.is_string()) {
      out.scalar = j.get<std::string>();
      out.quoted = true;
    } else {
      out.scalar = j.dump();
    }
  }
  return out;
}

// Line and column (1-based) of byte offset `pos` in `text`.
std::pair<int, int> LineColumn(absl::string_view text, size_t pos) {
  int line = 1, column = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

const char* DocKindName(DocNode::Kind kind) {
  switch (kind) {
    case DocNode::Kind::kNull:
      return "null";
    case DocNode::Kind::kScalar:
      return "scalar";
    case DocNode::Kind::kList:
      return "list";
    case DocNode::Kind::kMap:
      return "map";
  }
  return "?";
}

std::string Where(const DocNode& node) {
  if (node.line == 0) return "";
  return absl::StrCat(" (line ", node.line, ", column ", node.column, ")");
}

absl::StatusOr<DocNode> ParseYamlDocument(absl::string_view text) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return YamlError(absl::StrCat("malformed YAML: ", e.msg), e.mark);
  }
  try {
    return FromYaml(root);
  } catch (const YAML::Exception& e) {
    return YamlError(absl::StrCat("malformed YAML: ", e.msg), e.mark);
  }
}

absl::StatusOr<DocNode> ParseJsonDocument(absl::string_view text) {
  // Duplicate keys: nlohmann keeps the last one silently, so detect them
  // with a callback that sees every key of every object in order.
  std::vector<std::set<std::string>> keys_stack;
  std::string duplicate;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                      nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) keys_stack.emplace_back();
    if (event == Event::object_end && !keys_stack.empty()) {
      keys_stack.pop_back();
    }
    if (event == Event::key && !keys_stack.empty() && duplicate.empty()) {
      const std::string key = parsed.get<std::string>();
      if (!keys_stack.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::parse_error& e) {
    const auto [line, column] = LineColumn(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2:
    // syntax error ..." -> keep the part after the position.
    const size_t colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed JSON: ", what, " (line ", line, ", column ", column, ")"));
  } catch (const nlohmann::json::exception& e) {
    // Not a syntax error: a number no double holds (1e999).
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON: duplicate key '", duplicate, "'"));
  }
  return FromJson(j);
}

}  // namespace hlab::sweep::internal
