// ShardCorpus: the Corpus (data/corpus.h) of a prepared dataset, one split
// ("train" or "heldout") of `hlab-data prepare` output (format in
// data/shard_format.h).
//
// Open() reads the manifest, memory-maps every shard and index of the split
// and verifies their sizes and SHA-256 checksums (hashing runs at about
// 1 GB/s per core), so corruption is found at start-up, before training
// depends on it. Documents are then served from the
// maps without copies beyond the returned token vector. The held-out split
// may be empty (num_documents() == 0) when the dataset was prepared with
// --held-out 0.
//
// Thread-safety: immutable after Open(); safe for concurrent const calls.
//
//   HLAB_ASSIGN_OR_RETURN(std::unique_ptr<ShardCorpus> corpus,
//                         ShardCorpus::Open("/data/prepared/c4", "train"));
//   HLAB_ASSIGN_OR_RETURN(Document doc, corpus->GetDocument(0));
#ifndef HLAB_DATA_SHARD_CORPUS_H_
#define HLAB_DATA_SHARD_CORPUS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mapped_file.h"
#include "data/corpus.h"
#include "data/shard_format.h"

namespace hlab::data {

struct ShardCorpusOptions {
  // Hash every file of the split against the manifest on open. Sizes and
  // index offsets are always checked; turning this off trades detecting
  // silent corruption for a faster start on very large datasets.
  bool verify_checksums = true;
};

class ShardCorpus final : public Corpus {
 public:
  // Opens split `split` ("train" or "heldout") of the dataset in `dir`.
  // Errors:
  //   InvalidArgument  `split` is neither "train" nor "heldout"
  //   NotFound         no manifest in `dir`, or a shard or index file is
  //                    missing (the message names the file)
  //   DataLoss         a file's size, checksum or index does not match the
  //                    manifest (naming the file; re-run `data prepare`)
  //   FailedPrecondition  the manifest's format is newer than this build
  static absl::StatusOr<std::unique_ptr<ShardCorpus>> Open(
      const std::string& dir, absl::string_view split = kTrainSplit,
      const ShardCorpusOptions& options = {});
  ~ShardCorpus() override;

  int64_t num_documents() const override { return num_documents_; }
  const Vocabulary& vocabulary() const override { return manifest_.vocabulary; }
  // 0 for an index outside [0, num_documents()).
  int64_t DocumentLength(int64_t index) const override;
  // OutOfRange for a bad index. Tokens only: recall_positions are empty.
  absl::StatusOr<Document> GetDocument(int64_t index) const override;

  const Manifest& manifest() const { return manifest_; }
  const std::string& split() const { return split_; }

 private:
  struct Shard {
    std::unique_ptr<MappedFile> tokens;
    std::vector<uint64_t> offsets;  // num_documents + 1 token offsets
    int64_t first_document = 0;     // global index of its document 0
  };
  ShardCorpus() = default;
  // Shard holding global document `index` (valid index).
  const Shard& ShardOf(int64_t index) const;

  Manifest manifest_;
  std::string split_;
  int token_bytes_ = 2;
  int64_t num_documents_ = 0;
  std::vector<Shard> shards_;
};

// Verifies every shard and index of both splits of the dataset in `dir`
// against its manifest (sizes, checksums, index consistency). OK or the
// first error ShardCorpus::Open would report.
absl::Status VerifyDataset(const std::string& dir);

}  // namespace hlab::data

#endif  // HLAB_DATA_SHARD_CORPUS_H_
