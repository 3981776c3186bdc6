// Lightning attention: the module against its definition written out, and
// its ALiBi-style decay slopes.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

// The module against its definition written out in ATen ops: separate
// projections, K/V heads repeated per GQA group, the layer's decay factor,
// the step-by-step recurrence. Catches a misordered concatenated projection
// or GQA mapping, which the chunked-vs-reference test (both share the
// projections) cannot.
TEST(LightningTest, MatchesDefinitionWrittenOut) {
  ModelConfig config;
  config.d_model = 64;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.head_dim = 16;
  config.n_layers = 3;
  MixerSpec spec;
  spec.kind = MixerKind::kLightning;
  spec.chunk = 16;
  config.layers.assign(3, spec);
  torch::manual_seed(25);
  // The middle layer of three: the slopes are halved (+ 1e-5).
  auto mixer = std::make_shared<Lightning>(config, spec, /*layer_index=*/1);
  mixer->to(torch::kFloat64);
  auto params = mixer->named_parameters();
  {
    torch::NoGradGuard no_grad;
    params["out_norm"].uniform_(0.5, 1.5);
  }
  const int64_t b = 2, t = 50, h = 4, hkv = 2, dh = 16;
  const torch::Tensor x = torch::randn({b, t, 64}, torch::kFloat64);
  const auto proj = [&](const char* name) {
    return torch::matmul(x, params[name].t());
  };
  const auto rms = [](const torch::Tensor& v, const torch::Tensor& w) {
    return v * torch::rsqrt(v.pow(2).mean(-1, true) + 1e-6) * w;
  };
  const torch::Tensor q =
      torch::silu(proj("q_proj.weight")).view({b, t, h, dh});
  const torch::Tensor k = torch::silu(proj("k_proj.weight"))
                              .view({b, t, hkv, dh})
                              .repeat_interleave(h / hkv, 2);
  const torch::Tensor v = torch::silu(proj("v_proj.weight"))
                              .view({b, t, hkv, dh})
                              .repeat_interleave(h / hkv, 2);
  EXPECT_DOUBLE_EQ(LightningLayerDecayFactor(1, 3), 0.5 + 1e-5);
  EXPECT_DOUBLE_EQ(LightningLayerDecayFactor(0, 3), 1 + 1e-5);
  EXPECT_DOUBLE_EQ(LightningLayerDecayFactor(2, 3), 1e-5);
  EXPECT_DOUBLE_EQ(LightningLayerDecayFactor(0, 1), 1);
  // The slopes buffer is fp32 (so is the module's in training).
  const torch::Tensor slopes =
      torch::tensor(AlibiSlopes(h), torch::kFloat64) * (0.5 + 1e-5);
  const torch::Tensor g = -slopes.to(torch::kFloat32)
                               .to(torch::kFloat64)
                               .view({1, h, 1})
                               .expand({b, h, t});
  const torch::Tensor o =
      RecurrentScalarGla(q.transpose(1, 2), k.transpose(1, 2),
                         v.transpose(1, 2), g, 1.0 / std::sqrt(double(dh)));
  const torch::Tensor y =
      rms(o.transpose(1, 2).reshape({b, t, h * dh}), params["out_norm"]) *
      torch::sigmoid(torch::matmul(proj("gate_down.weight"),
                                   params["gate_up.weight"].t()));
  const torch::Tensor want = torch::matmul(y, params["o_proj.weight"].t());
  EXPECT_LT(MaxRelError(mixer->forward(x), want), kFp64Tolerance);
}

TEST(LightningTest, AlibiSlopes) {
  const std::vector<double> eight = AlibiSlopes(8);
  ASSERT_EQ(eight.size(), 8u);
  for (int h = 1; h <= 8; ++h) {
    EXPECT_DOUBLE_EQ(eight[h - 1], std::pow(2.0, -h));
  }
  // Not a power of two: the 4-head slopes, then slopes 1 and 3 of 8 heads.
  const std::vector<double> six = AlibiSlopes(6);
  const std::vector<double> expected = {std::pow(2.0, -2), std::pow(2.0, -4),
                                        std::pow(2.0, -6), std::pow(2.0, -8),
                                        std::pow(2.0, -1), std::pow(2.0, -3)};
  ASSERT_EQ(six.size(), expected.size());
  for (size_t i = 0; i < six.size(); ++i) EXPECT_DOUBLE_EQ(six[i], expected[i]);
}

}  // namespace
}  // namespace hlab::model
