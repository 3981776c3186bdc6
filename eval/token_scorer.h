// ModelScorer: the TokenScorer (eval/token_scorer_interface.h) of a HybridLM,
// the one primitive the evaluations need (validation loss, LongPPL's
// key-token selection and scoring, needle-in-a-haystack).
//
// One forward pass in inference mode on the model's device, fp32
// log-softmax; ScoreBatch runs sequences of equal length as one (B, T)
// batch; NextToken is the argmax of the last position's logits
// (HybridLM::last_logits: never the whole logits past a block). Generate
// decodes with a cache (HybridLM::prefill / step, model/hybrid_lm.h): one
// pass over the prompt, then one token per step, the same tokens as
// TokenScorer's default (docs/evaluation.md, "Generation"). Tests
// substitute scorers with known answers.
//
// Thread-safety: ModelScorer is not thread-safe (LibTorch modules are not).
//
//   ModelScorer scorer(model);
//   std::vector<float> nll = scorer.Score(tokens);  // nll[i - 1]: token i
//   absl::StatusOr<int32_t> next = scorer.NextToken(tokens);
//   GenerateOptions options;
//   options.max_new_tokens = 64;
//   auto out = scorer.Generate(tokens, options);
#ifndef HLAB_EVAL_TOKEN_SCORER_H_
#define HLAB_EVAL_TOKEN_SCORER_H_

#include <cstdint>
#include <vector>

#include "eval/token_scorer_interface.h"
#include "model/hybrid_lm.h"

namespace hlab::eval {

class ModelScorer final : public TokenScorer {
 public:
  explicit ModelScorer(model::HybridLM model) : model_(std::move(model)) {}
  std::vector<float> Score(const std::vector<int32_t>& tokens) override;
  std::vector<std::vector<float>> ScoreBatch(
      const std::vector<std::vector<int32_t>>& sequences) override;
  absl::StatusOr<int32_t> NextToken(
      const std::vector<int32_t>& prefix) override;
  // TokenScorer::Generate's contract: InvalidArgument for an empty prompt or
  // max_new_tokens < 1, ResourceExhausted when the cache does not fit in
  // memory. No context limit: the model takes any length (RoPE has no
  // maximum position), and the cache of full-attention layers grows with it.
  absl::StatusOr<std::vector<int32_t>> Generate(
      const std::vector<int32_t>& prompt,
      const GenerateOptions& options) override;

 private:
  model::HybridLM model_;
};

}  // namespace hlab::eval

#endif  // HLAB_EVAL_TOKEN_SCORER_H_
