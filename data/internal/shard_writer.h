// ShardWriter: appends tokenized documents of one split to .tokens/.index
// shard files (format in data/shard_format.h), starting a new shard once the
// current one holds at least `shard_tokens` tokens. Documents never span
// shards, so a document longer than `shard_tokens` gets a shard to itself.
//
// Thread-compatible: one writer per split, used from one thread.
//
//   ShardWriter writer(tmp_dir, "train", /*token_bytes=*/2, 1 << 24);
//   HLAB_RETURN_IF_ERROR(writer.Add(tokens));
//   SplitInfo info;
//   HLAB_RETURN_IF_ERROR(writer.Finish(&info));
#ifndef HLAB_DATA_INTERNAL_SHARD_WRITER_H_
#define HLAB_DATA_INTERNAL_SHARD_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "data/shard_format.h"

namespace hlab::data::internal {

class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string split, int token_bytes,
              int64_t shard_tokens);

  // Appends one document (non-empty). Internal if a shard cannot be written.
  absl::Status Add(const std::vector<int32_t>& tokens);

  // Writes the last shard and fills `info`. Internal on write errors.
  absl::Status Finish(SplitInfo* info);

 private:
  absl::Status FlushShard();

  std::string dir_;
  std::string split_;
  int token_bytes_;
  int64_t shard_tokens_;
  std::string tokens_;             // encoded tokens of the current shard
  std::vector<uint64_t> offsets_;  // document offsets of the current shard
  SplitInfo info_;
};

}  // namespace hlab::data::internal

#endif  // HLAB_DATA_INTERNAL_SHARD_WRITER_H_
