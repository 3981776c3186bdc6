// LengthFilteredCorpus: a view of the documents of another Corpus whose
// token count lies in [min_tokens, max_tokens), for example the long
// (>= 4096 tokens) and the short documents of one prepared dataset, when the
// long/short mixture (data/mixture.h) should draw both kinds from it.
//
// Create() scans base->DocumentLength() once (index reads only for a
// ShardCorpus) and keeps the matching indices: 8 bytes per kept document.
//
// Thread-safety: immutable after Create(); safe for concurrent const calls
// if `base` is. `base` is not owned and must outlive the view.
//
//   HLAB_ASSIGN_OR_RETURN(auto corpus, ShardCorpus::Open(dir));
//   HLAB_ASSIGN_OR_RETURN(auto long_docs,
//                         LengthFilteredCorpus::Create(corpus.get(), 4096));
//   HLAB_ASSIGN_OR_RETURN(auto short_docs,
//                         LengthFilteredCorpus::Create(corpus.get(), 1, 4096));
#ifndef HLAB_DATA_LENGTH_FILTERED_CORPUS_H_
#define HLAB_DATA_LENGTH_FILTERED_CORPUS_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "data/corpus.h"

namespace hlab::data {

class LengthFilteredCorpus final : public Corpus {
 public:
  // InvalidArgument if `base` is null, min_tokens < 0 or
  // max_tokens <= min_tokens. The view may be empty (num_documents() == 0).
  static absl::StatusOr<std::unique_ptr<LengthFilteredCorpus>> Create(
      const Corpus* base, int64_t min_tokens,
      int64_t max_tokens = std::numeric_limits<int64_t>::max());

  int64_t num_documents() const override {
    return static_cast<int64_t>(indices_.size());
  }
  const Vocabulary& vocabulary() const override { return base_->vocabulary(); }
  // 0 for an index outside [0, num_documents()).
  int64_t DocumentLength(int64_t index) const override;
  // OutOfRange for a bad index; otherwise the base corpus's answer.
  absl::StatusOr<Document> GetDocument(int64_t index) const override;

  // The base corpus's index of document `index` (valid index).
  int64_t base_index(int64_t index) const {
    return indices_[static_cast<size_t>(index)];
  }

 private:
  LengthFilteredCorpus(const Corpus* base, std::vector<int64_t> indices)
      : base_(base), indices_(std::move(indices)) {}

  const Corpus* base_;
  std::vector<int64_t> indices_;
};

}  // namespace hlab::data

#endif  // HLAB_DATA_LENGTH_FILTERED_CORPUS_H_
