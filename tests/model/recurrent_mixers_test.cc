// Tests of the recurrent mixers: the chunked kernels against their step-by-step
// recurrences (outputs and gradients, fp64 and fp32), the recurrences against
// closed forms, and the Lightning, Mamba2 and GatedDeltaNet modules (chunked
// vs reference forward, causality, parameter counts).
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/config/model_config.h"
#include "model/config/param_count.h"
#include "model/gated_delta_kernel.h"
#include "model/gated_deltanet.h"
#include "model/gdn_inputs.h"
#include "model/internal/gated_delta_fused.h"
#include "model/internal/scalar_gla_fused.h"
#include "model/internal/small_bf16_gemm.h"
#include "model/lightning.h"
#include "model/mamba2.h"
#include "model/mamba2_inputs.h"
#include "model/mixer.h"
#include "model/scalar_gla_kernel.h"
#include "model/short_conv.h"

namespace hlab::model {
namespace {

constexpr double kFp64Tolerance = 1e-10;  // max |a - ref| / max |ref|
// fp32 chunked vs fp64 recurrence, relative RMS error (fla's assert_close
// metric; fla allows 0.005-0.02 in fp16). Measured ~1e-7 to 1e-6.
constexpr double kFp32Tolerance = 1e-5;

// max |a - ref| / max |ref| (0 when both are 0).
double MaxRelError(const torch::Tensor& a, const torch::Tensor& ref) {
  const torch::Tensor a64 = a.to(torch::kFloat64);
  const torch::Tensor r64 = ref.to(torch::kFloat64);
  const double diff = (a64 - r64).abs().max().item<double>();
  const double scale = r64.abs().max().item<double>();
  if (!std::isfinite(diff)) return INFINITY;
  return scale > 0 ? diff / scale : diff;
}

// ||a - ref||_2 / ||ref||_2, fla's relative RMS error.
double RelRmsError(const torch::Tensor& a, const torch::Tensor& ref) {
  const torch::Tensor a64 = a.to(torch::kFloat64);
  const torch::Tensor r64 = ref.to(torch::kFloat64);
  const double diff = (a64 - r64).norm().item<double>();
  const double scale = r64.norm().item<double>();
  if (!std::isfinite(diff)) return INFINITY;
  return scale > 0 ? diff / scale : diff;
}

// Output and gradients of (out * dout).sum() w.r.t. `inputs`.
struct Result {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

template <typename Fn>
Result RunWithGrads(Fn fn, const std::vector<torch::Tensor>& inputs,
                    const torch::Tensor& dout) {
  Result r;
  r.out = fn();
  r.grads = torch::autograd::grad({(r.out * dout.to(r.out.dtype())).sum()},
                                  inputs, {}, /*retain_graph=*/false,
                                  /*create_graph=*/false,
                                  /*allow_unused=*/true);
  r.out = r.out.detach();
  return r;
}

// Inputs as in fla's tests: q, k L2-normalised, g = logsigmoid(randn) scaled
// by `decay_scale`, beta = sigmoid(randn).
struct KernelInputs {
  torch::Tensor q, k, v, g, beta;
  std::vector<torch::Tensor> All() const { return {q, k, v, g, beta}; }
};

KernelInputs MakeKernelInputs(int64_t b, int64_t h, int64_t t, int64_t dk,
                              int64_t dv, double decay_scale,
                              torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const auto l2 = [](const torch::Tensor& x) {
    return x / x.norm(2, -1, /*keepdim=*/true);
  };
  KernelInputs in;
  in.q = l2(torch::randn({b, h, t, dk}, opts));
  in.k = l2(torch::randn({b, h, t, dk}, opts));
  in.v = torch::randn({b, h, t, dv}, opts);
  in.g = torch::log_sigmoid(torch::randn({b, h, t}, opts)) * decay_scale;
  in.beta = torch::sigmoid(torch::randn({b, h, t}, opts));
  for (torch::Tensor* x : {&in.q, &in.k, &in.v, &in.g, &in.beta}) {
    *x = x->to(dtype).requires_grad_(true);
  }
  return in;
}

const char* const kInputNames[] = {"q", "k", "v", "g", "beta"};

// ---------------------------------------------------------------------------
// Kernels: chunked vs recurrent, fp64, T = 75 (not a multiple of any chunk).

class KernelFp64Test
    : public ::testing::TestWithParam<std::tuple<int64_t, double>> {};

TEST_P(KernelFp64Test, ScalarGlaChunkedMatchesRecurrent) {
  const auto [chunk, decay_scale] = GetParam();
  const KernelInputs in =
      MakeKernelInputs(2, 3, 75, 16, 12, decay_scale, torch::kFloat64, 1);
  const std::vector<torch::Tensor> inputs = {in.q, in.k, in.v, in.g};
  const torch::Tensor dout = torch::randn({2, 3, 75, 12}, torch::kFloat64);
  const Result got = RunWithGrads(
      [&] { return ChunkedScalarGla(in.q, in.k, in.v, in.g, 0.25, chunk); },
      inputs, dout);
  const Result ref = RunWithGrads(
      [&] { return RecurrentScalarGla(in.q, in.k, in.v, in.g, 0.25); }, inputs,
      dout);
  ASSERT_EQ(got.out.scalar_type(), torch::kFloat64);
  EXPECT_LT(MaxRelError(got.out, ref.out), kFp64Tolerance);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), kFp64Tolerance)
        << "d" << kInputNames[i];
  }
}

TEST_P(KernelFp64Test, GatedDeltaChunkedMatchesRecurrent) {
  const auto [chunk, decay_scale] = GetParam();
  const KernelInputs in =
      MakeKernelInputs(2, 3, 75, 16, 12, decay_scale, torch::kFloat64, 2);
  const torch::Tensor dout = torch::randn({2, 3, 75, 12}, torch::kFloat64);
  const Result got = RunWithGrads(
      [&] {
        return ChunkedGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.25, chunk);
      },
      in.All(), dout);
  const Result ref = RunWithGrads(
      [&] {
        return RecurrentGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.25);
      },
      in.All(), dout);
  ASSERT_EQ(got.out.scalar_type(), torch::kFloat64);
  EXPECT_LT(MaxRelError(got.out, ref.out), kFp64Tolerance);
  for (size_t i = 0; i < in.All().size(); ++i) {
    EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), kFp64Tolerance)
        << "d" << kInputNames[i];
  }
}

INSTANTIATE_TEST_SUITE_P(
    ChunksAndDecays, KernelFp64Test,
    ::testing::Combine(::testing::Values<int64_t>(16, 32, 64),
                       ::testing::Values(1.0, 10.0, 100.0)),
    [](const auto& param_info) {
      return "C" + std::to_string(std::get<0>(param_info.param)) + "_g" +
             std::to_string(static_cast<int>(std::get<1>(param_info.param)));
    });

// T shorter than one chunk, and T an exact multiple of it (no padding).
TEST(KernelEdgeTest, ShortAndExactLengths) {
  for (const int64_t t : {1, 5, 32, 64}) {
    const KernelInputs in =
        MakeKernelInputs(1, 2, t, 8, 8, 1.0, torch::kFloat64, 3);
    EXPECT_LT(MaxRelError(ChunkedScalarGla(in.q, in.k, in.v, in.g, 1.0, 32),
                          RecurrentScalarGla(in.q, in.k, in.v, in.g, 1.0)),
              kFp64Tolerance)
        << "T=" << t;
    EXPECT_LT(
        MaxRelError(ChunkedGatedDelta(in.q, in.k, in.v, in.g, in.beta, 1.0, 32),
                    RecurrentGatedDelta(in.q, in.k, in.v, in.g, in.beta, 1.0)),
        kFp64Tolerance)
        << "T=" << t;
  }
}

// Mamba-2 shares q, k across heads (H = 1) and Lightning g across the batch.
TEST(KernelEdgeTest, ScalarGlaBroadcastsSharedQkAndDecay) {
  torch::manual_seed(4);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor q = torch::randn({2, 1, 50, 8}, opts).requires_grad_();
  const torch::Tensor k = torch::randn({2, 1, 50, 8}, opts).requires_grad_();
  const torch::Tensor v = torch::randn({2, 3, 50, 4}, opts).requires_grad_();
  const torch::Tensor g = (-torch::rand({1, 3, 50}, opts)).requires_grad_();
  const torch::Tensor dout = torch::randn({2, 3, 50, 4}, opts);
  const std::vector<torch::Tensor> inputs = {q, k, v, g};
  const Result got = RunWithGrads(
      [&] { return ChunkedScalarGla(q, k, v, g, 1.0, 16); }, inputs, dout);
  // Reference: the same inputs expanded to full shapes.
  const Result ref = RunWithGrads(
      [&] {
        return RecurrentScalarGla(q.expand({2, 3, 50, 8}),
                                  k.expand({2, 3, 50, 8}), v,
                                  g.expand({2, 3, 50}), 1.0);
      },
      inputs, dout);
  EXPECT_LT(MaxRelError(got.out, ref.out), kFp64Tolerance);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(got.grads[i].sizes(), inputs[i].sizes());
    EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), kFp64Tolerance)
        << "d" << kInputNames[i];
  }
}

// Lightning's GQA: K and V with fewer heads than Q, each serving its group
// of query heads (as repeat_interleave would lay them out).
TEST(KernelEdgeTest, ScalarGlaServesGroupedKvHeads) {
  torch::manual_seed(5);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor q = torch::randn({2, 4, 50, 8}, opts).requires_grad_();
  const torch::Tensor k = torch::randn({2, 2, 50, 8}, opts).requires_grad_();
  const torch::Tensor v = torch::randn({2, 2, 50, 6}, opts).requires_grad_();
  const torch::Tensor g = (-torch::rand({2, 4, 50}, opts)).requires_grad_();
  const torch::Tensor dout = torch::randn({2, 4, 50, 6}, opts);
  const std::vector<torch::Tensor> inputs = {q, k, v, g};
  const Result ref = RunWithGrads(
      [&] {
        return RecurrentScalarGla(q, k.repeat_interleave(2, 1),
                                  v.repeat_interleave(2, 1), g, 0.5);
      },
      inputs, dout);
  const Result recurrent = RunWithGrads(
      [&] { return RecurrentScalarGla(q, k, v, g, 0.5); }, inputs, dout);
  const Result chunked = RunWithGrads(
      [&] { return ChunkedScalarGla(q, k, v, g, 0.5, 16); }, inputs, dout);
  const Result aten = RunWithGrads(
      [&] { return internal::ChunkedScalarGlaWithAten(q, k, v, g, 0.5, 16); },
      inputs, dout);
  for (const Result* got : {&recurrent, &chunked, &aten}) {
    EXPECT_LT(MaxRelError(got->out, ref.out), kFp64Tolerance);
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_EQ(got->grads[i].sizes(), inputs[i].sizes());
      EXPECT_LT(MaxRelError(got->grads[i], ref.grads[i]), kFp64Tolerance)
          << "d" << kInputNames[i];
    }
  }
}

TEST(KernelEdgeTest, ScalarGlaRejectsHeadsThatDoNotDivide) {
  const torch::Tensor q = torch::randn({1, 3, 8, 4});
  const torch::Tensor v = torch::randn({1, 4, 8, 4});
  const torch::Tensor g = -torch::rand({1, 4, 8});
  EXPECT_THROW(ChunkedScalarGla(q, q, v, g, 1.0, 4), c10::Error);
  EXPECT_THROW(RecurrentScalarGla(q, q, v, g, 1.0), c10::Error);
}

// The fused CPU kernel against the ATen composition it replaces, with every
// broadcast at once (shared q, k heads, shared g batch, T = 75 in chunks of
// 16): the same sums, to rounding.
TEST(KernelEdgeTest, FusedScalarGlaMatchesAtenComposition) {
  torch::manual_seed(6);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor q = torch::randn({2, 1, 75, 8}, opts).requires_grad_();
  const torch::Tensor k = torch::randn({2, 1, 75, 8}, opts).requires_grad_();
  const torch::Tensor v = torch::randn({2, 3, 75, 5}, opts).requires_grad_();
  const torch::Tensor g = (-torch::rand({1, 3, 75}, opts)).requires_grad_();
  const torch::Tensor dout = torch::randn({2, 3, 75, 5}, opts);
  const std::vector<torch::Tensor> inputs = {q, k, v, g};
  ASSERT_TRUE(internal::FusedScalarGlaServes(q, k, v, g));
  const Result fused = RunWithGrads(
      [&] {
        return internal::FusedChunkedScalarGla(q, k, v, g, 0.3, 16,
                                               /*bf16_products=*/false);
      },
      inputs, dout);
  const Result aten = RunWithGrads(
      [&] { return internal::ChunkedScalarGlaWithAten(q, k, v, g, 0.3, 16); },
      inputs, dout);
  EXPECT_LT(MaxRelError(fused.out, aten.out), 1e-12);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(fused.grads[i].sizes(), inputs[i].sizes());
    EXPECT_LT(MaxRelError(fused.grads[i], aten.grads[i]), 1e-12)
        << "d" << kInputNames[i];
  }
}

// Under autocast the projections hand the kernel bf16 (B, T, H, d) tensors
// viewed as (B, H, T, d): the fused kernel reads them through their strides
// and writes a bf16 output whose (B, T, H, dv) transpose is contiguous. It
// computes in fp32 as the ATen path does: the outputs differ by bf16
// rounding of fp32 results that differ in summation order only.
TEST(KernelFp32Test, FusedScalarGlaReadsStridedBf16) {
  torch::manual_seed(7);
  const auto make = [](int64_t heads, int64_t d) {
    return (torch::randn({2, 70, heads, d}) * 0.5)
        .to(torch::kBFloat16)
        .transpose(1, 2)
        .requires_grad_();
  };
  const torch::Tensor q = make(4, 16), k = make(2, 16), v = make(2, 16);
  const torch::Tensor g = -torch::rand({1, 4, 70});
  const torch::Tensor dout = torch::randn({2, 4, 70, 16});
  const std::vector<torch::Tensor> inputs = {q, k, v};
  const Result fused = RunWithGrads(
      [&] { return ChunkedScalarGla(q, k, v, g, 0.25, 32); }, inputs, dout);
  const Result aten = RunWithGrads(
      [&] { return internal::ChunkedScalarGlaWithAten(q, k, v, g, 0.25, 32); },
      inputs, dout);
  EXPECT_EQ(fused.out.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(fused.out.transpose(1, 2).is_contiguous());
  EXPECT_LT(RelRmsError(fused.out, aten.out), 2e-3);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(fused.grads[i].scalar_type(), torch::kBFloat16);
    EXPECT_LT(RelRmsError(fused.grads[i], aten.grads[i]), 5e-3)
        << "d" << kInputNames[i];
  }
}

// The fused gated-delta kernel against the composition it replaces: fp64 to
// rounding, and bf16 inputs read through their strides (the composition
// converts them to fp32 first) to bf16 rounding of the same fp32 sums.
TEST(KernelEdgeTest, FusedGatedDeltaMatchesComposition) {
  const KernelInputs in =
      MakeKernelInputs(2, 3, 75, 16, 12, 1.0, torch::kFloat64, 17);
  const torch::Tensor dout = torch::randn({2, 3, 75, 12}, torch::kFloat64);
  ASSERT_TRUE(
      internal::FusedGatedDeltaServes({in.q, in.k, in.v, in.g, in.beta}));
  const Result fused = RunWithGrads(
      [&] {
        return internal::FusedChunkedGatedDelta(in.q, in.k, in.v, in.g, in.beta,
                                                0.3, 16,
                                                /*bf16_products=*/false);
      },
      in.All(), dout);
  const Result composed = RunWithGrads(
      [&] {
        return internal::ChunkedGatedDeltaComposed(in.q, in.k, in.v, in.g,
                                                   in.beta, 0.3, 16);
      },
      in.All(), dout);
  EXPECT_LT(MaxRelError(fused.out, composed.out), 1e-12);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_LT(MaxRelError(fused.grads[i], composed.grads[i]), 1e-12)
        << "d" << kInputNames[i];
  }

  const auto bf16_rows = [](const torch::Tensor& x) {
    return x.detach()
        .transpose(1, 2)
        .contiguous()
        .to(torch::kBFloat16)
        .transpose(1, 2)
        .requires_grad_();
  };
  const torch::Tensor q = bf16_rows(in.q), k = bf16_rows(in.k),
                      v = bf16_rows(in.v);
  const torch::Tensor g = in.g.detach().to(torch::kFloat32).requires_grad_();
  const torch::Tensor beta =
      in.beta.detach().to(torch::kFloat32).requires_grad_();
  const std::vector<torch::Tensor> inputs = {q, k, v, g, beta};
  const Result fused16 =
      RunWithGrads([&] { return ChunkedGatedDelta(q, k, v, g, beta, 0.3, 16); },
                   inputs, dout);
  const Result composed16 = RunWithGrads(
      [&] {
        return internal::ChunkedGatedDeltaComposed(q, k, v, g, beta, 0.3, 16);
      },
      inputs, dout);
  EXPECT_EQ(fused16.out.scalar_type(), torch::kBFloat16);
  EXPECT_LT(RelRmsError(fused16.out, composed16.out), 2e-3);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(fused16.grads[i].scalar_type(), inputs[i].scalar_type());
    EXPECT_LT(RelRmsError(fused16.grads[i], composed16.grads[i]), 5e-3)
        << "d" << kInputNames[i];
  }
}

// ---------------------------------------------------------------------------
// The recurrences against closed forms written independently.

// o_t = scale * sum_{j <= t} exp(G_t - G_j) (q_t . k_j) v_j, G = cumsum(g).
TEST(RecurrenceTest, ScalarGlaMatchesQuadraticForm) {
  const KernelInputs in =
      MakeKernelInputs(2, 2, 20, 8, 6, 1.0, torch::kFloat64, 5);
  const torch::Tensor cum = in.g.detach().cumsum(-1);
  const torch::Tensor decay = (cum.unsqueeze(-1) - cum.unsqueeze(-2))
                                  .exp()
                                  .tril();  // (B, H, T, T), j <= t
  const torch::Tensor expected = torch::matmul(
      0.5 * torch::matmul(in.q.detach(), in.k.detach().transpose(-1, -2)) *
          decay,
      in.v.detach());
  EXPECT_LT(
      MaxRelError(RecurrentScalarGla(in.q, in.k, in.v, in.g, 0.5), expected),
      1e-13);
}

// S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T for one
// head, as explicit matrix products.
TEST(RecurrenceTest, GatedDeltaMatchesHouseholderForm) {
  const KernelInputs in =
      MakeKernelInputs(1, 1, 12, 5, 3, 1.0, torch::kFloat64, 6);
  const torch::Tensor q = in.q.detach()[0][0], k = in.k.detach()[0][0],
                      v = in.v.detach()[0][0], g = in.g.detach()[0][0],
                      beta = in.beta.detach()[0][0];
  torch::Tensor s = torch::zeros({5, 3}, torch::kFloat64);
  const torch::Tensor eye = torch::eye(5, torch::kFloat64);
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < 12; ++t) {
    const torch::Tensor kt = k[t].unsqueeze(1);  // (dk, 1)
    s = g[t].exp() * torch::matmul(eye - beta[t] * kt.mm(kt.t()), s) +
        beta[t] * kt.mm(v[t].unsqueeze(0));
    outs.push_back(torch::matmul(s.t(), 0.3 * q[t]));
  }
  const torch::Tensor expected = torch::stack(outs);  // (T, dv)
  EXPECT_LT(MaxRelError(
                RecurrentGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.3)[0][0],
                expected),
            1e-13);
}

// ---------------------------------------------------------------------------
// fp32: chunked in fp32 vs the fp64 recurrence; dtype and autocast rules.

TEST(KernelFp32Test, ChunkedFp32MatchesFp64Recurrence) {
  const KernelInputs in64 =
      MakeKernelInputs(2, 2, 200, 32, 32, 1.0, torch::kFloat64, 7);
  KernelInputs in32;
  in32.q = in64.q.detach().to(torch::kFloat32).requires_grad_();
  in32.k = in64.k.detach().to(torch::kFloat32).requires_grad_();
  in32.v = in64.v.detach().to(torch::kFloat32).requires_grad_();
  in32.g = in64.g.detach().to(torch::kFloat32).requires_grad_();
  in32.beta = in64.beta.detach().to(torch::kFloat32).requires_grad_();
  const torch::Tensor dout = torch::randn({2, 2, 200, 32}, torch::kFloat64);

  const Result gla32 = RunWithGrads(
      [&] { return ChunkedScalarGla(in32.q, in32.k, in32.v, in32.g, 0.2, 64); },
      {in32.q, in32.k, in32.v, in32.g}, dout);
  const Result gla64 = RunWithGrads(
      [&] { return RecurrentScalarGla(in64.q, in64.k, in64.v, in64.g, 0.2); },
      {in64.q, in64.k, in64.v, in64.g}, dout);
  ASSERT_EQ(gla32.out.scalar_type(), torch::kFloat32);
  EXPECT_LT(RelRmsError(gla32.out, gla64.out), kFp32Tolerance);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LT(RelRmsError(gla32.grads[i], gla64.grads[i]), kFp32Tolerance)
        << "scalar GLA d" << kInputNames[i];
  }

  const Result gdn32 = RunWithGrads(
      [&] {
        return ChunkedGatedDelta(in32.q, in32.k, in32.v, in32.g, in32.beta, 0.2,
                                 32);
      },
      in32.All(), dout);
  const Result gdn64 = RunWithGrads(
      [&] {
        return RecurrentGatedDelta(in64.q, in64.k, in64.v, in64.g, in64.beta,
                                   0.2);
      },
      in64.All(), dout);
  ASSERT_EQ(gdn32.out.scalar_type(), torch::kFloat32);
  EXPECT_LT(RelRmsError(gdn32.out, gdn64.out), kFp32Tolerance);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_LT(RelRmsError(gdn32.grads[i], gdn64.grads[i]), kFp32Tolerance)
        << "gated delta d" << kInputNames[i];
  }
}

// CPU autocast to bf16 for its lifetime; restores the previous setting.
class Bf16Autocast {
 public:
  Bf16Autocast()
      : was_enabled_(at::autocast::is_cpu_enabled()),
        was_dtype_(at::autocast::get_autocast_cpu_dtype()) {
    at::autocast::set_autocast_cpu_dtype(torch::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  ~Bf16Autocast() {
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
    at::autocast::clear_cache();
  }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

// Under CPU bf16 autocast the kernels' chunk products take bf16 operands
// (SmallBf16Gemm) while the decays, sums, the inverse and the states stay
// fp32; fp32 inputs give an fp32 output, and autocast is left on. Against
// the fp64 recurrence, outputs and every gradient, T = 100 (no multiple of
// the chunks), weak and strong decays: measured 3.2e-3 to 5.0e-3 relative RMS
// (bf16 keeps 8 significant bits; fla's tests allow 5e-3 to 2e-2 for
// half-precision kernels). Where the CPU runs the bf16 kernel the error is
// above fp32 level: the products did round.
TEST(KernelFp32Test, Bf16AutocastRoundsOnlyTheProducts) {
  constexpr double kBf16ProductTolerance = 1e-2;
  for (const double decay_scale : {1.0, 8.0}) {
    const KernelInputs in =
        MakeKernelInputs(2, 2, 100, 32, 32, decay_scale, torch::kFloat32, 8);
    std::vector<torch::Tensor> in64;
    for (const torch::Tensor& x : in.All()) {
      in64.push_back(x.detach().to(torch::kFloat64).requires_grad_());
    }
    const torch::Tensor dout = torch::randn({2, 2, 100, 32});
    bool still_enabled = false;
    const auto under_autocast = [&](const auto& kernel) {
      Bf16Autocast autocast;
      torch::Tensor out = kernel();
      still_enabled = at::autocast::is_cpu_enabled();
      return out;
    };
    const std::vector<torch::Tensor> gla_in = {in.q, in.k, in.v, in.g};
    const std::vector<torch::Tensor> gla_in64(in64.begin(), in64.begin() + 4);
    const Result gla = RunWithGrads(
        [&] {
          return under_autocast([&] {
            return ChunkedScalarGla(in.q, in.k, in.v, in.g, 0.2, 64);
          });
        },
        gla_in, dout);
    EXPECT_TRUE(still_enabled);
    const Result gla_ref = RunWithGrads(
        [&] {
          return RecurrentScalarGla(in64[0], in64[1], in64[2], in64[3], 0.2);
        },
        gla_in64, dout);
    const Result gdn = RunWithGrads(
        [&] {
          return under_autocast([&] {
            return ChunkedGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.2, 16);
          });
        },
        in.All(), dout);
    EXPECT_TRUE(still_enabled);
    const Result gdn_ref = RunWithGrads(
        [&] {
          return RecurrentGatedDelta(in64[0], in64[1], in64[2], in64[3],
                                     in64[4], 0.2);
        },
        in64, dout);
    EXPECT_EQ(gla.out.scalar_type(), torch::kFloat32);
    EXPECT_EQ(gdn.out.scalar_type(), torch::kFloat32);
    EXPECT_LT(RelRmsError(gla.out, gla_ref.out), kBf16ProductTolerance);
    EXPECT_LT(RelRmsError(gdn.out, gdn_ref.out), kBf16ProductTolerance);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_LT(RelRmsError(gla.grads[i], gla_ref.grads[i]),
                kBf16ProductTolerance)
          << "scalar GLA d" << kInputNames[i] << ", decay scale "
          << decay_scale;
    }
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_LT(RelRmsError(gdn.grads[i], gdn_ref.grads[i]),
                kBf16ProductTolerance)
          << "gated delta d" << kInputNames[i] << ", decay scale "
          << decay_scale;
    }
    if (internal::SmallBf16GemmAvailable()) {
      EXPECT_GT(RelRmsError(gla.out, gla_ref.out), kFp32Tolerance);
      EXPECT_GT(RelRmsError(gdn.out, gdn_ref.out), kFp32Tolerance);
    }
  }
}

TEST(KernelFp32Test, ReturnsInputDtype) {
  const KernelInputs in =
      MakeKernelInputs(1, 1, 10, 8, 8, 1.0, torch::kBFloat16, 9);
  EXPECT_EQ(ChunkedScalarGla(in.q, in.k, in.v, in.g, 1.0, 4).scalar_type(),
            torch::kBFloat16);
  EXPECT_EQ(
      ChunkedGatedDelta(in.q, in.k, in.v, in.g, in.beta, 1.0, 4).scalar_type(),
      torch::kBFloat16);
}

// ---------------------------------------------------------------------------
// Batched helpers: the thread-split matmul and triangular inverse against
// LibTorch's own ops, with two intra-op threads.

class TwoThreads {
 public:
  TwoThreads() : saved_(at::get_num_threads()) { at::set_num_threads(2); }
  ~TwoThreads() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

TEST(BatchedHelpersTest, ParallelBaddbmmMatchesTorch) {
  TwoThreads two_threads;
  torch::manual_seed(13);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor a = torch::randn({37, 5, 7}, opts).requires_grad_();
  const torch::Tensor b = torch::randn({37, 7, 3}, opts).requires_grad_();
  const torch::Tensor c = torch::randn({37, 5, 3}, opts).requires_grad_();
  const torch::Tensor dout = torch::randn({37, 5, 3}, opts);
  const std::vector<torch::Tensor> inputs = {c, a, b};
  const Result got = RunWithGrads(
      [&] { return ParallelBaddbmm(c, a, b, 0.5, -2.0); }, inputs, dout);
  const Result ref = RunWithGrads(
      [&] { return torch::baddbmm(c, a, b, 0.5, -2.0); }, inputs, dout);
  EXPECT_LT(MaxRelError(got.out, ref.out), 1e-14);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), 1e-14) << i;
  }
  EXPECT_LT(MaxRelError(ParallelBmm(a, b), torch::bmm(a, b)), 1e-14);
}

// The direct-GEMM path reads transposed views through their strides and
// copies other layouts: against torch::baddbmm for every combination of
// layouts, fp32 and fp64, several batch sizes (1 and odd ones), outputs and
// gradients.
TEST(BatchedHelpersTest, ParallelBaddbmmReadsStridedOperands) {
  TwoThreads two_threads;
  torch::manual_seed(17);
  // (N, r, c) with the given layout: 0 row-major, 1 a transposed view, 2 a
  // non-contiguous slice (every other column), 3 batch-broadcast (stride 0).
  const auto make = [](int64_t n, int64_t r, int64_t c, int layout,
                       torch::ScalarType dtype) {
    const auto opts = torch::TensorOptions().dtype(dtype);
    switch (layout) {
      case 1:
        return torch::randn({n, c, r}, opts).transpose(1, 2);
      case 2:
        return torch::randn({n, r, 2 * c}, opts).slice(2, 0, 2 * c, 2);
      case 3:
        return torch::randn({1, r, c}, opts).expand({n, r, c});
      default:
        return torch::randn({n, r, c}, opts);
    }
  };
  for (const torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32}) {
    const double tolerance = dtype == torch::kFloat64 ? 1e-13 : 1e-5;
    for (const int64_t n : {1, 3, 37}) {
      for (int la = 0; la < 4; ++la) {
        for (int lb = 0; lb < 4; ++lb) {
          const torch::Tensor a = make(n, 5, 7, la, dtype).requires_grad_();
          const torch::Tensor b = make(n, 7, 3, lb, dtype).requires_grad_();
          const torch::Tensor c =
              make(n, 5, 3, (la + lb) % 3, dtype).detach().requires_grad_();
          const torch::Tensor dout = make(n, 5, 3, lb % 3, dtype);
          const std::vector<torch::Tensor> inputs = {c, a, b};
          const Result got =
              RunWithGrads([&] { return ParallelBaddbmm(c, a, b, 0.5, -2.0); },
                           inputs, dout);
          const Result ref = RunWithGrads(
              [&] { return torch::baddbmm(c, a, b, 0.5, -2.0); }, inputs, dout);
          const std::string where = "dtype " +
                                    std::string(c10::toString(dtype)) + " n " +
                                    std::to_string(n) + " layouts " +
                                    std::to_string(la) + std::to_string(lb);
          EXPECT_LT(MaxRelError(got.out, ref.out), tolerance) << where;
          for (size_t i = 0; i < inputs.size(); ++i) {
            EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), tolerance)
                << where << " grad " << i;
          }
          EXPECT_LT(MaxRelError(ParallelBmm(a, b), torch::bmm(a, b)), tolerance)
              << where;
        }
      }
    }
  }
}

// Without BLAS (bf16) the ATen path still serves.
TEST(BatchedHelpersTest, ParallelBaddbmmFallsBackForBf16) {
  torch::manual_seed(18);
  const auto opts = torch::TensorOptions().dtype(torch::kBFloat16);
  const torch::Tensor a = torch::randn({4, 6, 3}, opts).transpose(1, 2);
  const torch::Tensor b = torch::randn({4, 6, 5}, opts);
  const torch::Tensor got = ParallelBmm(a, b);  // (4, 3, 5)
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  EXPECT_LT(MaxRelError(
                got, torch::bmm(a.to(torch::kFloat64), b.to(torch::kFloat64))),
            2e-2);
}

TEST(BatchedHelpersTest, UnitLowerInverseMatchesSolve) {
  TwoThreads two_threads;
  torch::manual_seed(14);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  // The diagonal and upper triangle are ignored: fill them with noise.
  const torch::Tensor a =
      (0.3 * torch::randn({21, 6, 6}, opts)).requires_grad_();
  const torch::Tensor dout = torch::randn({21, 6, 6}, opts);
  const Result got =
      RunWithGrads([&] { return UnitLowerInverse(a); }, {a}, dout);
  const Result ref = RunWithGrads(
      [&] {
        return torch::linalg_solve_triangular(a.tril(-1) + torch::eye(6, opts),
                                              torch::eye(6, opts).expand_as(a),
                                              /*upper=*/false);
      },
      {a}, dout);
  EXPECT_LT(MaxRelError(got.out, ref.out), 1e-13);
  EXPECT_LT(MaxRelError(got.grads[0], ref.grads[0]), 1e-13);
  EXPECT_EQ(got.grads[0].triu().abs().max().item<double>(), 0.0);
}

// The kernels' size (C = 32) and others, fp32 and fp64, non-contiguous input
// and output gradient, against the ATen triangular solve.
TEST(BatchedHelpersTest, UnitLowerInverseMatchesSolveAtKernelSizes) {
  torch::manual_seed(19);
  for (const torch::ScalarType dtype : {torch::kFloat64, torch::kFloat32}) {
    const auto opts = torch::TensorOptions().dtype(dtype);
    const double tolerance = dtype == torch::kFloat64 ? 1e-12 : 1e-5;
    for (const int64_t n : {1, 5, 64}) {
      for (const int64_t c : {1, 7, 32}) {
        // Entries as in the kernels' beta K K^T * D: well conditioned.
        const torch::Tensor a = (torch::randn({n, c, c}, opts) / std::sqrt(c))
                                    .transpose(1, 2)
                                    .requires_grad_();
        const torch::Tensor dout =
            torch::randn({n, c, c}, opts).transpose(1, 2);
        const Result got =
            RunWithGrads([&] { return UnitLowerInverse(a); }, {a}, dout);
        const torch::Tensor eye = torch::eye(c, opts);
        const Result ref = RunWithGrads(
            [&] {
              return torch::linalg_solve_triangular(
                  a.tril(-1) + eye, eye.expand_as(a), /*upper=*/false);
            },
            {a}, dout);
        const std::string where = std::string(c10::toString(dtype)) + " n " +
                                  std::to_string(n) + " c " + std::to_string(c);
        EXPECT_LT(MaxRelError(got.out, ref.out), tolerance) << where;
        EXPECT_LT(MaxRelError(got.grads[0], ref.grads[0]), tolerance) << where;
        EXPECT_EQ(got.grads[0].triu().abs().max().item<double>(), 0.0) << where;
      }
    }
  }
}

// The chunked kernels with two intra-op threads (the batched matmuls split
// their batch) still match the recurrences (run with the default threads:
// their many tiny ops would only wait on thread hand-offs).
TEST(BatchedHelpersTest, KernelsMatchRecurrencesWithTwoThreads) {
  const KernelInputs in =
      MakeKernelInputs(3, 2, 70, 16, 8, 1.0, torch::kFloat64, 15);
  const torch::Tensor dout = torch::randn({3, 2, 70, 8}, torch::kFloat64);
  const std::vector<torch::Tensor> gla_inputs = {in.q, in.k, in.v, in.g};
  const Result gdn_ref = RunWithGrads(
      [&] { return RecurrentGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.3); },
      in.All(), dout);
  const Result gla_ref = RunWithGrads(
      [&] { return RecurrentScalarGla(in.q, in.k, in.v, in.g, 0.3); },
      gla_inputs, dout);
  TwoThreads two_threads;
  const Result gdn = RunWithGrads(
      [&] {
        return ChunkedGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.3, 16);
      },
      in.All(), dout);
  const Result gla = RunWithGrads(
      [&] { return ChunkedScalarGla(in.q, in.k, in.v, in.g, 0.3, 16); },
      gla_inputs, dout);
  EXPECT_LT(MaxRelError(gdn.out, gdn_ref.out), kFp64Tolerance);
  EXPECT_LT(MaxRelError(gla.out, gla_ref.out), kFp64Tolerance);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_LT(MaxRelError(gdn.grads[i], gdn_ref.grads[i]), kFp64Tolerance)
        << "gated delta d" << kInputNames[i];
  }
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LT(MaxRelError(gla.grads[i], gla_ref.grads[i]), kFp64Tolerance)
        << "scalar GLA d" << kInputNames[i];
  }
}

// Evaluation code runs the mixers without autograd (NoGradGuard,
// InferenceMode); the custom autograd Functions must work there too.
TEST(BatchedHelpersTest, KernelsRunWithoutAutograd) {
  const KernelInputs in =
      MakeKernelInputs(1, 2, 40, 8, 8, 1.0, torch::kFloat64, 16);
  const torch::Tensor gdn_ref =
      RecurrentGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.5).detach();
  const torch::Tensor gla_ref =
      RecurrentScalarGla(in.q, in.k, in.v, in.g, 0.5).detach();
  {
    torch::NoGradGuard no_grad;
    EXPECT_LT(
        MaxRelError(ChunkedGatedDelta(in.q, in.k, in.v, in.g, in.beta, 0.5, 16),
                    gdn_ref),
        kFp64Tolerance);
  }
  {
    c10::InferenceMode inference;
    const torch::Tensor q = in.q.detach().clone(), k = in.k.detach().clone(),
                        v = in.v.detach().clone(), g = in.g.detach().clone(),
                        beta = in.beta.detach().clone();
    EXPECT_LT(
        MaxRelError(ChunkedGatedDelta(q, k, v, g, beta, 0.5, 16), gdn_ref),
        kFp64Tolerance);
    EXPECT_LT(MaxRelError(ChunkedScalarGla(q, k, v, g, 0.5, 16), gla_ref),
              kFp64Tolerance);
  }
}

// ---------------------------------------------------------------------------
// GdnInputs (the GDN input activations from its concatenated projection).

// The formula GdnInputs replaces, written out here in ATen ops.
// q and k have qk_heads heads, v, beta and g `heads`.
GdnInputTensors GdnInputsReference(const torch::Tensor& x, int64_t heads,
                                   int64_t qk_heads, const torch::Tensor& a_log,
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

// Outputs and the gradients of sum_i <out_i, w_i> for random w_i (seeded)
// w.r.t. `inputs`: for the input passes, which return several tensors.
struct OutputsResult {
  std::vector<torch::Tensor> outs, grads;
};
OutputsResult RunOutputs(const std::function<std::vector<torch::Tensor>()>& fn,
                         const std::vector<torch::Tensor>& inputs,
                         uint64_t seed) {
  OutputsResult r;
  r.outs = fn();
  torch::manual_seed(seed);
  torch::Tensor loss = torch::zeros({}, r.outs[0].options());
  for (const torch::Tensor& o : r.outs) {
    loss = loss + (o * torch::randn(o.sizes(), o.options())).sum();
  }
  r.grads = torch::autograd::grad({loss}, inputs);
  for (torch::Tensor& o : r.outs) o = o.detach();
  return r;
}

// RunOutputs for GdnInputs-shaped functions, w.r.t. x, a_log and dt_bias.
template <typename Fn>
OutputsResult RunGdnInputs(Fn fn, const torch::Tensor& x,
                           const torch::Tensor& a_log,
                           const torch::Tensor& dt_bias, uint64_t seed) {
  return RunOutputs(
      [&] {
        const GdnInputTensors in = fn();
        return std::vector<torch::Tensor>{in.q, in.k, in.v, in.beta, in.g};
      },
      {x, a_log, dt_bias}, seed);
}

TEST(GdnInputsTest, MatchesFormulaWithGradients) {
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
        const OutputsResult ref = RunGdnInputs(
            [&] { return GdnInputsReference(x, 4, qk_heads, a_log, dt_bias); },
            x, a_log, dt_bias, 5);
        const OutputsResult fused = RunGdnInputs(
            [&] { return GdnInputs(x, 4, qk_heads, a_log, dt_bias); }, x, a_log,
            dt_bias, 5);
        const OutputsResult aten = RunGdnInputs(
            [&] { return GdnInputsWithAten(x, 4, qk_heads, a_log, dt_bias); },
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
TEST(GdnInputsTest, Bf16InputGivesFp32OutputsAndBf16Gradient) {
  torch::manual_seed(22);
  const torch::Tensor x =
      torch::randn({2, 9, 3 * 16 + 4}).to(torch::kBFloat16).requires_grad_();
  const torch::Tensor a_log = torch::randn({2}).requires_grad_();
  const torch::Tensor dt_bias = torch::randn({2}).requires_grad_();
  const OutputsResult got = RunGdnInputs(
      [&] { return GdnInputs(x, 2, 2, a_log, dt_bias); }, x, a_log, dt_bias, 6);
  const OutputsResult ref =
      RunGdnInputs([&] { return GdnInputsReference(x, 2, 2, a_log, dt_bias); },
                   x, a_log, dt_bias, 6);
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

TEST(GdnInputsTest, RejectsWidthsThatDoNotSplit) {
  const torch::Tensor a_log = torch::zeros({3}), dt_bias = torch::zeros({3});
  // 3 * 3 * dh + 2 * 3 = 40 has no integer dh.
  EXPECT_THROW(GdnInputs(torch::randn({1, 4, 40}), 3, 3, a_log, dt_bias),
               c10::Error);
  EXPECT_THROW(
      GdnInputs(torch::randn({1, 4, 42}), 3, 3, torch::zeros({2}), dt_bias),
      c10::Error);
  // q, k heads that do not divide the value heads.
  EXPECT_THROW(GdnInputs(torch::randn({1, 4, 3 * 7 + 6}), 3, 2, a_log, dt_bias),
               c10::Error);
}

// Mamba2Inputs (Mamba-2's inputs from its projection).

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

// ---------------------------------------------------------------------------
// Short conv.

TEST(ShortConvTest, MatchesExplicitCausalSum) {
  torch::manual_seed(10);
  ShortConv conv(6, 3, /*bias=*/true);
  conv->to(torch::kFloat64);
  const torch::Tensor x = torch::randn({2, 9, 6}, torch::kFloat64);
  const torch::Tensor y = conv->forward(x).detach();
  ASSERT_EQ(y.sizes(), x.sizes());
  const torch::Tensor w = conv->weight.detach().squeeze(1);  // (C, K)
  for (int64_t t = 0; t < 9; ++t) {
    torch::Tensor expected = conv->bias.detach().clone().expand({2, 6});
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t src = t - 2 + j;
      if (src >= 0) expected = expected + w.select(1, j) * x.select(1, src);
    }
    EXPECT_LT(MaxRelError(y.select(1, t), expected), 1e-14) << "t=" << t;
  }
}

// ---------------------------------------------------------------------------
// Modules.

ModelConfig SmallConfig() {
  ModelConfig config;
  config.vocab_size = 64;
  config.d_model = 32;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.head_dim = 8;
  config.ffn_hidden = 64;
  config.init_std = 0.1;  // larger than the default, to exercise the gates
  return config;
}

struct ModuleCase {
  std::string name;
  MixerSpec spec;
};

void PrintTo(const ModuleCase& c, std::ostream* os) { *os << c.name; }

std::vector<ModuleCase> ModuleCases() {
  std::vector<ModuleCase> cases;
  MixerSpec lightning;
  lightning.kind = MixerKind::kLightning;
  lightning.chunk = 16;
  cases.push_back({"lightning", lightning});

  MixerSpec mamba2;
  mamba2.kind = MixerKind::kMamba2;
  mamba2.ssm_state = 4;
  mamba2.ssm_head_dim = 8;
  mamba2.chunk = 16;
  cases.push_back({"mamba2", mamba2});
  mamba2.short_conv = true;
  mamba2.conv_size = 3;
  cases.push_back({"mamba2_conv", mamba2});

  // Grouped (the default: q, k with 2 heads for 4 value heads here) and
  // mha (q, k with a head per value head).
  MixerSpec gdn;
  gdn.kind = MixerKind::kGatedDeltaNet;
  gdn.chunk = 16;
  cases.push_back({"gdn", gdn});
  gdn.short_conv = true;
  cases.push_back({"gdn_conv", gdn});
  gdn.short_conv = false;
  gdn.gdn_heads = 2;
  gdn.gdn_head_dim = 12;
  cases.push_back({"gdn_2heads_dim12", gdn});
  MixerSpec mha;
  mha.kind = MixerKind::kGatedDeltaNet;
  mha.chunk = 16;
  mha.gdn_mha = true;
  cases.push_back({"gdn_mha", mha});
  mha.short_conv = true;
  cases.push_back({"gdn_mha_conv", mha});
  return cases;
}

std::shared_ptr<Mixer> Build(const ModelConfig& config, const MixerSpec& spec) {
  switch (spec.kind) {
    case MixerKind::kLightning:
      return std::make_shared<Lightning>(config, spec, /*layer_index=*/0);
    case MixerKind::kMamba2:
      return std::make_shared<Mamba2>(config, spec);
    case MixerKind::kGatedDeltaNet:
      return std::make_shared<GatedDeltaNet>(config, spec);
    default:
      return nullptr;
  }
}

// The parameter layout of model/config/param_count.h, written out here.
int64_t LayoutParameterCount(const ModelConfig& c, const MixerSpec& s) {
  const int64_t d = c.d_model;
  switch (s.kind) {
    case MixerKind::kLightning: {
      const int64_t inner = c.n_heads * c.head_dim;
      const int64_t kv = c.n_kv_heads * c.head_dim;
      return d * inner + 2 * d * kv + inner * d + inner + d * c.head_dim +
             c.head_dim * inner;
    }
    case MixerKind::kMamba2: {
      const int64_t di = s.ssm_expand * d, n = s.ssm_state;
      const int64_t hm = di / s.ssm_head_dim;
      return d * (2 * di + 2 * n + hm) + 3 * hm + di + di * d +
             (s.short_conv ? (di + 2 * n) * (s.conv_size + 1) : 0);
    }
    case MixerKind::kGatedDeltaNet: {
      const int64_t hg = s.gdn_heads > 0 ? s.gdn_heads : c.n_heads;
      const int64_t hqk = s.gdn_mha ? hg : hg * c.n_kv_heads / c.n_heads;
      const int64_t dh = s.gdn_head_dim > 0 ? s.gdn_head_dim : c.head_dim;
      return 2 * d * hqk * dh + 2 * d * hg * dh + hg * dh * d + 2 * d * hg +
             2 * hg + dh +
             (s.short_conv ? (2 * hqk + hg) * dh * s.conv_size : 0);
    }
    default:
      return -1;
  }
}

class MixerModuleTest : public ::testing::TestWithParam<ModuleCase> {
 protected:
  void SetUp() override {
    torch::manual_seed(11);
    config_ = SmallConfig();
    mixer_ = Build(config_, GetParam().spec);
    ASSERT_NE(mixer_, nullptr);
  }
  ModelConfig config_;
  std::shared_ptr<Mixer> mixer_;
};

TEST_P(MixerModuleTest, ParameterCountMatchesLayout) {
  int64_t count = 0;
  for (const torch::Tensor& p : mixer_->parameters()) count += p.numel();
  EXPECT_EQ(count, LayoutParameterCount(config_, GetParam().spec));
  // The closed form the coordinator uses, implemented from the same layout.
  EXPECT_EQ(count, CountMixerParameters(config_, GetParam().spec));
}

TEST_P(MixerModuleTest, ChunkedMatchesReferenceInFp64WithGradients) {
  mixer_->to(torch::kFloat64);
  const int64_t t = 37;  // not a multiple of the chunk (16)
  const torch::Tensor x =
      torch::randn({2, t, config_.d_model}, torch::kFloat64).requires_grad_();
  const torch::Tensor dout =
      torch::randn({2, t, config_.d_model}, torch::kFloat64);
  std::vector<torch::Tensor> inputs = {x};
  std::vector<std::string> names = {"x"};
  for (const auto& item : mixer_->named_parameters()) {
    inputs.push_back(item.value());
    names.push_back(item.key());
  }
  const Result got =
      RunWithGrads([&] { return mixer_->forward(x); }, inputs, dout);
  const Result ref =
      RunWithGrads([&] { return mixer_->forward_reference(x); }, inputs, dout);
  ASSERT_EQ(got.out.sizes(), x.sizes());
  EXPECT_LT(MaxRelError(got.out, ref.out), kFp64Tolerance);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_TRUE(got.grads[i].defined() && ref.grads[i].defined()) << names[i];
    EXPECT_GT(ref.grads[i].abs().max().item<double>(), 0) << names[i];
    EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), kFp64Tolerance)
        << names[i];
  }
}

TEST_P(MixerModuleTest, ChunkedFp32MatchesFp64Reference) {
  const torch::Tensor x = torch::randn({2, 37, config_.d_model});
  const torch::Tensor y32 = mixer_->forward(x).detach();
  ASSERT_EQ(y32.scalar_type(), torch::kFloat32);
  mixer_->to(torch::kFloat64);
  const torch::Tensor y64 =
      mixer_->forward_reference(x.to(torch::kFloat64)).detach();
  EXPECT_LT(RelRmsError(y32, y64), kFp32Tolerance);
}

TEST_P(MixerModuleTest, IsCausal) {
  mixer_->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const int64_t t = 40;
  const torch::Tensor x =
      torch::randn({2, t, config_.d_model}, torch::kFloat64);
  const torch::Tensor y = mixer_->forward(x);
  for (const int64_t pos : {0, 15, 16, 20, 38}) {
    torch::Tensor x2 = x.clone();
    x2.narrow(1, pos + 1, t - pos - 1).normal_();
    const torch::Tensor y2 = mixer_->forward(x2);
    EXPECT_LT(MaxRelError(y2.narrow(1, 0, pos + 1), y.narrow(1, 0, pos + 1)),
              1e-13)
        << "pos=" << pos;
    // The later outputs do change: the check above can fail.
    EXPECT_GT(MaxRelError(y2.narrow(1, pos + 1, t - pos - 1),
                          y.narrow(1, pos + 1, t - pos - 1)),
              1e-3)
        << "pos=" << pos;
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, MixerModuleTest,
                         ::testing::ValuesIn(ModuleCases()),
                         [](const auto& param_info) {
                           return param_info.param.name;
                         });

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
