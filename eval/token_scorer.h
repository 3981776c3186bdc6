// TokenScorer: per-token negative log-likelihoods of a token sequence under
// a language model, the one primitive the evaluations need (validation loss,
// LongPPL's key-token selection and scoring).
//
// ModelScorer wraps a HybridLM: forward passes in inference mode
// (torch::InferenceMode), fp32 log-softmax. ScoreBatch scores several
// sequences in one forward pass: shorter ones are padded on the right, which
// a causal model never sees from earlier positions, so each result equals
// Score of that sequence alone (up to float rounding of batched kernels).
// Tests substitute scorers with known answers.
//
// Thread-safety: ModelScorer is not thread-safe (LibTorch modules are not).
//
//   ModelScorer scorer(model);
//   std::vector<float> nll = scorer.Score(tokens);  // nll[i - 1]: token i
//   auto batch = scorer.ScoreBatch({a, b, c});      // one forward pass
#ifndef HLAB_EVAL_TOKEN_SCORER_H_
#define HLAB_EVAL_TOKEN_SCORER_H_

#include <cstdint>
#include <vector>

#include "model/hybrid_lm.h"

namespace hlab::eval {

class TokenScorer {
 public:
  virtual ~TokenScorer() = default;
  // For tokens t_0 .. t_{n-1} (n >= 2), returns n - 1 values: element i - 1
  // is -log p(t_i | t_0 .. t_{i-1}) in nats.
  virtual std::vector<float> Score(const std::vector<int32_t>& tokens) = 0;
  // Score of each sequence. The default calls Score once per sequence;
  // model scorers override it with one batched forward pass.
  virtual std::vector<std::vector<float>> ScoreBatch(
      const std::vector<std::vector<int32_t>>& sequences);
};

class ModelScorer final : public TokenScorer {
 public:
  explicit ModelScorer(model::HybridLM model) : model_(std::move(model)) {}
  std::vector<float> Score(const std::vector<int32_t>& tokens) override;
  std::vector<std::vector<float>> ScoreBatch(
      const std::vector<std::vector<int32_t>>& sequences) override;

 private:
  model::HybridLM model_;
};

}  // namespace hlab::eval

#endif  // HLAB_EVAL_TOKEN_SCORER_H_
