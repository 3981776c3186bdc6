// TokenScorer: per-token negative log-likelihoods of a token sequence under
// a language model, the one primitive the evaluations need (validation loss,
// LongPPL's key-token selection and scoring).
//
// ModelScorer wraps a HybridLM: one forward pass in inference mode, fp32
// log-softmax. Tests substitute scorers with known answers.
//
// Thread-safety: ModelScorer is not thread-safe (LibTorch modules are not).
//
//   ModelScorer scorer(model);
//   std::vector<float> nll = scorer.Score(tokens);  // nll[i - 1]: token i
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
};

class ModelScorer final : public TokenScorer {
 public:
  explicit ModelScorer(model::HybridLM model) : model_(std::move(model)) {}
  std::vector<float> Score(const std::vector<int32_t>& tokens) override;

 private:
  model::HybridLM model_;
};

}  // namespace hlab::eval

#endif  // HLAB_EVAL_TOKEN_SCORER_H_
