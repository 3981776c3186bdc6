#include "eval/validation_loss.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace hlab::eval {
namespace {

absl::Status ValidateOptions(const ValidationLossOptions& o) {
  if (o.tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens: must be >= 0, got ", o.tokens));
  }
  if (o.batch_sequences < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_sequences: must be >= 1, got ", o.batch_sequences));
  }
  return absl::OkStatus();
}

// Accumulates the NLL of batches of sequences.
class BatchedSum {
 public:
  BatchedSum(TokenScorer& scorer, int64_t batch)
      : scorer_(scorer), batch_(batch) {}

  void Add(std::vector<int32_t> sequence) {
    pending_.push_back(std::move(sequence));
    if (static_cast<int64_t>(pending_.size()) >= batch_) Flush();
  }

  void Flush() {
    if (pending_.empty()) return;
    for (const std::vector<float>& nll : scorer_.ScoreBatch(pending_)) {
      for (float v : nll) sum_ += v;
      tokens_ += static_cast<int64_t>(nll.size());
      ++sequences_;
    }
    pending_.clear();
  }

  double sum() const { return sum_; }
  int64_t tokens() const { return tokens_; }
  int64_t sequences() const { return sequences_; }
  // Tokens scored or waiting to be.
  int64_t queued_tokens() const {
    int64_t n = tokens_;
    for (const auto& s : pending_) n += static_cast<int64_t>(s.size()) - 1;
    return n;
  }

 private:
  TokenScorer& scorer_;
  int64_t batch_;
  std::vector<std::vector<int32_t>> pending_;
  double sum_ = 0;
  int64_t tokens_ = 0, sequences_ = 0;
};

}  // namespace

absl::StatusOr<ValidationLossResult> MixtureValidationLoss(
    TokenScorer& scorer, const data::SequenceMixture& mixture,
    const ValidationLossOptions& options) {
  HLAB_RETURN_IF_ERROR(ValidateOptions(options));
  if (options.tokens < 1) {
    return absl::InvalidArgumentError("tokens: must be > 0 for a mixture");
  }
  const int32_t separator = mixture.vocabulary().end_of_document;
  BatchedSum sum(scorer, options.batch_sequences);
  ValidationLossResult r;
  for (int64_t k = 0; sum.queued_tokens() < options.tokens; ++k) {
    HLAB_ASSIGN_OR_RETURN(data::PackedSequence s, mixture.Sample(k));
    // Each packed document is preceded by the separator; a sequence that
    // starts inside a document has none in front of it.
    const int64_t inputs = static_cast<int64_t>(s.tokens.size()) - 1;
    const int64_t starts =
        std::count(s.tokens.begin(), s.tokens.begin() + inputs, separator);
    r.documents += std::max<int64_t>(starts, 1);
    sum.Add(std::move(s.tokens));
  }
  sum.Flush();
  r.tokens = sum.tokens();
  r.sequences = sum.sequences();
  r.loss = sum.sum() / static_cast<double>(r.tokens);
  return r;
}

absl::StatusOr<ValidationLossResult> CorpusValidationLoss(
    TokenScorer& scorer, const data::Corpus& docs, int64_t seq_len,
    const ValidationLossOptions& options) {
  HLAB_RETURN_IF_ERROR(ValidateOptions(options));
  if (seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len: must be >= 1, got ", seq_len));
  }
  const int32_t separator = docs.vocabulary().end_of_document;
  BatchedSum sum(scorer, options.batch_sequences);
  ValidationLossResult r;
  for (int64_t d = 0; d < docs.num_documents(); ++d) {
    if (options.tokens > 0 && sum.queued_tokens() >= options.tokens) break;
    HLAB_ASSIGN_OR_RETURN(data::Document doc, docs.GetDocument(d));
    if (doc.tokens.empty()) continue;
    std::vector<int32_t> text;
    text.reserve(doc.tokens.size() + 1);
    text.push_back(separator);
    text.insert(text.end(), doc.tokens.begin(), doc.tokens.end());
    const int64_t n = static_cast<int64_t>(text.size());
    // Window j predicts positions j*S+1 .. min((j+1)*S, n-1).
    for (int64_t start = 0; start + 1 < n; start += seq_len) {
      if (options.tokens > 0 && sum.queued_tokens() >= options.tokens) break;
      const int64_t end = std::min(n, start + seq_len + 1);
      sum.Add(std::vector<int32_t>(text.begin() + start, text.begin() + end));
    }
    ++r.documents;
  }
  sum.Flush();
  if (sum.tokens() == 0) {
    return absl::FailedPreconditionError(
        "the validation corpus has no document with any token");
  }
  r.tokens = sum.tokens();
  r.sequences = sum.sequences();
  r.loss = sum.sum() / static_cast<double>(r.tokens);
  return r;
}

}  // namespace hlab::eval
