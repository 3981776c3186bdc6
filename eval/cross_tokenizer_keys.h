// SelectKeyTokensAcrossTokenizers: LongPPL's key tokens chosen by a
// reference whose tokenizer is not the evaluated model's (the LongPPL
// paper's cross-tokenizer LongPPL; docs/evaluation.md, "A reference with
// another tokenizer").
//
// For each document of the evaluated model's corpus, cut to
// config.max_tokens of its tokens: its text is the concatenation of its
// tokens' bytes; the reference tokenizer encodes that text with offsets;
// the reference selects key tokens on its own tokens (K, W, alpha and beta
// count reference tokens, as SelectKeyTokens); their byte spans become key
// ranges (data::KeyRangesOfTokens); and the model's tokens whose bytes lie
// entirely inside a range are its key tokens (data::KeyTokenIndices, the
// reference code's cal_overlap). Token 0, with no prediction, never is.
//
// The model's tokenizer must decode token by token to the bytes of the
// text (byte, GPT-2 and Hugging Face byte-level BPE do; SentencePiece does
// not): otherwise FailedPrecondition says so.
//
// Thread-safety: as the scorer (not thread-safe for hlab's scorers).
//
//   HLAB_ASSIGN_OR_RETURN(KeyTokens keys, SelectKeyTokensAcrossTokenizers(
//       reference, *reference_tokenizer, *model_tokenizer, corpus, config, n));
//   auto result = ScoreLongPpl(model, corpus, keys);
#ifndef HLAB_EVAL_CROSS_TOKENIZER_KEYS_H_
#define HLAB_EVAL_CROSS_TOKENIZER_KEYS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "eval/longppl.h"
#include "eval/token_scorer_interface.h"

namespace hlab::eval {

// KeyTokens over documents [0, num_documents) of `docs` (the model's
// tokens), in the model's positions. candidate_tokens counts the model's
// tokens that lie after the reference's first K tokens of their document.
// InvalidArgument when no document gives the reference more than K + 1
// tokens; errors of the corpus and the mapping pass through.
absl::StatusOr<KeyTokens> SelectKeyTokensAcrossTokenizers(
    TokenScorer& reference, const data::Tokenizer& reference_tokenizer,
    const data::Tokenizer& model_tokenizer, const data::Corpus& docs,
    const KeyTokenConfig& config, int64_t num_documents);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_CROSS_TOKENIZER_KEYS_H_
