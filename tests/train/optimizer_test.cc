// The fused AdamW step, ClipGradNorm and ClearGradients (train/optimizer.h)
// against LibTorch's AdamW, clip_grad_norm_ and zero_grad, bit for bit, on a
// small model of each architecture; and the fused step's state through a
// checkpoint payload.
#include "train/optimizer.h"

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "gtest/gtest.h"
#include "model/config/architectures.h"
#include "model/config/model_config.h"
#include "model/hybrid_lm.h"
#include "train/training_state.h"

namespace hlab::train {
namespace {

constexpr AdamWConfig kAdamW{
    .lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};

model::ModelConfig SmallConfig(const std::string& arch) {
  model::ModelConfig c;
  c.vocab_size = 258;
  c.d_model = 24;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 12;
  c.ffn_hidden = model::DefaultFfnHidden(c.d_model);
  c.arch = arch;
  auto layers = model::ExpandArchitecture(arch, c.n_layers);
  EXPECT_TRUE(layers.ok()) << layers.status();
  if (layers.ok()) c.layers = *layers;
  return c;
}

model::HybridLM MakeModel(const std::string& arch) {
  torch::manual_seed(7);
  return model::HybridLM(SmallConfig(arch));
}

// LibTorch's own AdamW with MakeAdamW's groups: the reference.
std::unique_ptr<torch::optim::AdamW> StockAdamW(torch::nn::Module& model) {
  return std::make_unique<torch::optim::AdamW>(AdamWGroups(model, kAdamW));
}

// One training step on a fixed batch, with a learning rate that changes
// from step to step as the schedule's does, its gradient accumulated over
// two micro-batches as the trainer does. The stock step zeroes the
// gradients with LibTorch's zero_grad, the fused one clears them
// (ClearGradients). Returns the clipped norm.
double Step(model::HybridLM& model, torch::optim::AdamW& optimizer,
            int64_t step, bool stock = false) {
  torch::manual_seed(100 + step);
  const torch::Tensor tokens = torch::randint(0, 258, {4, 17}, torch::kInt64);
  if (stock) {
    optimizer.zero_grad();
  } else {
    ClearGradients(optimizer);
  }
  for (int64_t half = 0; half < 2; ++half) {
    const torch::Tensor rows = tokens.narrow(0, 2 * half, 2);
    (model->loss(rows.narrow(1, 0, 16), rows.narrow(1, 1, 16)) / 2.0)
        .backward();
  }
  // A small max norm: the clip scales the gradients.
  const double norm = ClipGradNorm(*model, 0.5);
  SetLearningRate(optimizer, kAdamW.lr * (1.0 - 0.1 * step));
  optimizer.step();
  return norm;
}

// Largest |a - b| over the two models' parameters.
double MaxDifference(model::HybridLM& a, model::HybridLM& b) {
  const auto pa = a->parameters(), pb = b->parameters();
  double most = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    most = std::max(most, (pa[i] - pb[i]).abs().max().item<double>());
  }
  return most;
}

class FusedAdamWTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedAdamWTest, EqualsLibTorchAdamWBitForBit) {
  at::set_num_threads(1);
  model::HybridLM fused_model = MakeModel(GetParam());
  model::HybridLM stock_model = MakeModel(GetParam());
  auto fused = MakeAdamW(*fused_model, kAdamW);
  auto stock = StockAdamW(*stock_model);
  for (int64_t step = 0; step < 5; ++step) {
    const double a = Step(fused_model, *fused, step);
    const double b = Step(stock_model, *stock, step, /*stock=*/true);
    EXPECT_EQ(a, b) << "step " << step;
    EXPECT_EQ(MaxDifference(fused_model, stock_model), 0.0) << "step " << step;
  }
}

// Training moved every parameter (none was skipped for want of a gradient).
TEST_P(FusedAdamWTest, UpdatesEveryParameter) {
  at::set_num_threads(1);
  model::HybridLM model = MakeModel(GetParam());
  model::HybridLM initial = MakeModel(GetParam());
  auto optimizer = MakeAdamW(*model, kAdamW);
  Step(model, *optimizer, 0);
  const auto now = model->named_parameters();
  const auto before = initial->named_parameters();
  for (const auto& item : now) {
    EXPECT_FALSE(torch::equal(item.value(), before[item.key()])) << item.key();
  }
}

// A checkpoint payload of the fused optimizer's state, loaded into a fresh
// model and optimizer, continues as the uninterrupted run; LibTorch's AdamW
// reads the same payload and continues the same way.
TEST_P(FusedAdamWTest, StateRoundTripsThroughACheckpoint) {
  at::set_num_threads(1);
  model::HybridLM straight = MakeModel(GetParam());
  auto straight_optimizer = MakeAdamW(*straight, kAdamW);
  for (int64_t step = 0; step < 4; ++step) {
    Step(straight, *straight_optimizer, step);
  }

  model::HybridLM first = MakeModel(GetParam());
  auto first_optimizer = MakeAdamW(*first, kAdamW);
  for (int64_t step = 0; step < 2; ++step) Step(first, *first_optimizer, step);
  const std::string payload = SaveTrainingState(*first, *first_optimizer);

  model::HybridLM resumed = MakeModel(GetParam());
  auto resumed_optimizer = MakeAdamW(*resumed, kAdamW);
  ASSERT_TRUE(LoadTrainingState(payload, *resumed, *resumed_optimizer).ok());
  model::HybridLM stock_resumed = MakeModel(GetParam());
  auto stock_optimizer = StockAdamW(*stock_resumed);
  ASSERT_TRUE(
      LoadTrainingState(payload, *stock_resumed, *stock_optimizer).ok());
  for (int64_t step = 2; step < 4; ++step) {
    Step(resumed, *resumed_optimizer, step);
    Step(stock_resumed, *stock_optimizer, step, /*stock=*/true);
  }
  EXPECT_EQ(MaxDifference(resumed, straight), 0.0);
  EXPECT_EQ(MaxDifference(stock_resumed, straight), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, FusedAdamWTest,
                         ::testing::Values("full", "swa-16", "gdn"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

// float64 parameters take the fused loop too.
TEST(FusedAdamWDoubleTest, EqualsLibTorchAdamWInDouble) {
  torch::manual_seed(3);
  torch::Tensor w = torch::randn({5, 7}, torch::kFloat64).requires_grad_();
  torch::Tensor b = torch::randn({7}, torch::kFloat64).requires_grad_();
  torch::Tensor w2 = w.detach().clone().requires_grad_();
  torch::Tensor b2 = b.detach().clone().requires_grad_();
  torch::nn::Module fused_holder, stock_holder;
  fused_holder.register_parameter("w", w);
  fused_holder.register_parameter("b", b);
  stock_holder.register_parameter("w", w2);
  stock_holder.register_parameter("b", b2);
  auto fused = MakeAdamW(fused_holder, kAdamW);
  auto stock = StockAdamW(stock_holder);
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor x = torch::randn({3, 5}, torch::kFloat64);
    for (auto [opt, ww, bb] :
         {std::tuple{fused.get(), w, b}, std::tuple{stock.get(), w2, b2}}) {
      opt->zero_grad();
      (x.matmul(ww) + bb).sin().sum().backward();
      opt->step();
    }
    EXPECT_TRUE(torch::equal(w, w2)) << "step " << step;
    EXPECT_TRUE(torch::equal(b, b2)) << "step " << step;
  }
}

}  // namespace
}  // namespace hlab::train
