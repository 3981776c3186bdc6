// MappedFile: a read-only memory map of a whole file, for the data shards
// (data/shard_corpus.h) and Hugging Face safetensors weights
// (model/llama/safetensors.h). Errors name the file.
//
// Thread-safety: immutable after Open(); safe for concurrent reads.
// Ownership: the mapping lives as long as the object.
//
//   HLAB_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
//                         MappedFile::Open(path));
//   absl::string_view bytes(reinterpret_cast<const char*>(file->data()),
//                           file->size());
#ifndef HLAB_COMMON_MAPPED_FILE_H_
#define HLAB_COMMON_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace hlab {

class MappedFile {
 public:
  // NotFound if `path` does not exist, Internal if it cannot be mapped.
  // An empty file maps to size 0.
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

}  // namespace hlab

#endif  // HLAB_COMMON_MAPPED_FILE_H_
