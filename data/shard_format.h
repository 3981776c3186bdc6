// The on-disk format of a prepared dataset (`hlab-data prepare`
// output), shared by the writer (data/import.h) and the reader
// (data/shard_corpus.h). See docs/data.md.
//
//   DIR/manifest.json          format version, tokenizer, counts, checksums
//   DIR/train-00000.tokens     token ids, little-endian uint16 (vocabulary
//                              <= 65536 ids) or uint32, documents back to
//                              back without separators
//   DIR/train-00000.index      little-endian uint64 token offsets of the
//                              shard's documents, num_documents + 1 entries
//                              (first 0, last num_tokens)
//   DIR/heldout-00000.*        the same for the held-out split
//   DIR/tokenizer.model        (SentencePiece) or DIR/gpt2/ (GPT-2): a copy
//                              of the tokenizer's files, so the dataset
//                              stands alone
//
// A document never spans shards. Every .tokens and .index file has its size
// and SHA-256 in the manifest.
//
// Thread-safety: plain data and pure functions.
//
//   HLAB_ASSIGN_OR_RETURN(Manifest m, ReadManifest("/data/c4"));
//   for (const ShardInfo& shard : m.train.shards) { ... }
#ifndef HLAB_DATA_SHARD_FORMAT_H_
#define HLAB_DATA_SHARD_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/corpus.h"

namespace hlab::data {

inline constexpr int kShardFormatVersion = 1;
inline constexpr char kManifestFileName[] = "manifest.json";
inline constexpr char kTrainSplit[] = "train";
inline constexpr char kHeldOutSplit[] = "heldout";

// One shard: a .tokens file and its .index file.
struct ShardInfo {
  std::string tokens_file;  // file name relative to the dataset directory
  std::string index_file;
  int64_t num_documents = 0;
  int64_t num_tokens = 0;
  int64_t tokens_bytes = 0;
  int64_t index_bytes = 0;
  std::string tokens_sha256;  // 64 lowercase hex digits
  std::string index_sha256;
};

// One split ("train" or "heldout").
struct SplitInfo {
  int64_t num_documents = 0;
  int64_t num_tokens = 0;
  int64_t max_document_tokens = 0;
  std::vector<ShardInfo> shards;
};

// One input file and what it contributed (both splits).
struct SourceInfo {
  std::string path;    // as given on the command line, or found in a dir
  std::string format;  // "jsonl" or "text"
  int64_t bytes = 0;   // size on disk
  int64_t num_documents = 0;
  int64_t skipped_empty = 0;  // documents with empty text, not imported
};

struct Manifest {
  int format_version = kShardFormatVersion;
  std::string tokenizer_spec;  // relative paths are relative to the dataset
  Vocabulary vocabulary;       // vocabulary.tokenizer identifies it
  std::string token_type;      // "uint16" or "uint32"
  std::string text_field;      // JSONL field(s), "a+b" joins two fields
  double held_out_fraction = 0;
  uint64_t split_seed = 0;
  int64_t shard_tokens = 0;  // target tokens per shard
  std::vector<SourceInfo> sources;
  SplitInfo train;
  SplitInfo heldout;

  const SplitInfo& split(absl::string_view name) const {
    return name == kHeldOutSplit ? heldout : train;
  }
};

// "uint16" for vocabularies of at most 65536 ids, else "uint32".
std::string TokenTypeFor(int64_t vocab_size);
// Bytes per token of `token_type` (2 or 4), 0 for an unknown type.
int TokenBytes(absl::string_view token_type);
// "train-00003.tokens" for ("train", 3, "tokens").
std::string ShardFileName(absl::string_view split, int index,
                          absl::string_view extension);

// The manifest as pretty-printed JSON (deterministic key order).
std::string ManifestToJson(const Manifest& manifest);

// Parses manifest JSON read from `path` (used in messages). DataLoss naming
// `path` if it is not a valid manifest; FailedPrecondition if its format
// version is newer than this build understands.
absl::StatusOr<Manifest> ParseManifest(absl::string_view json,
                                       const std::string& path);

// Reads DIR/manifest.json. NotFound (saying to run `data prepare`) when the
// directory or the manifest is missing; otherwise as ParseManifest.
absl::StatusOr<Manifest> ReadManifest(const std::string& dir);

}  // namespace hlab::data

#endif  // HLAB_DATA_SHARD_FORMAT_H_
