// Corpus: a read-only, indexable collection of tokenized documents, the one
// interface the trainer and the evaluators read data through.
//
// Implementations: the built-in synthetic corpus (data/synthetic_corpus.h),
// generated on demand from a seed, and the prepared shard corpus
// (data/shard_corpus.h), read from `hlab-data prepare` output. A
// document is addressed by its index, so any sample can be built from
// (seed, sample index) alone without replaying a stream (data/mixture.h).
//
// Thread-safety: implementations are safe for concurrent const calls.
//
//   std::unique_ptr<Corpus> corpus = ...;
//   HLAB_ASSIGN_OR_RETURN(Document doc, corpus->GetDocument(17));
//   // doc.tokens: token ids of document 17, no separators
#ifndef HLAB_DATA_CORPUS_H_
#define HLAB_DATA_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hlab::data {

// One document. `recall_positions` are the indices in `tokens` whose
// prediction needs context from far back (known only for the synthetic
// corpus; empty otherwise), and `recall_distances[i]` is how far back, in
// tokens, the evidence for `recall_positions[i]` lies.
struct Document {
  std::vector<int32_t> tokens;
  std::vector<int64_t> recall_positions;
  std::vector<int64_t> recall_distances;
};

// The token ids a model needs to know beyond the text itself.
struct Vocabulary {
  int64_t size = 0;              // number of token ids, specials included
  int32_t end_of_document = -1;  // separator between packed documents
  int32_t pad = -1;              // padding for batched evaluation
  std::string tokenizer;         // a name that identifies the tokenizer
};

class Corpus {
 public:
  virtual ~Corpus() = default;

  virtual int64_t num_documents() const = 0;
  virtual const Vocabulary& vocabulary() const = 0;

  // Token count of document `index` (0 <= index < num_documents()), without
  // reading its tokens where the implementation can.
  virtual int64_t DocumentLength(int64_t index) const = 0;

  // Returns OutOfRange for a bad index, DataLoss if the stored tokens fail
  // their checksum (naming the file).
  virtual absl::StatusOr<Document> GetDocument(int64_t index) const = 0;
};

}  // namespace hlab::data

#endif  // HLAB_DATA_CORPUS_H_
