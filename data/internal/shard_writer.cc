#include "data/internal/shard_writer.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "data/internal/files.h"

namespace hlab::data::internal {
namespace {

void AppendLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  }
}

}  // namespace

ShardWriter::ShardWriter(std::string dir, std::string split, int token_bytes,
                         int64_t shard_tokens)
    : dir_(std::move(dir)),
      split_(std::move(split)),
      token_bytes_(token_bytes),
      shard_tokens_(shard_tokens),
      offsets_{0} {}

absl::Status ShardWriter::Add(const std::vector<int32_t>& tokens) {
  for (int32_t token : tokens) {
    AppendLittleEndian(static_cast<uint32_t>(token), token_bytes_, &tokens_);
  }
  offsets_.push_back(offsets_.back() + tokens.size());
  info_.num_documents += 1;
  info_.num_tokens += static_cast<int64_t>(tokens.size());
  info_.max_document_tokens =
      std::max(info_.max_document_tokens, static_cast<int64_t>(tokens.size()));
  if (static_cast<int64_t>(offsets_.back()) >= shard_tokens_) {
    return FlushShard();
  }
  return absl::OkStatus();
}

absl::Status ShardWriter::FlushShard() {
  if (offsets_.size() <= 1) return absl::OkStatus();
  int index = static_cast<int>(info_.shards.size());
  ShardInfo shard;
  shard.tokens_file = ShardFileName(split_, index, "tokens");
  shard.index_file = ShardFileName(split_, index, "index");
  shard.num_documents = static_cast<int64_t>(offsets_.size()) - 1;
  shard.num_tokens = static_cast<int64_t>(offsets_.back());
  std::string index_bytes;
  index_bytes.reserve(8 * offsets_.size());
  for (uint64_t offset : offsets_) AppendLittleEndian(offset, 8, &index_bytes);
  shard.tokens_bytes = static_cast<int64_t>(tokens_.size());
  shard.index_bytes = static_cast<int64_t>(index_bytes.size());
  shard.tokens_sha256 = Sha256Hex(tokens_);
  shard.index_sha256 = Sha256Hex(index_bytes);
  HLAB_RETURN_IF_ERROR(
      WriteStringToFile(dir_ + "/" + shard.tokens_file, tokens_));
  HLAB_RETURN_IF_ERROR(
      WriteStringToFile(dir_ + "/" + shard.index_file, index_bytes));
  info_.shards.push_back(std::move(shard));
  tokens_.clear();
  offsets_.assign(1, 0);
  return absl::OkStatus();
}

absl::Status ShardWriter::Finish(SplitInfo* info) {
  HLAB_RETURN_IF_ERROR(FlushShard());
  *info = info_;
  return absl::OkStatus();
}

}  // namespace hlab::data::internal
