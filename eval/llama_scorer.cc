#include "eval/llama_scorer.h"

#include <torch/torch.h>

#include "eval/internal/scoring.h"

namespace hlab::eval {

std::vector<float> LlamaScorer::Score(const std::vector<int32_t>& tokens) {
  return ScoreBatch({tokens}).front();
}

std::vector<std::vector<float>> LlamaScorer::ScoreBatch(
    const std::vector<std::vector<int32_t>>& sequences) {
  return internal::ScoreBatchWith(
      [this](const torch::Tensor& inputs, const torch::Tensor& targets) {
        return model_->TokenNll(inputs, targets);
      },
      model_->device(), sequences);
}

absl::StatusOr<int32_t> LlamaScorer::NextToken(
    const std::vector<int32_t>& prefix) {
  return internal::NextTokenWith(
      [this](const torch::Tensor& ids) { return model_->Forward(ids); },
      model_->device(), prefix);
}

}  // namespace hlab::eval
