// Reading raw documents for the import (data/import.h): expanding inputs
// into files, and reading the documents of one file. JSONL (one JSON object
// per line, the text in a configurable field) and plain text (the whole file
// is one document), either of them optionally gzip-compressed.
//
// Thread-safety: free functions without shared state.
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<InputFile> files, ListInputFiles(paths));
//   std::vector<RawDocument> docs;
//   HLAB_RETURN_IF_ERROR(ReadDocuments(files[0], "text", &docs, &skipped));
#ifndef HLAB_DATA_INTERNAL_DOCUMENT_READER_H_
#define HLAB_DATA_INTERNAL_DOCUMENT_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::data::internal {

struct InputFile {
  std::string path;
  std::string format;  // "jsonl" or "text"
  int64_t bytes = 0;
};

struct RawDocument {
  std::string text;
  int64_t line = 0;  // 1-based JSONL line; 0 for a text file
};

// The format a file name implies: "jsonl" for *.jsonl, *.json, *.ndjson
// (with or without .gz), "text" otherwise.
std::string FormatOfFileName(absl::string_view name);

// Expands `inputs`: a file stands for itself (any name); a directory for the
// files under it, recursively, in sorted path order, skipping hidden entries
// and keeping only *.jsonl, *.json, *.ndjson, *.txt, *.md (each optionally
// .gz). A file reached twice is listed once. NotFound naming an input that does
// not exist; InvalidArgument when there are no inputs or a directory holds no
// such file.
absl::StatusOr<std::vector<InputFile>> ListInputFiles(
    const std::vector<std::string>& inputs);

// Appends the documents of `file` to `docs`. `text_field` names the JSONL
// field holding the text; "a+b" concatenates fields a and b, and "x,a+b"
// takes x where a line has it and a+b otherwise. Documents with
// empty text are counted in `*skipped_empty` and not appended.
// Errors name the file (and line): InvalidArgument for a line that is not a
// JSON object or lacks the field as a string; DataLoss for a corrupt or
// truncated .gz file; NotFound/Internal when it cannot be read.
absl::Status ReadDocuments(const InputFile& file, absl::string_view text_field,
                           std::vector<RawDocument>* docs,
                           int64_t* skipped_empty);

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_DOCUMENT_READER_H_
