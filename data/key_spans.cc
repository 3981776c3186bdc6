#include "data/key_spans.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "data/internal/files.h"
#include "nlohmann/json.hpp"

namespace hlab::data {
namespace {

// A span as the file gives it, in its unit, with its name for errors
// ("key_spans[3] = [5, 9]", "range 4 [5, 9]").
struct FileSpan {
  int64_t start = 0;
  int64_t end = 0;
  std::string name;
};

enum class Unit { kCodePoints, kBytes };

absl::Status Bad(absl::string_view where, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", message));
}

// The byte ranges of `spans` (sorted, disjoint; see the header for the
// one overlap a slice file may have when `split_characters`), adjacent
// ones merged.
absl::StatusOr<std::vector<ByteSpan>> ToByteRanges(
    const std::vector<FileSpan>& spans, absl::string_view text, Unit unit,
    bool split_characters, absl::string_view where) {
  std::vector<int64_t> code_points;
  if (unit == Unit::kCodePoints) code_points = CodePointByteOffsets(text);
  const int64_t length = unit == Unit::kCodePoints
                             ? static_cast<int64_t>(code_points.size()) - 1
                             : static_cast<int64_t>(text.size());
  const char* unit_name = unit == Unit::kCodePoints ? "characters" : "bytes";
  auto to_bytes = [&](int64_t offset) {
    return unit == Unit::kCodePoints ? code_points[offset] : offset;
  };
  std::vector<ByteSpan> ranges;
  const FileSpan* previous = nullptr;
  for (const FileSpan& span : spans) {
    if (span.start < 0 || span.end <= span.start) {
      return Bad(where, absl::StrCat(span.name, " is ",
                                     span.start < 0 ? "negative" : "empty",
                                     span.end < span.start ? " (reversed)" : "",
                                     ": spans are [start, end), start < end"));
    }
    if (span.end > length) {
      return Bad(where, absl::StrCat(span.name, " ends past the text (", length,
                                     " ", unit_name, ")"));
    }
    const ByteSpan bytes = {to_bytes(span.start), to_bytes(span.end)};
    if (previous != nullptr && span.start < previous->end) {
      const bool split = split_characters && span.start >= previous->start &&
                         span.start == previous->end - 1;
      if (!split) {
        return Bad(where,
                   absl::StrCat(span.name, " starts before ", previous->name,
                                " ends: spans must be sorted and must "
                                "not overlap"));
      }
    }
    if (!ranges.empty() && bytes.begin <= ranges.back().end) {
      ranges.back().end = std::max(ranges.back().end, bytes.end);
    } else {
      ranges.push_back(bytes);
    }
    previous = &span;
  }
  return ranges;
}

// One JSON object per non-blank line of `contents`, with its line number.
struct JsonLine {
  nlohmann::json value;
  int64_t line = 0;
};

absl::StatusOr<std::vector<JsonLine>> ParseJsonLines(absl::string_view contents,
                                                     absl::string_view where) {
  std::vector<JsonLine> lines;
  int64_t number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string line_where = absl::StrCat(where, ":", number);
    HLAB_ASSIGN_OR_RETURN(nlohmann::json value,
                          ParseJsonText(line, line_where));
    if (!value.is_object()) return Bad(line_where, "not a JSON object");
    lines.push_back({std::move(value), number});
  }
  if (lines.empty()) return Bad(where, "no documents");
  return lines;
}

// The line's text and id ("id" as a string or an integer, else "line N").
absl::Status ReadTextAndId(const JsonLine& line, absl::string_view where,
                           KeySpanDocument* doc) {
  const std::string line_where = absl::StrCat(where, ":", line.line);
  auto text = line.value.find("text");
  if (text == line.value.end() || !text->is_string()) {
    return Bad(line_where, "no string field 'text'");
  }
  doc->text = text->get<std::string>();
  doc->id = absl::StrCat("line ", line.line);
  auto id = line.value.find("id");
  if (id != line.value.end()) {
    if (id->is_string()) {
      doc->id = id->get<std::string>();
    } else if (HoldsInteger<int64_t>(*id)) {
      doc->id = absl::StrCat(id->get<int64_t>());
    } else {
      return Bad(line_where, "'id' must be a string or an integer");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KeySpanDocument> ParseKeySpanLine(const JsonLine& line,
                                                 absl::string_view where) {
  KeySpanDocument doc;
  HLAB_RETURN_IF_ERROR(ReadTextAndId(line, where, &doc));
  doc.where = absl::StrCat(where, ":", line.line, " (document ", doc.id, ")");
  Unit unit = Unit::kCodePoints;
  auto offsets = line.value.find("offsets");
  if (offsets != line.value.end()) {
    if (*offsets == "bytes") {
      unit = Unit::kBytes;
    } else if (*offsets != "code_points") {
      return Bad(doc.where, "'offsets' must be \"code_points\" or \"bytes\"");
    }
  }
  auto spans = line.value.find("key_spans");
  if (spans == line.value.end() || !spans->is_array()) {
    return Bad(doc.where,
               "no list 'key_spans' of [start, end] pairs (an empty list "
               "when no token is key)");
  }
  std::vector<FileSpan> file_spans;
  for (size_t i = 0; i < spans->size(); ++i) {
    const nlohmann::json& span = (*spans)[i];
    if (!span.is_array() || span.size() != 2 ||
        !HoldsInteger<int64_t>(span[0]) || !HoldsInteger<int64_t>(span[1])) {
      return Bad(doc.where,
                 absl::StrCat("key_spans[", i, "] = ", span.dump(),
                              " is not a ", "[start, end] pair of integers"));
    }
    const int64_t start = span[0].get<int64_t>();
    const int64_t end = span[1].get<int64_t>();
    file_spans.push_back(
        {start, end,
         absl::StrCat("key_spans[", i, "] = [", start, ", ", end, "]")});
  }
  HLAB_ASSIGN_OR_RETURN(doc.key_ranges,
                        ToByteRanges(file_spans, doc.text, unit,
                                     /*split_characters=*/false, doc.where));
  return doc;
}

// "DIR/slice_<i>.txt".
std::string SlicePath(const std::string& dir, size_t i) {
  return absl::StrCat(dir, "/slice_", i, ".txt");
}

// A slice file in `dir` whose index is `count` or more, or "".
std::string SliceBeyond(const std::string& dir, size_t count) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file_name = entry.path().filename().string();
    absl::string_view name = file_name;
    if (!absl::ConsumePrefix(&name, "slice_") ||
        !absl::ConsumeSuffix(&name, ".txt")) {
      continue;
    }
    uint64_t index = 0;
    if (absl::SimpleAtoi(name, &index) && index >= count) {
      return entry.path().string();
    }
  }
  return "";
}

}  // namespace

std::vector<int64_t> CodePointByteOffsets(absl::string_view text) {
  std::vector<int64_t> offsets;
  offsets.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      offsets.push_back(static_cast<int64_t>(i));
    }
  }
  offsets.push_back(static_cast<int64_t>(text.size()));
  return offsets;
}

absl::StatusOr<std::vector<KeySpanDocument>> ParseKeySpansJsonl(
    absl::string_view contents, absl::string_view where) {
  HLAB_ASSIGN_OR_RETURN(std::vector<JsonLine> lines,
                        ParseJsonLines(contents, where));
  std::vector<KeySpanDocument> docs;
  std::map<std::string, int64_t> lines_by_id;
  for (const JsonLine& line : lines) {
    HLAB_ASSIGN_OR_RETURN(KeySpanDocument doc, ParseKeySpanLine(line, where));
    auto [it, inserted] = lines_by_id.emplace(doc.id, line.line);
    if (!inserted) {
      return Bad(doc.where, absl::StrCat("the id is line ", it->second,
                                         "'s too: ids must be unique"));
    }
    docs.push_back(std::move(doc));
  }
  return docs;
}

absl::StatusOr<std::vector<KeySpanDocument>> ReadKeySpansJsonl(
    const std::string& path) {
  HLAB_ASSIGN_OR_RETURN(std::string contents, internal::ReadFileToString(path));
  return ParseKeySpansJsonl(contents, path);
}

absl::StatusOr<std::vector<ByteSpan>> ParseLongPplSlice(
    absl::string_view contents, absl::string_view text,
    absl::string_view where) {
  std::vector<FileSpan> spans;
  absl::string_view all = absl::StripAsciiWhitespace(contents);
  if (all.empty()) return std::vector<ByteSpan>();
  int index = 0;
  for (absl::string_view entry : absl::StrSplit(all, ';')) {
    ++index;
    absl::string_view range = absl::StripAsciiWhitespace(entry);
    std::vector<absl::string_view> numbers;
    if (absl::ConsumePrefix(&range, "[") && absl::ConsumeSuffix(&range, "]")) {
      numbers = absl::StrSplit(range, ',');
    }
    FileSpan span;
    if (numbers.size() != 2 ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(numbers[0]),
                          &span.start) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(numbers[1]), &span.end)) {
      return Bad(where, absl::StrCat("range ", index, " '",
                                     absl::StripAsciiWhitespace(entry),
                                     "' is not [start, end]"));
    }
    span.name =
        absl::StrCat("range ", index, " [", span.start, ", ", span.end, "]");
    spans.push_back(std::move(span));
  }
  return ToByteRanges(spans, text, Unit::kCodePoints,
                      /*split_characters=*/true, where);
}

absl::StatusOr<std::vector<KeySpanDocument>> ReadLongPplSlices(
    const std::string& slice_dir, const std::string& texts_path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(slice_dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("no directory of LongPPL slice files: ", slice_dir));
  }
  HLAB_ASSIGN_OR_RETURN(std::string contents,
                        internal::ReadFileToString(texts_path));
  HLAB_ASSIGN_OR_RETURN(std::vector<JsonLine> lines,
                        ParseJsonLines(contents, texts_path));
  std::vector<KeySpanDocument> docs(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    KeySpanDocument& doc = docs[i];
    HLAB_RETURN_IF_ERROR(ReadTextAndId(lines[i], texts_path, &doc));
    const std::string path = SlicePath(slice_dir, i);
    doc.where = absl::StrCat(path, " (document ", doc.id, ", ", texts_path, ":",
                             lines[i].line, ")");
    absl::StatusOr<std::string> slice = internal::ReadFileToString(path);
    if (absl::IsNotFound(slice.status())) {
      return absl::NotFoundError(
          absl::StrCat("no ", path, " for document ", doc.id, " (", texts_path,
                       ":", lines[i].line,
                       "): slice_<i>.txt holds the key ranges of the i-th "
                       "text, from 0"));
    }
    HLAB_RETURN_IF_ERROR(slice.status());
    HLAB_ASSIGN_OR_RETURN(doc.key_ranges,
                          ParseLongPplSlice(*slice, doc.text, doc.where));
  }
  const std::string extra = SliceBeyond(slice_dir, docs.size());
  if (!extra.empty()) {
    return Bad(extra, absl::StrCat("a slice file beyond the ", docs.size(),
                                   " texts of ", texts_path,
                                   " (slice_0.txt is the first's)"));
  }
  return docs;
}

absl::StatusOr<std::vector<int64_t>> KeyTokenIndices(
    const KeySpanDocument& doc, absl::string_view evaluated_text,
    absl::Span<const ByteSpan> token_spans) {
  if (evaluated_text != doc.text) {
    const size_t common = std::min(evaluated_text.size(), doc.text.size());
    size_t at = 0;
    while (at < common && evaluated_text[at] == doc.text[at]) ++at;
    std::string range;
    for (const ByteSpan& key : doc.key_ranges) {
      if (key.end > static_cast<int64_t>(at)) {
        range = absl::StrCat(", at or before key bytes [", key.begin, ", ",
                             key.end, ")");
        break;
      }
    }
    return Bad(doc.where,
               absl::StrCat("the evaluated text differs from the document's "
                            "at byte ",
                            at, range, " (", evaluated_text.size(),
                            " bytes vs ", doc.text.size(), ")"));
  }
  const int64_t size = static_cast<int64_t>(evaluated_text.size());
  std::vector<int64_t> key;
  size_t j = 0;
  const std::vector<ByteSpan>& ranges = doc.key_ranges;
  for (size_t i = 0; i < token_spans.size(); ++i) {
    const ByteSpan& token = token_spans[i];
    if (token.begin < 0 || token.end < token.begin || token.end > size ||
        (i > 0 && (token.begin < token_spans[i - 1].begin ||
                   token.end < token_spans[i - 1].end))) {
      return Bad(doc.where,
                 absl::StrCat("token ", i, " spans bytes [", token.begin, ", ",
                              token.end, "), outside the text (", size,
                              " bytes) or before the token before it"));
    }
    if (token.begin == token.end) continue;
    // Token ends never decrease, so a range ending before this token's end
    // holds no later token either.
    while (j < ranges.size() && ranges[j].end < token.end) ++j;
    if (j < ranges.size() && ranges[j].begin <= token.begin) {
      key.push_back(static_cast<int64_t>(i));
    }
  }
  return key;
}

std::vector<ByteSpan> KeyRangesOfTokens(absl::Span<const ByteSpan> token_spans,
                                        absl::Span<const int64_t> key_indices) {
  std::vector<ByteSpan> spans;
  for (int64_t i : key_indices) {
    if (i < 0 || i >= static_cast<int64_t>(token_spans.size())) continue;
    if (token_spans[i].begin < token_spans[i].end) {
      spans.push_back(token_spans[i]);
    }
  }
  std::sort(
      spans.begin(), spans.end(),
      [](const ByteSpan& a, const ByteSpan& b) { return a.begin < b.begin; });
  std::vector<ByteSpan> ranges;
  for (const ByteSpan& span : spans) {
    if (!ranges.empty() && span.begin <= ranges.back().end) {
      ranges.back().end = std::max(ranges.back().end, span.end);
    } else {
      ranges.push_back(span);
    }
  }
  return ranges;
}

}  // namespace hlab::data
