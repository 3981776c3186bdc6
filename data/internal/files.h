// File helpers private to data/: whole-file reads and writes, SHA-256
// (common/sha256.h), and a read-only memory map (common/mapped_file.h).
// Errors name the file.
//
// Thread-safety: free functions are thread-safe.
//
//   HLAB_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
//   std::string digest = Sha256Hex(text);  // 64 lowercase hex digits
#ifndef HLAB_DATA_INTERNAL_FILES_H_
#define HLAB_DATA_INTERNAL_FILES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mapped_file.h"
#include "common/sha256.h"

namespace hlab::data::internal {

// NotFound if `path` does not exist, Internal for other read errors.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to `path` (truncating); Internal on failure.
absl::Status WriteStringToFile(const std::string& path,
                               absl::string_view contents);

// SHA-256: common/sha256.h.
using ::hlab::Sha256;
using ::hlab::Sha256Hex;

// A read-only memory map: common/mapped_file.h.
using ::hlab::MappedFile;

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_FILES_H_
