// File helpers private to data/: whole-file reads and writes, SHA-256
// (common/sha256.h), and a read-only memory map. Errors name the file.
//
// Thread-safety: free functions are thread-safe; a MappedFile is immutable
// after Open() and safe for concurrent reads.
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

// A read-only memory map of a whole file (empty files map to size 0).
class MappedFile {
 public:
  // NotFound if `path` does not exist, Internal if it cannot be mapped.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(
      const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_FILES_H_
