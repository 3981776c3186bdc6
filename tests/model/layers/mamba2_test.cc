// Mamba-2: its inputs from the projection (Mamba2Inputs) against the formula
// in ATen ops, with gradients; the module against its definition written
// out; its gate initialisation.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

// The formula Mamba2Inputs replaces, written out here in ATen ops.
std::vector<torch::Tensor> Mamba2InputsReference(const torch::Tensor& p,
                                                 int64_t heads, int64_t state,
                                                 const torch::Tensor& a_log,
                                                 const torch::Tensor& dt_bias,
                                                 const torch::Tensor& d_skip) {
  const torch::Tensor pf =
      p.scalar_type() == torch::kFloat64 ? p : p.to(torch::kFloat32);
  const int64_t di = (p.size(2) - 2 * state - heads) / 2;
  const torch::Tensor x =
      torch::silu(pf.narrow(2, di, di)).view({p.size(0), p.size(1), heads, -1});
  const torch::Tensor dt =
      torch::softplus(pf.narrow(2, 2 * di + 2 * state, heads) + dt_bias);
  return {pf.narrow(2, 0, di),
          torch::silu(pf.narrow(2, 2 * di + state, state)),
          torch::silu(pf.narrow(2, 2 * di, state)),
          x * dt.unsqueeze(-1),
          x * d_skip.view({heads, 1}),
          (dt * -a_log.exp()).transpose(1, 2)};
}

std::vector<torch::Tensor> Mamba2InputsList(const Mamba2InputTensors& in) {
  return {in.z, in.q, in.k, in.v, in.skip, in.g};
}

TEST(Mamba2InputsTest, MatchesFormulaWithGradients) {
  TwoThreads two_threads;
  const char* const names[] = {"z", "q", "k", "v", "skip", "g"};
  const char* const grad_names[] = {"dp", "dA_log", "ddt_bias", "dD"};
  // heads 3, head dim 8, state 5: width 2 * 24 + 10 + 3 = 61.
  for (const torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32}) {
    const double tolerance = dtype == torch::kFloat64 ? 1e-13 : 1e-5;
    const auto opts = torch::TensorOptions().dtype(dtype);
    torch::manual_seed(23);
    torch::Tensor p0 = 4 * torch::randn({2, 29, 61}, opts);
    p0.narrow(2, 58, 3).narrow(1, 0, 4).fill_(25.0);  // past softplus's 20
    for (const bool strided : {false, true}) {
      const torch::Tensor p =
          (strided ? torch::cat({p0, p0}, 2).narrow(2, 0, 61) : p0)
              .detach()
              .requires_grad_();
      const torch::Tensor a_log = torch::randn({3}, opts).requires_grad_();
      const torch::Tensor dt_bias = torch::randn({3}, opts).requires_grad_();
      const torch::Tensor d_skip = torch::randn({3}, opts).requires_grad_();
      const std::vector<torch::Tensor> inputs = {p, a_log, dt_bias, d_skip};
      const OutputsResult ref = RunOutputs(
          [&] {
            return Mamba2InputsReference(p, 3, 5, a_log, dt_bias, d_skip);
          },
          inputs, 7);
      const OutputsResult fused = RunOutputs(
          [&] {
            return Mamba2InputsList(
                Mamba2Inputs(p, 3, 5, a_log, dt_bias, d_skip));
          },
          inputs, 7);
      const OutputsResult aten = RunOutputs(
          [&] {
            return Mamba2InputsList(
                Mamba2InputsWithAten(p, 3, 5, a_log, dt_bias, d_skip));
          },
          inputs, 7);
      for (const OutputsResult* got : {&fused, &aten}) {
        const std::string where = std::string(c10::toString(dtype)) +
                                  (strided ? " strided" : "") +
                                  (got == &fused ? " fused" : " aten");
        for (size_t i = 0; i < got->outs.size(); ++i) {
          EXPECT_TRUE(got->outs[i].is_contiguous()) << where << names[i];
          EXPECT_EQ(got->outs[i].scalar_type(), dtype) << where << names[i];
          EXPECT_LT(MaxRelError(got->outs[i], ref.outs[i]), tolerance)
              << where << " " << names[i];
        }
        for (size_t i = 0; i < got->grads.size(); ++i) {
          EXPECT_LT(MaxRelError(got->grads[i], ref.grads[i]), tolerance)
              << where << " " << grad_names[i];
        }
      }
    }
  }
}

TEST(Mamba2InputsTest, Bf16InputGivesFp32OutputsAndBf16Gradient) {
  torch::manual_seed(24);
  const torch::Tensor p =
      torch::randn({2, 9, 61}).to(torch::kBFloat16).requires_grad_();
  const torch::Tensor a_log = torch::randn({3}).requires_grad_();
  const torch::Tensor dt_bias = torch::randn({3}).requires_grad_();
  const torch::Tensor d_skip = torch::randn({3}).requires_grad_();
  const std::vector<torch::Tensor> inputs = {p, a_log, dt_bias, d_skip};
  const OutputsResult got = RunOutputs(
      [&] {
        return Mamba2InputsList(Mamba2Inputs(p, 3, 5, a_log, dt_bias, d_skip));
      },
      inputs, 8);
  const OutputsResult ref = RunOutputs(
      [&] { return Mamba2InputsReference(p, 3, 5, a_log, dt_bias, d_skip); },
      inputs, 8);
  for (size_t i = 0; i < got.outs.size(); ++i) {
    EXPECT_EQ(got.outs[i].scalar_type(), torch::kFloat32);
    EXPECT_LT(MaxRelError(got.outs[i], ref.outs[i]), 1e-5) << i;
  }
  EXPECT_EQ(got.grads[0].scalar_type(), torch::kBFloat16);
  EXPECT_LT(MaxRelError(got.grads[0], ref.grads[0]), 1e-2);
  for (size_t i = 1; i < got.grads.size(); ++i) {
    EXPECT_EQ(got.grads[i].scalar_type(), torch::kFloat32);
    EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), 1e-5) << i;
  }
}

TEST(Mamba2InputsTest, RejectsWidthsThatDoNotSplit) {
  const torch::Tensor w = torch::zeros({3});
  // 2 * 3 * P + 2 * 5 + 3 = 60 has no integer P.
  EXPECT_THROW(Mamba2Inputs(torch::randn({1, 4, 60}), 3, 5, w, w, w),
               c10::Error);
  EXPECT_THROW(
      Mamba2Inputs(torch::randn({1, 4, 61}), 3, 5, torch::zeros({2}), w, w),
      c10::Error);
}

TEST(Mamba2Test, MatchesDefinitionWrittenOut) {
  ModelConfig config;
  config.d_model = 32;
  MixerSpec spec;
  spec.kind = MixerKind::kMamba2;
  spec.ssm_state = 4;
  spec.ssm_head_dim = 8;
  spec.chunk = 16;
  config.layers.assign(2, spec);
  torch::manual_seed(27);
  auto mixer = std::make_shared<Mamba2>(config, spec);
  mixer->to(torch::kFloat64);
  auto params = mixer->named_parameters();
  {
    torch::NoGradGuard no_grad;
    params["D"].uniform_(0.5, 1.5);
    params["norm_weight"].uniform_(0.5, 1.5);
  }
  const int64_t b = 2, t = 40, di = 32, n = 4, h = 4, p = 8;
  const torch::Tensor x = torch::randn({b, t, 32}, torch::kFloat64);
  const torch::Tensor zxbcdt = torch::matmul(x, params["in_proj.weight"].t());
  const torch::Tensor z = zxbcdt.narrow(2, 0, di);
  const torch::Tensor xs =
      torch::silu(zxbcdt.narrow(2, di, di)).view({b, t, h, p});
  const torch::Tensor bm = torch::silu(zxbcdt.narrow(2, 2 * di, n));
  const torch::Tensor cm = torch::silu(zxbcdt.narrow(2, 2 * di + n, n));
  const torch::Tensor dt =
      torch::softplus(zxbcdt.narrow(2, 2 * di + 2 * n, h) + params["dt_bias"]);
  const torch::Tensor ssd =
      RecurrentScalarGla(cm.unsqueeze(1).expand({b, h, t, n}),
                         bm.unsqueeze(1).expand({b, h, t, n}),
                         (xs * dt.unsqueeze(-1)).transpose(1, 2),
                         (dt * -params["A_log"].exp()).transpose(1, 2), 1.0);
  const torch::Tensor y = (ssd.transpose(1, 2) + xs * params["D"].view({h, 1}))
                              .reshape({b, t, di}) *
                          torch::silu(z);
  const torch::Tensor normed =
      y * torch::rsqrt(y.pow(2).mean(-1, true) + 1e-6) * params["norm_weight"];
  const torch::Tensor want =
      torch::matmul(normed, params["out_proj.weight"].t());
  EXPECT_LT(MaxRelError(mixer->forward(x), want), kFp64Tolerance);
}

TEST(Mamba2Test, InitialisesGatesAsMamba2) {
  torch::manual_seed(12);
  ModelConfig config = SmallConfig();
  config.d_model = 512;  // 64 heads of 8, for the ranges below
  MixerSpec spec;
  spec.kind = MixerKind::kMamba2;
  spec.ssm_head_dim = 8;
  Mamba2 mamba(config, spec);
  const auto params = mamba.named_parameters();
  const torch::Tensor a = params["A_log"].detach().exp();
  EXPECT_GE(a.min().item<double>(), 1.0);
  EXPECT_LE(a.max().item<double>(), 16.0);
  const torch::Tensor dt = torch::softplus(params["dt_bias"].detach());
  EXPECT_GE(dt.min().item<double>(), 1e-3 * (1 - 1e-5));
  EXPECT_LE(dt.max().item<double>(), 0.1 * (1 + 1e-5));
  EXPECT_TRUE(torch::equal(params["D"].detach(), torch::ones({64})));
}

}  // namespace
}  // namespace hlab::model
