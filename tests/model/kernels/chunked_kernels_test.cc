// What both chunked kernels (scalar GLA, gated delta) share: short and
// exact lengths, fp32 against the fp64 recurrence, the bf16 autocast rule
// (only the products are rounded), the input dtype returned.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

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
      still_enabled = hlab::model::AutocastEnabled(torch::kCPU);
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

}  // namespace
}  // namespace hlab::model
