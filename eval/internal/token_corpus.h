// TokenCorpus: documents held in memory as token ids, for evaluations that
// tokenize texts themselves (key tokens from a file, a reference of another
// tokenizer). Header-only.
//
// Thread-safety: not thread-safe while documents are added; const after.
//
//   TokenCorpus corpus(tokenizer->vocabulary());
//   corpus.Add(tokenizer->Encode(text));
#ifndef HLAB_EVAL_INTERNAL_TOKEN_CORPUS_H_
#define HLAB_EVAL_INTERNAL_TOKEN_CORPUS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/corpus.h"

namespace hlab::eval::internal {

class TokenCorpus final : public data::Corpus {
 public:
  explicit TokenCorpus(data::Vocabulary vocabulary)
      : vocabulary_(std::move(vocabulary)) {}
  void Add(std::vector<int32_t> tokens) {
    documents_.push_back(std::move(tokens));
  }
  int64_t num_documents() const override {
    return static_cast<int64_t>(documents_.size());
  }
  const data::Vocabulary& vocabulary() const override { return vocabulary_; }
  int64_t DocumentLength(int64_t index) const override {
    return static_cast<int64_t>(documents_[static_cast<size_t>(index)].size());
  }
  absl::StatusOr<data::Document> GetDocument(int64_t index) const override {
    if (index < 0 || index >= num_documents()) {
      return absl::OutOfRangeError(absl::StrCat("no document ", index));
    }
    data::Document doc;
    doc.tokens = documents_[static_cast<size_t>(index)];
    return doc;
  }

 private:
  data::Vocabulary vocabulary_;
  std::vector<std::vector<int32_t>> documents_;
};

}  // namespace hlab::eval::internal

#endif  // HLAB_EVAL_INTERNAL_TOKEN_CORPUS_H_
