#include "train/optimizer.h"

#include <vector>

#include <torch/torch.h>

namespace hlab::train {

std::unique_ptr<torch::optim::AdamW> MakeAdamW(torch::nn::Module& model,
                                               const AdamWConfig& config) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    (item.value().dim() >= 2 ? decay : no_decay).push_back(item.value());
  }
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(config.lr)
            .betas({config.beta1, config.beta2})
            .eps(config.eps)
            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(config.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(
      groups, torch::optim::AdamWOptions(config.lr)
                  .betas({config.beta1, config.beta2})
                  .eps(config.eps)
                  .weight_decay(config.weight_decay));
}

void SetLearningRate(torch::optim::AdamW& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

double ClipGradNorm(torch::nn::Module& model, double max_norm) {
  return torch::nn::utils::clip_grad_norm_(model.parameters(), max_norm);
}

}  // namespace hlab::train
