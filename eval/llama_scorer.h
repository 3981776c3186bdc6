// LlamaScorer: the TokenScorer (eval/token_scorer_interface.h) of a Hugging
// Face Llama (model/llama/llama_model.h), so it can select LongPPL's key
// tokens as the paper does with Llama-3.1-8B (docs/evaluation.md, "A Llama
// reference").
//
// Thread-safety: not thread-safe (one scorer per thread), like ModelScorer.
//
//   HLAB_ASSIGN_OR_RETURN(auto llama, model::llama::LlamaModel::Load(dir, {}));
//   LlamaScorer scorer(std::move(llama));
//   std::vector<float> nll = scorer.Score(tokens);  // nll[i - 1]: token i
#ifndef HLAB_EVAL_LLAMA_SCORER_H_
#define HLAB_EVAL_LLAMA_SCORER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "eval/token_scorer_interface.h"
#include "model/llama/llama_model.h"

namespace hlab::eval {

class LlamaScorer final : public TokenScorer {
 public:
  explicit LlamaScorer(std::shared_ptr<const model::llama::LlamaModel> model)
      : model_(std::move(model)) {}
  std::vector<float> Score(const std::vector<int32_t>& tokens) override;
  std::vector<std::vector<float>> ScoreBatch(
      const std::vector<std::vector<int32_t>>& sequences) override;
  absl::StatusOr<int32_t> NextToken(
      const std::vector<int32_t>& prefix) override;

 private:
  std::shared_ptr<const model::llama::LlamaModel> model_;
};

}  // namespace hlab::eval

#endif  // HLAB_EVAL_LLAMA_SCORER_H_
