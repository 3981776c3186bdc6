// The chunked scalar-GLA kernel (Lightning and Mamba-2) against its
// step-by-step recurrence in fp64 (outputs and gradients), its edge cases,
// the fused CPU Function against the ATen composition, and the recurrence
// against the closed form.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/scalar_gla_fused.h"
#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

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

INSTANTIATE_TEST_SUITE_P(ChunksAndDecays, KernelFp64Test, KernelFp64Params(),
                         KernelFp64Name);

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

// The composition's scan on devices other than the CPU, in matmul form,
// against the sequential recurrence it replaces: states and the gradients
// of ds and the log-decays, with decays shared across the batch (Lightning)
// or per batch element (Mamba-2), and decays strong enough that a difference
// of prefix sums would lose them (exp(-800) is 0; the terms near the
// diagonal must still be exact).
TEST(KernelEdgeTest, MatmulFormChunkScanMatchesTheRecurrence) {
  torch::manual_seed(9);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  for (int64_t decay_batch : {1, 2}) {
    const torch::Tensor ds =
        torch::randn({2, 3, 7, 4, 5}, opts).requires_grad_();
    torch::Tensor a = -3.0 * torch::rand({decay_batch, 3, 7}, opts);
    a.select(1, 1).fill_(-800.0);  // head 1 forgets everything per chunk
    a.select(2, 2).fill_(0.0);     // no decay over chunk 2
    a.requires_grad_();
    const torch::Tensor dout = torch::randn({2, 3, 7, 4, 5}, opts);
    const std::vector<torch::Tensor> inputs = {ds, a};
    const Result want = RunWithGrads(
        [&] {
          std::vector<torch::Tensor> states;
          torch::Tensor s = torch::zeros({2, 3, 4, 5}, opts);
          for (int64_t i = 0; i < 7; ++i) {
            states.push_back(s);
            s = s * a.select(2, i).exp().view({-1, 3, 1, 1}) + ds.select(2, i);
          }
          return torch::stack(states, 2);
        },
        inputs, dout);
    const Result got = RunWithGrads(
        [&] { return internal::ScanChunkStatesAsMatmul(ds, a); }, inputs, dout);
    EXPECT_LT(MaxRelError(got.out, want.out), kFp64Tolerance);
    EXPECT_LT(MaxRelError(got.grads[0], want.grads[0]), kFp64Tolerance);
    EXPECT_LT(MaxRelError(got.grads[1], want.grads[1]), kFp64Tolerance);
    EXPECT_FALSE(torch::isnan(got.grads[1]).any().item<bool>());
  }
}

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

}  // namespace
}  // namespace hlab::model
