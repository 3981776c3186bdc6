// Validation loss: the mean per-token NLL (nats) of a model on held-out
// short-context text, the paper's "Loss" target (seeds section 3).
//
// Two sources:
//   * a held-out SequenceMixture (data/mixture.h): sequences k = 0, 1, ...
//     of seq_len + 1 tokens, exactly the packing training uses, so the
//     figure is comparable with hlab-train's val_loss records;
//   * a Corpus of whole documents (a JSONL file imported with data/import.h,
//     or a prepared split): each document, preceded by the end-of-document
//     separator as in training, is cut into non-overlapping windows of
//     seq_len predicted tokens; documents are taken in order.
// Sequences are scored `batch_sequences` per forward pass
// (TokenScorer::ScoreBatch). The result counts exactly the tokens scored
// and the documents they came from.
//
// Thread-safety: free functions; the scorer is used from the calling thread.
//
//   ModelScorer scorer(model);
//   ValidationLossOptions options;
//   options.tokens = 65536;
//   HLAB_ASSIGN_OR_RETURN(
//       ValidationLossResult r,
//       MixtureValidationLoss(scorer, data->validation(), options));
//   // r.loss, r.tokens (>= 65536, whole sequences), r.documents
#ifndef HLAB_EVAL_VALIDATION_LOSS_H_
#define HLAB_EVAL_VALIDATION_LOSS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/corpus.h"
#include "data/mixture.h"
#include "eval/token_scorer.h"

namespace hlab::eval {

struct ValidationLossOptions {
  // Predicted tokens to score, rounded up to whole sequences (mixture) or
  // windows (corpus). For a corpus, 0 scores every document.
  int64_t tokens = 0;
  int64_t batch_sequences = 8;  // sequences per forward pass
};

struct ValidationLossResult {
  double loss = 0;        // mean NLL per predicted token (nats)
  int64_t tokens = 0;     // predicted tokens scored
  int64_t documents = 0;  // documents (whole or cut) they belong to
  int64_t sequences = 0;  // scored sequences / windows
};

// InvalidArgument naming the field for bad options; the mixture's errors
// (DataLoss for a corrupt shard) pass through.
absl::StatusOr<ValidationLossResult> MixtureValidationLoss(
    TokenScorer& scorer, const data::SequenceMixture& mixture,
    const ValidationLossOptions& options);

// As above on whole documents of `docs`, windows of `seq_len` predictions.
// FailedPrecondition when the corpus has no document with a token.
absl::StatusOr<ValidationLossResult> CorpusValidationLoss(
    TokenScorer& scorer, const data::Corpus& docs, int64_t seq_len,
    const ValidationLossOptions& options);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_VALIDATION_LOSS_H_
