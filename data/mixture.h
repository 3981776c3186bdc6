// SequenceMixture: packs documents from a long and a short corpus into
// fixed-length training sequences, mixed by tokens in a given ratio.
//
// Sample k (the k-th training sequence of a run) is a pure function of
// (seed, k): its kind (long with probability long_fraction, else short) and
// its documents are drawn from a counter-based generator, so the batch of any
// step can be built without replaying the stream. This is what makes exact
// resume and WSD branching possible (train/trainer.h). Every sequence has the
// same length, so the long/short ratio by tokens equals the ratio by
// sequences, long_fraction in expectation.
//
// Packing: documents of the drawn kind are appended, each preceded by the
// end-of-document separator (which doubles as BOS), until seq_len + 1 tokens
// are filled; the last document is cut. A long document therefore starts at
// the start of its sequence, so its early bindings precede their recalls.
//
// Thread-safe: immutable after construction; the corpora must outlive it.
//
//   MixtureConfig config;
//   config.seq_len = 256;
//   config.long_fraction = 0.5;
//   config.seed = 1;
//   SequenceMixture mixture(&long_docs, &short_docs, config);
//   HLAB_ASSIGN_OR_RETURN(PackedSequence s, mixture.Sample(k));
//   // s.tokens: seq_len + 1 ids; inputs = [0, T), targets = [1, T + 1)
#ifndef HLAB_DATA_MIXTURE_H_
#define HLAB_DATA_MIXTURE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/corpus.h"

namespace hlab::data {

struct MixtureConfig {
  int64_t seq_len = 256;
  double long_fraction = 0.5;
  uint64_t seed = 0;
};

// One training sequence. `recall_targets` are indices t into the targets
// (tokens[t + 1]) whose prediction needs long context, with their distances.
struct PackedSequence {
  std::vector<int32_t> tokens;  // seq_len + 1
  bool long_kind = false;
  std::vector<int64_t> recall_targets;
  std::vector<int64_t> recall_distances;
};

// InvalidArgument naming the field.
absl::Status ValidateMixtureConfig(const MixtureConfig& config);

class SequenceMixture {
 public:
  // Either corpus may be null when its fraction is 0 (or 1). Both must share
  // a vocabulary (checked by Create).
  static absl::StatusOr<SequenceMixture> Create(const Corpus* long_docs,
                                                const Corpus* short_docs,
                                                const MixtureConfig& config);

  // Propagates the corpora's errors (DataLoss for a corrupt shard).
  absl::StatusOr<PackedSequence> Sample(int64_t index) const;

  const MixtureConfig& config() const { return config_; }
  const Vocabulary& vocabulary() const;

 private:
  SequenceMixture(const Corpus* long_docs, const Corpus* short_docs,
                  const MixtureConfig& config)
      : long_(long_docs), short_(short_docs), config_(config) {}

  const Corpus* long_;
  const Corpus* short_;
  MixtureConfig config_;
};

}  // namespace hlab::data

#endif  // HLAB_DATA_MIXTURE_H_
