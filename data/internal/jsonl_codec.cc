#include "data/internal/jsonl_codec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "nlohmann/json.hpp"

namespace hlab::data::internal {
namespace {

using json = nlohmann::json;

absl::Status LineError(int64_t line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("stdin:", line, ": ", what));
}

absl::StatusOr<json> ParseObject(const std::string& text, int64_t line) {
  // ParseJsonText: nlohmann throws on 1e999 even when told not to.
  absl::StatusOr<json> value = ParseJsonText(text, "stdin");
  if (!value.ok() || !value->is_object()) {
    return LineError(line, "not a JSON object");
  }
  return value;
}

}  // namespace

absl::Status EncodeJsonLines(const Tokenizer& tok, std::istream& in,
                             std::ostream& out) {
  std::string text;
  std::string line_out;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    absl::StatusOr<json> value = ParseObject(text, line);
    if (!value.ok()) return value.status();
    auto field = value->find("text");
    if (field == value->end() || !field->is_string()) {
      return LineError(line, "no string field 'text'");
    }
    line_out = "{\"ids\":[";
    bool first = true;
    for (int32_t id : tok.Encode(field->get_ref<const std::string&>())) {
      if (!first) line_out += ',';
      absl::StrAppend(&line_out, id);
      first = false;
    }
    line_out += "]}\n";
    out << line_out;
  }
  out.flush();
  return absl::OkStatus();
}

absl::Status DecodeJsonLines(const Tokenizer& tok, std::istream& in,
                             std::ostream& out) {
  const int64_t size = tok.vocabulary().size;
  std::string text;
  std::vector<int32_t> ids;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    absl::StatusOr<json> value = ParseObject(text, line);
    if (!value.ok()) return value.status();
    auto field = value->find("ids");
    if (field == value->end() || !field->is_array()) {
      return LineError(line, "no list field 'ids'");
    }
    ids.clear();
    for (size_t i = 0; i < field->size(); ++i) {
      const json& id = (*field)[i];
      if (!id.is_number_integer()) {
        return LineError(line, absl::StrCat("ids[", i, "] is not an integer"));
      }
      int64_t v = id.get<int64_t>();
      if (id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX) {
        v = INT64_MAX;
      }
      if (v < 0 || v >= size) {
        return LineError(line, absl::StrCat("ids[", i, "] = ", id.dump(),
                                            " is outside the vocabulary (0..",
                                            size - 1, ")"));
      }
      ids.push_back(static_cast<int32_t>(v));
    }
    json result = {{"text", tok.Decode(ids)}};
    out << result.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  }
  out.flush();
  return absl::OkStatus();
}

}  // namespace hlab::data::internal
