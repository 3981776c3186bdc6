// AdamW with the study's parameter groups, and gradient clipping.
//
// LibTorch's C++ AdamW defaults differ from the recipe (betas 0.9/0.999, wd
// 0.01), so everything is set explicitly here: betas (0.9, 0.95), eps 1e-8,
// weight decay on tensors with >= 2 dimensions only (matrices, embeddings,
// conv kernels); norms, biases, sinks, A_log, dt_bias and D get none.
//
// The step is LibTorch's AdamW made one pass over each parameter's memory
// (train/internal/adamw_kernel.h), where AdamW::step makes ~10 ATen ops per
// parameter tensor, and ClipGradNorm scales the gradients in one pass: on
// the CPU the values are LibTorch's bit for bit
// (tests/train/optimizer_test.cc), the state is AdamW's (checkpoints are
// unchanged), and other devices take LibTorch's own step. Why, measured:
// docs/performance.md, "Micro-model steps".
//
// Not thread-safe.
//
//   AdamWConfig adamw;
//   adamw.lr = 1e-3;
//   adamw.weight_decay = 0.1;
//   auto optimizer = MakeAdamW(*model, adamw);
//   ClearGradients(*optimizer);
//   loss.backward();
//   double norm = ClipGradNorm(*model, 1.0);
//   SetLearningRate(*optimizer, schedule.LearningRate(step));
//   optimizer->step();
#ifndef HLAB_TRAIN_OPTIMIZER_H_
#define HLAB_TRAIN_OPTIMIZER_H_

#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

namespace hlab::train {

struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// The model's trainable parameters in two groups with their options:
// [0] decayed (dim >= 2, config.weight_decay), [1] not decayed.
std::vector<torch::optim::OptimizerParamGroup> AdamWGroups(
    torch::nn::Module& model, const AdamWConfig& config);

// AdamWGroups' groups in a torch::optim::AdamW whose step() is the fused
// one.
std::unique_ptr<torch::optim::AdamW> MakeAdamW(torch::nn::Module& model,
                                               const AdamWConfig& config);

void SetLearningRate(torch::optim::AdamW& optimizer, double lr);

// Leaves every parameter of the optimizer without a gradient, before a
// step's backward passes. LibTorch 1.13's zero_grad() zeroes them in place,
// and the first backward then adds each gradient to the zeros; without one,
// backward keeps the gradient it computed (no zeroing, no add: the same
// values). A parameter that gets no gradient in a step is then left alone
// by the step, as AdamW leaves one that never had a gradient.
void ClearGradients(torch::optim::Optimizer& optimizer);

// Clips the global L2 norm of all gradients to max_norm; returns the norm
// before clipping (inf/nan propagate so callers can detect them). The same
// values as torch::nn::utils::clip_grad_norm_.
double ClipGradNorm(torch::nn::Module& model, double max_norm);

}  // namespace hlab::train

#endif  // HLAB_TRAIN_OPTIMIZER_H_
