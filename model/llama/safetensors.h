// Safetensors: Hugging Face's weight files, read in place from a memory
// map. One file (`model.safetensors`) or a sharded set named by
// `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}).
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {"dtype", "shape", "data_offsets": [begin, end]}}, plus an
// optional "__metadata__" of strings), then the tensors' bytes, offsets
// relative to the end of the header. Every entry is checked at open: a
// known dtype, non-negative dims, offsets inside the file and end - begin
// equal to the element count times the dtype's size; the error names the
// file and the tensor. No LibTorch here: model/llama/llama_model.h wraps
// the bytes as tensors.
//
// Thread-safety: immutable after Open(); safe for concurrent reads.
// Ownership: a tensor's `data` points into a mapping that lives as long as
// the SafetensorsFile / SafetensorsCheckpoint that returned it.
//
//   HLAB_ASSIGN_OR_RETURN(auto weights, SafetensorsCheckpoint::Open(dir));
//   const SafetensorsTensor* t = weights->Find("model.norm.weight");
//   if (t != nullptr && t->dtype == SafetensorsDType::kBF16) { ... }
#ifndef HLAB_MODEL_LLAMA_SAFETENSORS_H_
#define HLAB_MODEL_LLAMA_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mapped_file.h"

namespace hlab::model::llama {

// The dtypes hlab reads; a file with any other (I64, F8_E4M3, ...) is
// refused at open, naming the tensor and the dtype.
enum class SafetensorsDType { kF64, kF32, kF16, kBF16 };

// "F64", "F32", "F16", "BF16".
absl::string_view SafetensorsDTypeName(SafetensorsDType dtype);
size_t SafetensorsDTypeSize(SafetensorsDType dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping; not aligned in general
  size_t bytes = 0;
  std::string file;  // the file it is in, for errors
};

// The parsed header of one file, over bytes kept elsewhere (a mapping, or a
// string in tests and the fuzzer). Errors (all DataLoss) name `file`:
// "model.safetensors: tensor 'x': data_offsets [0, 10] hold 10 bytes, but
// F32 [3] needs 12".
absl::StatusOr<std::map<std::string, SafetensorsTensor>> ParseSafetensors(
    absl::string_view bytes, const std::string& file);

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  // NotFound (no such file), Internal (cannot map), DataLoss (malformed).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path);

  const std::map<std::string, SafetensorsTensor>& tensors() const {
    return tensors_;
  }

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> mapping_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

// The weights of a Hugging Face model directory: model.safetensors, or the
// shards model.safetensors.index.json names (every shard must exist, and
// every tensor the index names must be in its shard).
class SafetensorsCheckpoint {
 public:
  // NotFound when `dir` has neither file (names both), DataLoss for a
  // malformed index or shard, or a tensor in two shards.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> Open(
      const std::string& dir);

  // nullptr when absent.
  const SafetensorsTensor* Find(const std::string& name) const;
  const std::map<std::string, const SafetensorsTensor*>& tensors() const {
    return index_;
  }
  // "model.safetensors" or "model.safetensors.index.json (4 shards)".
  const std::string& description() const { return description_; }

 private:
  SafetensorsCheckpoint() = default;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsTensor*> index_;
  std::string description_;
};

// A tensor to write (tests, tools): its bytes in `dtype`, little-endian.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<int64_t> shape;
  std::string bytes;
};

// The bytes of a .safetensors file holding `entries` in order, with the
// header padded with spaces to a multiple of 8 as Hugging Face's writer
// does. `metadata` becomes "__metadata__" when not empty.
std::string EncodeSafetensors(
    const std::vector<SafetensorsEntry>& entries,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace hlab::model::llama

#endif  // HLAB_MODEL_LLAMA_SAFETENSORS_H_
