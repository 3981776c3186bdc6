// The chunked gated-delta kernel (Gated DeltaNet) against its step-by-step
// recurrence in fp64 (outputs and gradients), the fused CPU Function against
// the composition, and the recurrence against the Householder form.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/kernels/cuda_graphs.h"
#include "model/kernels/gated_delta_fused.h"
#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

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

INSTANTIATE_TEST_SUITE_P(ChunksAndDecays, KernelFp64Test, KernelFp64Params(),
                         KernelFp64Name);

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

// S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T for one
// head, as explicit matrix products.
// The composition's scan over chunks, both forms (the CPU's direct GEMM
// calls and the explicit ATen loops other devices run), against the
// recurrence under ordinary autograd: states, V' and the gradients of u, w,
// kd and the decays, with the loss reading both outputs or only V' (the
// states' gradient then undefined).
TEST(KernelEdgeTest, ChunkScanLoopsMatchTheRecurrence) {
  torch::manual_seed(10);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const int64_t bh = 3, n = 5, c = 4, dk = 6, dv = 7;
  const torch::Tensor u = torch::randn({bh, n, c, dv}, opts).requires_grad_();
  const torch::Tensor w =
      (0.3 * torch::randn({bh, n, c, dk}, opts)).requires_grad_();
  const torch::Tensor kd =
      (0.3 * torch::randn({bh, n, c, dk}, opts)).requires_grad_();
  const torch::Tensor decay = torch::rand({bh, n}, opts).requires_grad_();
  const std::vector<torch::Tensor> inputs = {u, w, kd, decay};
  const auto recurrence = [&] {
    std::vector<torch::Tensor> states, values;
    torch::Tensor s = torch::zeros({bh, dk, dv}, opts);
    for (int64_t i = 0; i < n; ++i) {
      states.push_back(s);
      values.push_back(u.select(1, i) - torch::bmm(w.select(1, i), s));
      s = s * decay.select(1, i).view({bh, 1, 1}) +
          torch::bmm(kd.select(1, i).transpose(1, 2), values.back());
    }
    return std::make_pair(torch::stack(states, 1), torch::stack(values, 1));
  };
  for (bool both : {true, false}) {
    const auto read = [both](const std::pair<torch::Tensor, torch::Tensor>& p) {
      return both ? torch::cat({p.first.flatten(), p.second.flatten()})
                  : p.second.flatten();
    };
    const torch::Tensor dout =
        torch::randn({(both ? bh * n * dk * dv : 0) + bh * n * c * dv}, opts);
    const Result want =
        RunWithGrads([&] { return read(recurrence()); }, inputs, dout);
    for (bool direct_gemm : {true, false}) {
      const Result got = RunWithGrads(
          [&] {
            return read(
                internal::ScanGatedDeltaChunks(u, w, kd, decay, direct_gemm));
          },
          inputs, dout);
      const std::string label = std::string(direct_gemm ? "gemm" : "loops") +
                                (both ? ", both outputs" : ", V' only");
      EXPECT_LT(MaxRelError(got.out, want.out), kFp64Tolerance) << label;
      for (size_t i = 0; i < inputs.size(); ++i) {
        EXPECT_LT(MaxRelError(got.grads[i], want.grads[i]), kFp64Tolerance)
            << label << " grad " << i;
      }
    }
  }
}

// CUDA graphs (model/kernels/cuda_graphs.h) never take CPU tensors, even
// when on: the caller runs the loops itself. Keys tell layouts apart.
TEST(CudaGraphsTest, CpuInputsAreNeverCapturedAndKeysNameTheLayout) {
  SetCudaGraphs(true);
  bool ran = false;
  std::vector<torch::Tensor> out;
  const torch::Tensor x = torch::ones({2, 3});
  EXPECT_FALSE(RunCaptured(
      GraphKey("test", {x}), {x}, [] { return std::vector<torch::Tensor>{}; },
      [&](const std::vector<torch::Tensor>&, std::vector<torch::Tensor>&) {
        ran = true;
      },
      &out));
  EXPECT_FALSE(ran);
  SetCudaGraphs(false);
  EXPECT_FALSE(CudaGraphsEnabled());
  EXPECT_NE(GraphKey("k", {x}), GraphKey("k", {torch::ones({3, 2})}));
  EXPECT_NE(GraphKey("k", {x}), GraphKey("k", {x.to(torch::kFloat64)}));
  EXPECT_NE(GraphKey("k", {x, x}), GraphKey("k", {x, torch::Tensor()}));
  EXPECT_NE(GraphKey("a", {x}), GraphKey("b", {x}));
  EXPECT_EQ(GraphKey("k", {x}), GraphKey("k", {torch::zeros({2, 3})}));
}

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

}  // namespace
}  // namespace hlab::model
