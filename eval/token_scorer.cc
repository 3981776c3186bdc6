#include "eval/token_scorer.h"

#include <torch/torch.h>

namespace hlab::eval {

std::vector<float> ModelScorer::Score(const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < 2) return {};
  torch::InferenceMode inference;
  model_->eval();
  torch::Tensor ids =
      torch::tensor(tokens, torch::kInt64).unsqueeze(0);  // (1, n)
  torch::Tensor logits =
      model_->forward(ids.narrow(1, 0, n - 1));  // (1, n-1, V)
  torch::Tensor nll = -torch::log_softmax(logits.to(torch::kFloat32), -1)
                           .gather(-1, ids.narrow(1, 1, n - 1).unsqueeze(-1))
                           .squeeze(-1)
                           .squeeze(0)
                           .contiguous();  // (n-1)
  return std::vector<float>(nll.data_ptr<float>(),
                            nll.data_ptr<float>() + n - 1);
}

}  // namespace hlab::eval
