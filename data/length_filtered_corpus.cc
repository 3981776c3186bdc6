#include "data/length_filtered_corpus.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace hlab::data {

absl::StatusOr<std::unique_ptr<LengthFilteredCorpus>>
LengthFilteredCorpus::Create(const Corpus* base, int64_t min_tokens,
                             int64_t max_tokens) {
  if (base == nullptr) {
    return absl::InvalidArgumentError("length filter needs a corpus");
  }
  if (min_tokens < 0 || max_tokens <= min_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("length filter needs 0 <= min_tokens < max_tokens, got [",
                     min_tokens, ", ", max_tokens, ")"));
  }
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < base->num_documents(); ++i) {
    int64_t length = base->DocumentLength(i);
    if (length >= min_tokens && length < max_tokens) indices.push_back(i);
  }
  return std::unique_ptr<LengthFilteredCorpus>(
      new LengthFilteredCorpus(base, std::move(indices)));
}

int64_t LengthFilteredCorpus::DocumentLength(int64_t index) const {
  if (index < 0 || index >= num_documents()) return 0;
  return base_->DocumentLength(base_index(index));
}

absl::StatusOr<Document> LengthFilteredCorpus::GetDocument(
    int64_t index) const {
  if (index < 0 || index >= num_documents()) {
    return absl::OutOfRangeError(absl::StrCat(
        "document ", index, " not in [0, ", num_documents(), ") of the view"));
  }
  return base_->GetDocument(base_index(index));
}

}  // namespace hlab::data
