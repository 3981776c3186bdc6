#include "data/internal/document_reader.h"
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace hlab::data::internal {
namespace {

namespace fs = std::filesystem;

bool HasKnownExtension(absl::string_view name) {
  absl::ConsumeSuffix(&name, ".gz");
  for (absl::string_view ext : {".jsonl", ".json", ".ndjson", ".txt", ".md"}) {
    if (absl::EndsWith(name, ext)) return true;
  }
  return false;
}

// Reads a whole file, decompressing it when it is gzip (zlib reads plain
// files through unchanged).
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    std::string message =
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
    if (errno == ENOENT) return absl::NotFoundError(message);
    return absl::InternalError(message);
  }
  gzbuffer(gz, 1 << 17);
  std::string out;
  char buffer[1 << 16];
  while (true) {
    int n = gzread(gz, buffer, sizeof(buffer));
    if (n < 0) {
      int code = 0;
      std::string message = gzerror(gz, &code);
      gzclose(gz);
      return absl::DataLossError(
          absl::StrCat("corrupt or truncated file ", path, ": ", message));
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  int code = gzclose(gz);
  if (code != Z_OK) {
    return absl::DataLossError(absl::StrCat("corrupt or truncated file ", path,
                                            " (zlib error ", code, ")"));
  }
  return out;
}

absl::Status ReadJsonl(const InputFile& file, const std::string& content,
                       absl::string_view text_field,
                       std::vector<RawDocument>* docs, int64_t* skipped_empty) {
  // Alternatives separated by ',', each a '+'-joined list of fields.
  std::vector<std::vector<std::string>> alternatives;
  for (absl::string_view alternative : absl::StrSplit(text_field, ',')) {
    alternatives.push_back(absl::StrSplit(alternative, '+'));
  }
  int64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(content, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    nlohmann::json object =
        nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    if (object.is_discarded() || !object.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.path, ":", line_number,
                       ": not a JSON object (JSONL needs one "
                       "object per line)"));
    }
    RawDocument doc;
    doc.line = line_number;
    bool found = false;
    for (const std::vector<std::string>& fields : alternatives) {
      found = std::all_of(fields.begin(), fields.end(), [&](const auto& f) {
        auto it = object.find(f);
        return it != object.end() && it->is_string();
      });
      if (!found) continue;
      for (const std::string& field : fields) {
        doc.text += object[field].get_ref<const std::string&>();
      }
      break;
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.path, ":", line_number, ": no string field '",
                       text_field, "' (choose the field with --text-field)"));
    }
    if (doc.text.empty()) {
      ++*skipped_empty;
      continue;
    }
    docs->push_back(std::move(doc));
  }
  return absl::OkStatus();
}

}  // namespace

std::string FormatOfFileName(absl::string_view name) {
  absl::ConsumeSuffix(&name, ".gz");
  for (absl::string_view ext : {".jsonl", ".json", ".ndjson"}) {
    if (absl::EndsWith(name, ext)) return "jsonl";
  }
  return "text";
}

absl::StatusOr<std::vector<InputFile>> ListInputFiles(
    const std::vector<std::string>& inputs) {
  if (inputs.empty()) return absl::InvalidArgumentError("no input files");
  std::vector<InputFile> files;
  std::set<std::string> seen;  // canonical paths: each file is read once
  auto add = [&files, &seen](const fs::path& path) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    if (!seen.insert(ec ? path.string() : canonical.string()).second) return;
    InputFile file;
    file.path = path.string();
    file.format = FormatOfFileName(path.filename().string());
    file.bytes = static_cast<int64_t>(fs::file_size(path, ec));
    files.push_back(std::move(file));
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    fs::file_status status = fs::status(input, ec);
    if (!fs::exists(status)) {
      return absl::NotFoundError(absl::StrCat("input ", input, " not found"));
    }
    if (!fs::is_directory(status)) {
      add(input);
      continue;
    }
    std::vector<fs::path> found;
    for (auto it = fs::recursive_directory_iterator(input, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && HasKnownExtension(name)) {
        found.push_back(it->path());
      }
    }
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot list ", input, ": ", ec.message()));
    }
    if (found.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "directory ", input,
          " holds no .jsonl, .json, .ndjson, .txt or .md file (or .gz)"));
    }
    std::sort(found.begin(), found.end());
    for (const fs::path& path : found) add(path);
  }
  return files;
}

absl::Status ReadDocuments(const InputFile& file, absl::string_view text_field,
                           std::vector<RawDocument>* docs,
                           int64_t* skipped_empty) {
  HLAB_ASSIGN_OR_RETURN(std::string content, ReadMaybeGzip(file.path));
  if (file.format == "jsonl") {
    return ReadJsonl(file, content, text_field, docs, skipped_empty);
  }
  if (content.empty()) {
    ++*skipped_empty;
    return absl::OkStatus();
  }
  RawDocument doc;
  doc.text = std::move(content);
  docs->push_back(std::move(doc));
  return absl::OkStatus();
}

}  // namespace hlab::data::internal
