// SyntheticCorpus: the built-in corpus, generated on demand from a seed, whose
// documents mix learnable local structure with long-range recalls at known
// distances.
//
// Documents are byte-level text (ids 0-255; see data/byte_tokenizer.h). Two
// kinds of sentence make up a document:
//   * filler: words from a seeded Zipfian lexicon of pseudo-words chained by
//     a sparse Zipf-weighted bigram table ("tovu relka mip ..."), so
//     short-context loss falls smoothly as a model learns the lexicon and
//     its transitions, frequent ones first;
//   * bindings and recalls: a binding is one reserved token (ids 0x80-0xF7,
//     never in text) that holds a key and a value, `<C7>. `; later the
//     recall `C7. ` names the key as an upper-case letter and repeats the
//     value digit. The value cannot be predicted from anything but the
//     binding, which lies `distance` tokens back. Distances are drawn
//     log-uniformly between `min_distance` and the room left in the
//     document, so they span the inside of a small sliding window to far
//     beyond the largest one. The keys of a document's open bindings are
//     distinct, so every recall has one answer.
// Why one token: with the key and the value in one token, a recall is one
// attention lookup (match the key, copy the value), which a tiny model
// learns within about a million tokens; spelled over several tokens ("key
// QZXW is 4821"), it needs an induction circuit over two layers, which
// showed nothing after 2M tokens at the same scale (docs/data.md).
// Every recall's value position and distance are returned with the document
// (Document::recall_positions / recall_distances): evaluation can check
// which tokens truly need long context.
//
// Document i is a pure function of (seed, split, kind, i): no state, no
// stream to replay. The held-out split uses a disjoint seed domain, so its
// documents never occur in training.
//
// Thread-safe: immutable after construction.
//
//   SyntheticCorpusConfig config;
//   config.seed = 7;
//   config.min_length = 1025;
//   config.max_length = 2048;
//   SyntheticCorpus long_docs(config);
//   HLAB_ASSIGN_OR_RETURN(Document doc, long_docs.GetDocument(3));
#ifndef HLAB_DATA_SYNTHETIC_CORPUS_H_
#define HLAB_DATA_SYNTHETIC_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/corpus.h"

namespace hlab::data {

enum class Split { kTrain, kHeldOut };

// The binding alphabet (shared with eval/niah.h's corpus-format needles).
// The generator's version: bump it whenever a seed's documents change, so
// that runs made on the old corpus get other ids (task::
// kSyntheticCorpusVersion records it in a run's config; train/
// training_data.cc asserts the two agree). 2: one binding token (8b9f9ad).
// 3: the Zipfian filler; short documents filler only by default.
inline constexpr int kSyntheticCorpusVersion = 3;

inline constexpr int kSyntheticKeys = 12;    // recalled as 'A'..'L'
inline constexpr int kSyntheticValues = 10;  // recalled as '0'..'9'
inline constexpr int32_t kFirstBindingToken = 0x80;
// The binding token of (key, value); key < kSyntheticKeys, value <
// kSyntheticValues.
inline constexpr int32_t BindingToken(int key, int value) {
  return kFirstBindingToken + key * kSyntheticValues + value;
}
inline constexpr char KeyLetter(int key) {
  return static_cast<char>('A' + key);
}
inline constexpr char ValueDigit(int value) {
  return static_cast<char>('0' + value);
}
// A binding sentence "<b>. " and its recall "Kv. " as text (bytes).
std::string BindingSentence(int key, int value);
std::string RecallSentence(int key, int value);

struct SyntheticCorpusConfig {
  uint64_t seed = 0;
  Split split = Split::kTrain;
  // Document lengths in tokens, drawn uniformly from [min, max].
  int64_t min_length = 64;
  int64_t max_length = 512;
  // Shortest binding-to-recall distance, in tokens.
  int64_t min_distance = 4;
  // Probability that a sentence opens a new binding (when one fits).
  double binding_rate = 1.0;
  // (The training recipe's defaults, task::SyntheticDataConfig's: asserted
  // equal in train/training_data.cc.)
  // Number of distinct documents; indices wrap beyond it.
  int64_t num_documents = int64_t{1} << 40;
};

// InvalidArgument naming the field for inconsistent configs.
absl::Status ValidateSyntheticCorpusConfig(const SyntheticCorpusConfig& c);

class SyntheticCorpus final : public Corpus {
 public:
  // `config` must be valid (ValidateSyntheticCorpusConfig).
  explicit SyntheticCorpus(const SyntheticCorpusConfig& config);

  int64_t num_documents() const override { return config_.num_documents; }
  const Vocabulary& vocabulary() const override { return vocabulary_; }
  int64_t DocumentLength(int64_t index) const override;
  absl::StatusOr<Document> GetDocument(int64_t index) const override;

  const SyntheticCorpusConfig& config() const { return config_; }

 private:
  struct Word {
    std::string text;
    std::vector<int32_t> successors;  // bigram table: likely next words
  };

  uint64_t DocumentSeed(int64_t index) const;

  SyntheticCorpusConfig config_;
  Vocabulary vocabulary_;
  std::vector<Word> lexicon_;
  std::vector<double> word_cdf_, successor_cdf_;
};

}  // namespace hlab::data

#endif  // HLAB_DATA_SYNTHETIC_CORPUS_H_
