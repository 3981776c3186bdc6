// The kernels' batched helpers (model/kernels/batched_matmul.cc): the
// thread-split matmul and the unit-lower-triangular inverse against
// LibTorch's own ops, with two intra-op threads, and both kernels with two
// threads and without autograd.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

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

}  // namespace
}  // namespace hlab::model
