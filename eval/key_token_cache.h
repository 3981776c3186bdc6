// KeyTokenCache: LongPPL key tokens on disk, computed once per (reference
// checkpoint, dataset, selection parameters) and reused by every model
// evaluated against that reference.
//
// An entry is one JSON file, <dir>/longppl-keys/<SHA-256 of the key>.json,
// holding the key itself and the key tokens (eval/longppl.h,
// KeyTokensToJson). It is written to a temporary file in the same
// directory, fsynced and renamed into place, so readers see a whole entry or
// none; two evaluators computing the same entry at once both write whole
// files and the last rename wins (they are identical). An entry that does
// not parse, or whose stored key differs from the one asked for, is
// recomputed and rewritten, with a warning.
//
// Thread-safety: safe to share between processes and threads (entries are
// immutable once renamed into place).
//
//   KeyTokenCache cache("/data/hlab/cache");
//   KeyTokenCacheKey key;
//   key.reference_sha256 = meta.payload_sha256;
//   key.dataset = dataset_identity;
//   key.config = config;
//   HLAB_ASSIGN_OR_RETURN(auto keys, cache.GetOrCompute(key, [&] {
//     return SelectKeyTokens(reference, docs, config, n); }, &warnings));
#ifndef HLAB_EVAL_KEY_TOKEN_CACHE_H_
#define HLAB_EVAL_KEY_TOKEN_CACHE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/longppl.h"

namespace hlab::eval {

struct KeyTokenCacheKey {
  std::string reference_sha256;  // the reference checkpoint's payload hash
  // Identity of the documents the keys are selected on (EvalDocuments'
  // identity: a SHA-256 of their truncated tokens), and how many.
  std::string dataset;
  int64_t documents = 0;
  KeyTokenConfig config;
};

// Where a lookup's answer came from.
enum class CacheOutcome { kDisabled, kHit, kMiss, kRecomputed };
const char* CacheOutcomeName(CacheOutcome outcome);

class KeyTokenCache {
 public:
  // `dir` empty: no cache (every lookup computes).
  explicit KeyTokenCache(std::string dir) : dir_(std::move(dir)) {}

  // The cached key tokens of `key`, or `compute()`'s, stored for next time.
  // A corrupt or mismatched entry adds a line to `warnings` and is
  // recomputed. Errors of `compute` pass through (nothing is stored);
  // Unavailable when the entry cannot be written (naming the file).
  absl::StatusOr<KeyTokens> GetOrCompute(
      const KeyTokenCacheKey& key,
      const std::function<absl::StatusOr<KeyTokens>()>& compute,
      std::vector<std::string>* warnings, CacheOutcome* outcome = nullptr);

  // The entry's path ("" without a cache directory).
  std::string PathFor(const KeyTokenCacheKey& key) const;

 private:
  std::string dir_;
};

}  // namespace hlab::eval

#endif  // HLAB_EVAL_KEY_TOKEN_CACHE_H_
