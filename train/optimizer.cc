#include "train/optimizer.h"

#include <cmath>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "train/internal/adamw_kernel.h"

namespace hlab::train {
namespace {

using torch::optim::AdamWOptions;
using torch::optim::AdamWParamState;

// A tensor the fused loops take: on the CPU, contiguous, float or double.
bool Fusable(const torch::Tensor& t, torch::ScalarType dtype) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == dtype &&
         t.is_contiguous() && !t.is_sparse();
}

bool FusableDtype(torch::ScalarType t) {
  return t == torch::kFloat32 || t == torch::kFloat64;
}

// LibTorch's AdamW with step() made one pass over each parameter's memory
// (train/internal/adamw_kernel.h) instead of ~10 ATen ops per parameter:
// the same values, the same state (so the same checkpoints). Falls back to
// AdamW::step for the whole step when any parameter is not a contiguous
// float or double CPU tensor (CUDA) or amsgrad is on.
class FusedAdamW final : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  torch::Tensor step(LossClosure closure = nullptr) override {
    if (!AllFusable()) return torch::optim::AdamW::step(std::move(closure));
    torch::NoGradGuard no_grad;
    torch::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (auto& group : param_groups()) {
      const auto& options = static_cast<const AdamWOptions&>(group.options());
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        AdamWParamState& state = StateOf(p);
        state.step(state.step() + 1);
        const internal::AdamWScalars s = internal::MakeAdamWScalars(
            options.lr(), std::get<0>(options.betas()),
            std::get<1>(options.betas()), options.eps(), options.weight_decay(),
            state.step());
        const torch::Tensor& g = p.grad();
        if (p.scalar_type() == torch::kFloat32) {
          internal::AdamWUpdate(p.data_ptr<float>(), g.data_ptr<float>(),
                                state.exp_avg().data_ptr<float>(),
                                state.exp_avg_sq().data_ptr<float>(), p.numel(),
                                s);
        } else {
          internal::AdamWUpdate(p.data_ptr<double>(), g.data_ptr<double>(),
                                state.exp_avg().data_ptr<double>(),
                                state.exp_avg_sq().data_ptr<double>(),
                                p.numel(), s);
        }
      }
    }
    return loss;
  }

 private:
  // The parameter's state, created as AdamW::step creates it.
  AdamWParamState& StateOf(const torch::Tensor& p) {
    auto& slot = state()[c10::guts::to_string(p.unsafeGetTensorImpl())];
    if (!slot) {
      auto created = std::make_unique<AdamWParamState>();
      created->step(0);
      created->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      created->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      slot = std::move(created);
    }
    return static_cast<AdamWParamState&>(*slot);
  }

  bool AllFusable() {
    for (auto& group : param_groups()) {
      const auto& options = static_cast<const AdamWOptions&>(group.options());
      if (options.amsgrad()) return false;
      for (auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const torch::ScalarType dtype = p.scalar_type();
        if (!FusableDtype(dtype) || !Fusable(p, dtype) ||
            !Fusable(p.grad(), dtype)) {
          return false;
        }
        auto it = state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
        if (it == state().end()) continue;  // created contiguous
        const auto& s = static_cast<const AdamWParamState&>(*it->second);
        if (!Fusable(s.exp_avg(), dtype) || !Fusable(s.exp_avg_sq(), dtype) ||
            s.exp_avg().numel() != p.numel() ||
            s.exp_avg_sq().numel() != p.numel()) {
          return false;
        }
      }
    }
    return true;
  }
};

}  // namespace

std::vector<torch::optim::OptimizerParamGroup> AdamWGroups(
    torch::nn::Module& model, const AdamWConfig& config) {
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
  return groups;
}

std::unique_ptr<torch::optim::AdamW> MakeAdamW(torch::nn::Module& model,
                                               const AdamWConfig& config) {
  std::vector<torch::optim::OptimizerParamGroup> groups =
      AdamWGroups(model, config);
  return std::make_unique<FusedAdamW>(groups,
                                      torch::optim::AdamWOptions(config.lr)
                                          .betas({config.beta1, config.beta2})
                                          .eps(config.eps)
                                          .weight_decay(config.weight_decay));
}

void SetLearningRate(torch::optim::AdamW& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<AdamWOptions&>(group.options()).lr(lr);
  }
}

void ClearGradients(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    for (auto& p : group.params()) p.mutable_grad().reset();
  }
}

double ClipGradNorm(torch::nn::Module& model, double max_norm) {
  // torch::nn::utils::clip_grad_norm_'s norms, then its scaling as one
  // float multiply per element in place of ~5 scalar ops and a mul_ per
  // parameter (the same values: ATen rounds the coefficient to float and
  // multiplies by it).
  std::vector<torch::Tensor> grads;
  bool fusable = true;
  for (const torch::Tensor& p : model.parameters()) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    fusable = fusable && Fusable(p.grad(), torch::kFloat32);
  }
  if (grads.empty()) return 0.0;
  if (!fusable) {
    return torch::nn::utils::clip_grad_norm_(model.parameters(), max_norm);
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  norms.reserve(grads.size());
  for (const torch::Tensor& g : grads) norms.push_back(g.norm(2.0));
  const float total = norms.size() == 1
                          ? norms[0].item<float>()
                          : torch::stack(norms).norm(2.0).item<float>();
  // clip_coef = max_norm / (total_norm + 1e-6), clamped to at most 1.
  const float coef =
      static_cast<float>(max_norm) / (total + static_cast<float>(1e-6));
  const float clamped = coef > 1.0f ? 1.0f : coef;
  if (clamped != 1.0f) {
    for (torch::Tensor& g : grads) {
      internal::Scale(g.data_ptr<float>(), g.numel(), clamped);
    }
  }
  return total;
}

}  // namespace hlab::train
