// LongPPL (Fang et al., ICLR 2025): key-token selection with a reference
// model, and log(LongPPL) = a model's mean NLL over those key tokens.
//
// Selection follows the LongPPL code (reference notes, section 2.1): for a
// document truncated to `max_tokens`, the reference scores every token once
// with full context (loss_full); then, in overlapping chunks, with only a
// short context: for start = 0, W, 2W, ... while start < n - K, the chunk
// [start, start + K + W) is scored and its last W tokens (positions start+K
// .. start+K+W-1) get loss_short with K..K+W-1 tokens of context. A token is
// key when LSD = loss_short - loss_full > alpha and LCL = -loss_full > beta
// (defaults 2 and -2). The first K positions are never key. K
// (`short_context`) and W (`window`) default to the paper's 4096 / 1024 and
// should be scaled down with the model's trained context.
//
// Scoring (section 2.2): log(LongPPL) is the token-weighted mean NLL of the
// evaluated model over the key tokens of all documents with at least
// `min_key_tokens` (10) key tokens; the others are skipped, and the counts
// are reported. Evaluated and reference models must share a tokenizer
// (checked by the caller through data::Vocabulary::tokenizer).
//
// On the synthetic corpus the positions that truly need long context are
// known (data::Document::recall_positions), and KeyTokenAccuracy reports the
// selection's precision and recall against them, with the chance rate.
//
// Thread-safety: free functions; the scorer is used from the calling thread.
//
//   ModelScorer reference(reference_model);
//   KeyTokenConfig config;
//   config.short_context = 64;
//   config.window = 32;
//   HLAB_ASSIGN_OR_RETURN(KeyTokens keys,
//                         SelectKeyTokens(reference, docs, config, n));
//   ModelScorer evaluated(model);
//   LongPplResult r = ScoreLongPpl(evaluated, docs, keys);
#ifndef HLAB_EVAL_LONGPPL_H_
#define HLAB_EVAL_LONGPPL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/corpus.h"
#include "eval/token_scorer.h"

namespace hlab::eval {

struct KeyTokenConfig {
  int64_t short_context = 4096;  // K, "trunc_len" in the LongPPL code
  int64_t window = 1024;         // W, "sliding_window"
  double alpha = 2.0;            // LSD threshold
  double beta = -2.0;            // LCL threshold
  int64_t max_tokens = 32768;    // documents are truncated to this
  int64_t min_key_tokens = 10;   // documents with fewer are skipped
};

// InvalidArgument naming the field.
absl::Status ValidateKeyTokenConfig(const KeyTokenConfig& config);

// Key tokens of one document: token indices i (the prediction of token i
// from tokens < i), ascending.
struct DocumentKeyTokens {
  int64_t document = 0;
  int64_t length = 0;  // after truncation
  std::vector<int64_t> positions;
};

struct KeyTokens {
  KeyTokenConfig config;
  std::vector<DocumentKeyTokens> documents;  // one per selected document
  int64_t candidate_tokens = 0;  // positions >= K over all documents
};

// Selects key tokens in documents [0, num_documents) of `docs` that are
// longer than K + 1 tokens. InvalidArgument when no document is long enough
// (the message gives the longest length and K); errors of the corpus pass
// through.
absl::StatusOr<KeyTokens> SelectKeyTokens(TokenScorer& reference,
                                          const data::Corpus& docs,
                                          const KeyTokenConfig& config,
                                          int64_t num_documents);

struct LongPplResult {
  double log_longppl = 0;  // mean NLL over key tokens (nats), pooled
  // log(sum_d n_d exp(m_d) / sum_d n_d) over the scored documents d, with
  // n_d key tokens of mean NLL m_d: the log of the key-token-weighted mean
  // of per-document perplexities (the LongPPL code before July 2025). At
  // least log_longppl (Jensen), equal when every m_d is.
  double log_longppl_per_document = 0;
  int64_t documents = 0;  // documents scored (>= min_key_tokens keys)
  int64_t documents_skipped = 0;
  int64_t key_tokens = 0;
};

// Scores `model` on the key tokens of `keys` (same documents, same
// truncation). FailedPrecondition when no document has enough key tokens,
// or no key token was selected at all.
absl::StatusOr<LongPplResult> ScoreLongPpl(TokenScorer& model,
                                           const data::Corpus& docs,
                                           const KeyTokens& keys);

struct KeyTokenAccuracy {
  double precision = 0;  // selected positions that are true recalls
  double recall = 0;     // eligible true recalls that were selected
  double chance = 0;     // precision of a random selection
  int64_t selected = 0, true_positions = 0, hits = 0;
};

// Compares key tokens with the documents' recall_positions (positions < K
// are not eligible and not counted).
absl::StatusOr<KeyTokenAccuracy> CompareWithRecallPositions(
    const data::Corpus& docs, const KeyTokens& keys);

// Key tokens as JSON, for the cache of (reference, dataset, parameters).
std::string KeyTokensToJson(const KeyTokens& keys);
absl::StatusOr<KeyTokens> KeyTokensFromJson(const std::string& json);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_LONGPPL_H_
