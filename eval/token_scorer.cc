#include "eval/token_scorer.h"

#include <torch/torch.h>

#include "eval/internal/scoring.h"

namespace hlab::eval {
namespace {

torch::Device ModelDevice(const model::HybridLM& model) {
  for (const torch::Tensor& p : model->parameters()) return p.device();
  return torch::kCPU;
}

}  // namespace

std::vector<float> ModelScorer::Score(const std::vector<int32_t>& tokens) {
  return ScoreBatch({tokens}).front();
}

std::vector<std::vector<float>> ModelScorer::ScoreBatch(
    const std::vector<std::vector<int32_t>>& sequences) {
  model_->eval();
  return internal::ScoreBatchWith(
      [this](const torch::Tensor& ids) { return model_->forward(ids); },
      ModelDevice(model_), sequences);
}

absl::StatusOr<int32_t> ModelScorer::NextToken(
    const std::vector<int32_t>& prefix) {
  model_->eval();
  return internal::NextTokenWith(
      [this](const torch::Tensor& ids) { return model_->forward(ids); },
      ModelDevice(model_), prefix);
}

}  // namespace hlab::eval
