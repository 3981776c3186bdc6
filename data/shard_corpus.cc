#include "data/shard_corpus.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/internal/files.h"

namespace hlab::data {
namespace {

uint64_t ReadLittleEndian(const uint8_t* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

absl::Status Corrupt(const std::string& path, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("corrupt shard file ", path, ": ", what,
                   "; re-run `hlab-data prepare` to rebuild the dataset"));
}

// Maps `path` and checks its size and SHA-256 against the manifest.
absl::StatusOr<std::unique_ptr<MappedFile>> MapVerified(
    const std::string& path, int64_t bytes, const std::string& sha256,
    bool verify_checksum) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (absl::IsNotFound(file.status())) {
    return absl::NotFoundError(
        absl::StrCat("missing shard file ", path,
                     "; re-run `hlab-data prepare` to rebuild the dataset"));
  }
  if (!file.ok()) return file.status();
  if (static_cast<int64_t>((*file)->size()) != bytes) {
    return Corrupt(path, absl::StrCat("size ", (*file)->size(),
                                      " bytes, manifest says ", bytes));
  }
  if (!verify_checksum) return file;
  internal::Sha256 sha;
  sha.Update((*file)->data(), (*file)->size());
  if (sha.HexDigest() != sha256) {
    return Corrupt(path, "SHA-256 checksum does not match the manifest");
  }
  return file;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardCorpus>> ShardCorpus::Open(
    const std::string& dir, absl::string_view split,
    const ShardCorpusOptions& options) {
  if (split != kTrainSplit && split != kHeldOutSplit) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown split '", split, "': expected train or heldout"));
  }
  std::unique_ptr<ShardCorpus> corpus(new ShardCorpus);
  HLAB_ASSIGN_OR_RETURN(corpus->manifest_, ReadManifest(dir));
  corpus->split_ = std::string(split);
  corpus->token_bytes_ = TokenBytes(corpus->manifest_.token_type);
  const SplitInfo& info = corpus->manifest_.split(split);
  int64_t documents = 0;
  int64_t tokens = 0;
  for (const ShardInfo& shard_info : info.shards) {
    std::string tokens_path = absl::StrCat(dir, "/", shard_info.tokens_file);
    std::string index_path = absl::StrCat(dir, "/", shard_info.index_file);
    Shard shard;
    HLAB_ASSIGN_OR_RETURN(
        shard.tokens,
        MapVerified(tokens_path, shard_info.tokens_bytes,
                    shard_info.tokens_sha256, options.verify_checksums));
    HLAB_ASSIGN_OR_RETURN(
        std::unique_ptr<MappedFile> index,
        MapVerified(index_path, shard_info.index_bytes, shard_info.index_sha256,
                    options.verify_checksums));
    if (shard_info.tokens_bytes !=
            shard_info.num_tokens * corpus->token_bytes_ ||
        shard_info.index_bytes != 8 * (shard_info.num_documents + 1)) {
      return Corrupt(tokens_path, "sizes disagree with the manifest's counts");
    }
    shard.offsets.resize(static_cast<size_t>(shard_info.num_documents + 1));
    for (size_t i = 0; i < shard.offsets.size(); ++i) {
      shard.offsets[i] = ReadLittleEndian(index->data() + 8 * i, 8);
      if (i > 0 && shard.offsets[i] < shard.offsets[i - 1]) {
        return Corrupt(index_path, "offsets decrease");
      }
    }
    if (shard.offsets.front() != 0 ||
        shard.offsets.back() != static_cast<uint64_t>(shard_info.num_tokens)) {
      return Corrupt(index_path, "offsets do not cover the shard");
    }
    shard.first_document = documents;
    documents += shard_info.num_documents;
    tokens += shard_info.num_tokens;
    corpus->shards_.push_back(std::move(shard));
  }
  if (documents != info.num_documents || tokens != info.num_tokens) {
    return absl::DataLossError(
        absl::StrCat("manifest ", dir, "/", kManifestFileName, ": the ", split,
                     " shards hold ", documents, " documents and ", tokens,
                     " tokens, but its totals say ", info.num_documents,
                     " and ", info.num_tokens, "; re-run `hlab-data prepare`"));
  }
  corpus->num_documents_ = documents;
  return corpus;
}

ShardCorpus::~ShardCorpus() = default;

const ShardCorpus::Shard& ShardCorpus::ShardOf(int64_t index) const {
  auto it = std::upper_bound(
      shards_.begin(), shards_.end(), index,
      [](int64_t i, const Shard& shard) { return i < shard.first_document; });
  return *(it - 1);
}

int64_t ShardCorpus::DocumentLength(int64_t index) const {
  if (index < 0 || index >= num_documents_) return 0;
  const Shard& shard = ShardOf(index);
  size_t local = static_cast<size_t>(index - shard.first_document);
  return static_cast<int64_t>(shard.offsets[local + 1] - shard.offsets[local]);
}

absl::StatusOr<Document> ShardCorpus::GetDocument(int64_t index) const {
  if (index < 0 || index >= num_documents_) {
    return absl::OutOfRangeError(absl::StrCat("document ", index,
                                              " not in [0, ", num_documents_,
                                              ") of split ", split_));
  }
  const Shard& shard = ShardOf(index);
  size_t local = static_cast<size_t>(index - shard.first_document);
  uint64_t begin = shard.offsets[local];
  uint64_t end = shard.offsets[local + 1];
  Document doc;
  doc.tokens.resize(end - begin);
  const uint8_t* data = shard.tokens->data() + begin * token_bytes_;
  for (uint64_t i = 0; i < end - begin; ++i) {
    doc.tokens[i] = static_cast<int32_t>(
        ReadLittleEndian(data + i * token_bytes_, token_bytes_));
  }
  return doc;
}

absl::Status VerifyDataset(const std::string& dir) {
  for (const char* split : {kTrainSplit, kHeldOutSplit}) {
    HLAB_RETURN_IF_ERROR(ShardCorpus::Open(dir, split).status());
  }
  return absl::OkStatus();
}

}  // namespace hlab::data
