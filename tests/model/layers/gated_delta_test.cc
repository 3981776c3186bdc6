// Gated DeltaNet: its inputs from the concatenated projection
// (GatedDeltaInputs) against the formula in ATen ops, with gradients, and the
// module against its definition written out.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

// The formula GatedDeltaInputs replaces, written out here in ATen ops.
// q and k have qk_heads heads, v, beta and g `heads`.
GatedDeltaInputTensors GatedDeltaInputsReference(const torch::Tensor& x,
                                                 int64_t heads,
                                                 int64_t qk_heads,
                                                 const torch::Tensor& a_log,
                                                 const torch::Tensor& dt_bias) {
  const torch::Tensor xf =
      x.scalar_type() == torch::kFloat64 ? x : x.to(torch::kFloat32);
  const int64_t dh = (x.size(2) - 2 * heads) / (2 * qk_heads + heads);
  const int64_t qk = qk_heads * dh, inner = heads * dh;
  const auto act = [&](int64_t from, int64_t width, bool l2) {
    torch::Tensor y = torch::silu(xf.narrow(2, from, width))
                          .view({x.size(0), x.size(1), -1, dh});
    if (l2) {
      y = y / torch::sqrt(y.norm(2, -1, /*keepdim=*/true).square() + 1e-6);
    }
    return y.transpose(1, 2);
  };
  const int64_t n = 2 * qk + inner;
  const torch::Tensor xb = xf.narrow(2, n, heads);
  const torch::Tensor xa = xf.narrow(2, n + heads, heads);
  return {act(0, qk, true), act(qk, qk, true), act(2 * qk, inner, false),
          torch::sigmoid(xb).transpose(1, 2),
          (-a_log.exp() * torch::softplus(xa + dt_bias)).transpose(1, 2)};
}

// RunOutputs for GatedDeltaInputs-shaped functions, w.r.t. x, a_log and
// dt_bias.
template <typename Fn>
OutputsResult RunGatedDeltaInputs(Fn fn, const torch::Tensor& x,
                                  const torch::Tensor& a_log,
                                  const torch::Tensor& dt_bias, uint64_t seed) {
  return RunOutputs(
      [&] {
        const GatedDeltaInputTensors in = fn();
        return std::vector<torch::Tensor>{in.q, in.k, in.v, in.beta, in.g};
      },
      {x, a_log, dt_bias}, seed);
}

TEST(GatedDeltaInputsTest, MatchesFormulaWithGradients) {
  TwoThreads two_threads;
  const char* const names[] = {"q", "k", "v", "beta", "g"};
  const char* const grad_names[] = {"dx", "da_log", "ddt_bias"};
  // 4 value heads of dh = 6; q and k with 4 heads (mha), 2 or 1 (grouped).
  for (const int64_t qk_heads : {4, 2, 1})
    for (const torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32}) {
      const double tolerance = dtype == torch::kFloat64 ? 1e-13 : 1e-5;
      const auto opts = torch::TensorOptions().dtype(dtype);
      const int64_t n = (2 * qk_heads + 4) * 6, width = n + 8;
      torch::manual_seed(21);
      // Large entries so that SiLU's and the sigmoid's both branches show, and
      // decay inputs past softplus's threshold (20) in some rows.
      torch::Tensor x0 = 4 * torch::randn({3, 37, width}, opts);
      x0.narrow(2, n + 4, 4).narrow(1, 0, 5).fill_(25.0);
      for (const bool strided : {false, true}) {
        // Strided: time steps with a row stride wider than the width.
        const torch::Tensor x =
            (strided ? torch::cat({x0, x0}, 2).narrow(2, 0, width) : x0)
                .detach()
                .requires_grad_();
        const torch::Tensor a_log =
            torch::randn({4}, opts).detach().requires_grad_();
        const torch::Tensor dt_bias =
            torch::randn({4}, opts).detach().requires_grad_();
        const OutputsResult ref = RunGatedDeltaInputs(
            [&] {
              return GatedDeltaInputsReference(x, 4, qk_heads, a_log, dt_bias);
            },
            x, a_log, dt_bias, 5);
        const OutputsResult fused = RunGatedDeltaInputs(
            [&] { return GatedDeltaInputs(x, 4, qk_heads, a_log, dt_bias); }, x,
            a_log, dt_bias, 5);
        const OutputsResult aten = RunGatedDeltaInputs(
            [&] {
              return GatedDeltaInputsWithAten(x, 4, qk_heads, a_log, dt_bias);
            },
            x, a_log, dt_bias, 5);
        for (const OutputsResult* got : {&fused, &aten}) {
          const std::string where = std::string(c10::toString(dtype)) +
                                    " qk_heads " + std::to_string(qk_heads) +
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

// bf16 projection (under autocast): fp32 outputs, a bf16 gradient for x and
// fp32 gradients for the fp32 parameters.
TEST(GatedDeltaInputsTest, Bf16InputGivesFp32OutputsAndBf16Gradient) {
  torch::manual_seed(22);
  const torch::Tensor x =
      torch::randn({2, 9, 3 * 16 + 4}).to(torch::kBFloat16).requires_grad_();
  const torch::Tensor a_log = torch::randn({2}).requires_grad_();
  const torch::Tensor dt_bias = torch::randn({2}).requires_grad_();
  const OutputsResult got = RunGatedDeltaInputs(
      [&] { return GatedDeltaInputs(x, 2, 2, a_log, dt_bias); }, x, a_log,
      dt_bias, 6);
  const OutputsResult ref = RunGatedDeltaInputs(
      [&] { return GatedDeltaInputsReference(x, 2, 2, a_log, dt_bias); }, x,
      a_log, dt_bias, 6);
  for (size_t i = 0; i < got.outs.size(); ++i) {
    EXPECT_EQ(got.outs[i].scalar_type(), torch::kFloat32);
    EXPECT_LT(MaxRelError(got.outs[i], ref.outs[i]), 1e-5) << i;
  }
  EXPECT_EQ(got.grads[0].scalar_type(), torch::kBFloat16);
  EXPECT_EQ(got.grads[1].scalar_type(), torch::kFloat32);
  EXPECT_LT(MaxRelError(got.grads[0], ref.grads[0]), 1e-2);
  EXPECT_LT(MaxRelError(got.grads[1], ref.grads[1]), 1e-5);
  EXPECT_LT(MaxRelError(got.grads[2], ref.grads[2]), 1e-5);
}

TEST(GatedDeltaInputsTest, RejectsWidthsThatDoNotSplit) {
  const torch::Tensor a_log = torch::zeros({3}), dt_bias = torch::zeros({3});
  // 3 * 3 * dh + 2 * 3 = 40 has no integer dh.
  EXPECT_THROW(GatedDeltaInputs(torch::randn({1, 4, 40}), 3, 3, a_log, dt_bias),
               c10::Error);
  EXPECT_THROW(GatedDeltaInputs(torch::randn({1, 4, 42}), 3, 3,
                                torch::zeros({2}), dt_bias),
               c10::Error);
  // q, k heads that do not divide the value heads.
  EXPECT_THROW(
      GatedDeltaInputs(torch::randn({1, 4, 3 * 7 + 6}), 3, 2, a_log, dt_bias),
      c10::Error);
}

// GDN and Mamba-2 against their definitions written out in ATen ops, from
// their separate (or unsplit) projections: catches a misordered
// concatenation or split, which chunked-vs-reference cannot.
// Grouped (4 value heads, q and k with 2: value head j reads q, k head
// j / 2, as fla's repeat of q, k to num_v_heads) and mha (a q, k head per
// value head).
TEST(GatedDeltaNetTest, MatchesDefinitionWrittenOut) {
  for (const bool mha : {false, true}) {
    ModelConfig config;
    config.d_model = 64;
    config.n_heads = 4;
    config.n_kv_heads = 2;
    config.head_dim = 16;
    MixerSpec spec;
    spec.kind = MixerKind::kGatedDeltaNet;
    spec.chunk = 16;
    spec.gdn_mha = mha;
    config.layers.assign(2, spec);
    torch::manual_seed(26);
    auto mixer = std::make_shared<GatedDeltaNet>(config, spec);
    mixer->to(torch::kFloat64);
    auto params = mixer->named_parameters();
    {
      torch::NoGradGuard no_grad;
      params["o_norm"].uniform_(0.5, 1.5);
    }
    const int64_t b = 2, t = 40, h = 4, hqk = mha ? 4 : 2, dh = 16;
    const torch::Tensor x = torch::randn({b, t, 64}, torch::kFloat64);
    const auto proj = [&](const char* name) {
      return torch::matmul(x, params[name].t());
    };
    const auto heads = [&](const torch::Tensor& y, bool l2) {
      torch::Tensor z = torch::silu(y).view({b, t, -1, dh});
      if (l2) z = z / torch::sqrt(z.pow(2).sum(-1, true) + 1e-6);
      return z.repeat_interleave(h / z.size(2), 2).transpose(1, 2);
    };
    EXPECT_EQ(params["q_proj.weight"].size(0), hqk * dh);
    const torch::Tensor q = heads(proj("q_proj.weight"), true);
    const torch::Tensor k = heads(proj("k_proj.weight"), true);
    const torch::Tensor v = heads(proj("v_proj.weight"), false);
    const torch::Tensor beta =
        torch::sigmoid(proj("b_proj.weight")).transpose(1, 2);
    const torch::Tensor g =
        (-params["A_log"].exp() *
         torch::softplus(proj("a_proj.weight") + params["dt_bias"]))
            .transpose(1, 2);
    const torch::Tensor o =
        RecurrentGatedDelta(q, k, v, g, beta, 1.0 / std::sqrt(double(dh)))
            .transpose(1, 2);  // (B, T, H, dh)
    const torch::Tensor normed =
        o * torch::rsqrt(o.pow(2).mean(-1, true) + 1e-6) * params["o_norm"];
    const torch::Tensor y =
        (torch::silu(proj("g_proj.weight").view({b, t, h, dh})) * normed)
            .reshape({b, t, h * dh});
    const torch::Tensor want = torch::matmul(y, params["o_proj.weight"].t());
    EXPECT_LT(MaxRelError(mixer->forward(x), want), kFp64Tolerance)
        << (mha ? "mha" : "grouped");
  }
}

}  // namespace
}  // namespace hlab::model
