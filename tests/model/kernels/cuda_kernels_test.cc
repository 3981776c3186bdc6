// The mixers' GPU kernels against their references, on a CUDA device:
// attention through FlashAttention with the sink folded into its log-sum-exp
// (model/kernels/flash_attention.h), against NaiveAttention in fp32 on the
// same bf16-rounded inputs, and against the blockwise ATen loops it replaces
// (their error, measured in the same test, bounds the new path's); GDN's
// scan over chunks replayed through a CUDA graph against the same loops
// launched one by one; the LM head's loss in blocks of rows (its ATen form,
// model/kernels/linear_cross_entropy.h) against the whole logits.
//
// Without a CUDA device (CI, any CPU machine) every test is skipped with the
// reason; scripts/gpu-check.sh runs them on a GPU and gathers the measured
// errors (the properties of --gtest_output=json).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/kernels/attention_kernel.h"
#include "model/kernels/cuda_graphs.h"
#include "model/kernels/flash_attention.h"
#include "model/kernels/gated_delta_fused.h"
#include "model/kernels/linear_cross_entropy.h"
#include "model/layers/linear.h"
#include "tests/cuda_test_util.h"
#include "tests/model/model_test_util.h"
#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

using torch::Tensor;

// One attention call's inputs on CUDA, already rounded to bf16 (so the fp32
// reference sees the same numbers).
struct Inputs {
  Tensor q, k, v, sink, grad_out;
};

Inputs MakeInputs(int64_t b, int64_t h, int64_t hkv, int64_t t, int64_t d,
                  uint64_t seed) {
  torch::manual_seed(seed);
  const auto bf16 =
      torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  Inputs in;
  in.q = torch::randn({b, h, t, d}, bf16);
  in.k = torch::randn({b, hkv, t, d}, bf16);
  in.v = torch::randn({b, hkv, t, d}, bf16);
  in.sink = torch::randn({h}, bf16.dtype(torch::kFloat32));
  in.grad_out = torch::randn({b, h, t, d}, bf16.dtype(torch::kFloat32));
  return in;
}

struct Result {
  Tensor out, dq, dk, dv, dsink;
};

// fn's output and the gradients of sum(out * grad_out), on leaves in
// `dtype` (the sink stays fp32).
template <typename Fn>
Result RunWithGrads(const Fn& fn, const Inputs& in, torch::ScalarType dtype) {
  const Tensor q = in.q.to(dtype).clone().requires_grad_();
  const Tensor k = in.k.to(dtype).clone().requires_grad_();
  const Tensor v = in.v.to(dtype).clone().requires_grad_();
  const Tensor sink = in.sink.clone().requires_grad_();
  Result r;
  r.out = fn(q, k, v, sink);
  const std::vector<Tensor> g = torch::autograd::grad(
      {r.out}, {q, k, v, sink}, {in.grad_out.to(r.out.scalar_type())});
  r.dq = g[0];
  r.dk = g[1];
  r.dv = g[2];
  r.dsink = g[3];
  return r;
}

// The largest relative error of the five results.
double MaxRelErr(const Result& got, const Result& want) {
  return std::max({RelErr(got.out, want.out), RelErr(got.dq, want.dq),
                   RelErr(got.dk, want.dk), RelErr(got.dv, want.dv),
                   RelErr(got.dsink, want.dsink)});
}

TEST(FlashAttentionTest, MatchesTheReferenceAsWellAsTheBlockwiseLoops) {
  HLAB_SKIP_WITHOUT_CUDA();
  // GQA (8 query heads on 2 KV heads); T not a multiple of any tile.
  const Inputs in = MakeInputs(2, 8, 2, 300, 64, 1);
  ASSERT_TRUE(FlashAttentionServes(in.q, in.k, in.v));
  for (int64_t window : {0, 1, 64, 299}) {
    const std::string label = "window " + std::to_string(window);
    const Result want = RunWithGrads(
        [&](const Tensor& q, const Tensor& k, const Tensor& v,
            const Tensor& s) { return NaiveAttention(q, k, v, s, window); },
        in, torch::kFloat32);
    const Result flash = RunWithGrads(
        [&](const Tensor& q, const Tensor& k, const Tensor& v,
            const Tensor& s) { return BlockwiseAttention(q, k, v, s, window); },
        in, torch::kBFloat16);
    const Result loops = RunWithGrads(
        [&](const Tensor& q, const Tensor& k, const Tensor& v,
            const Tensor& s) {
          return BlockwiseAttention(q, k, v, s, window,
                                    {0, 256, true, /*flash=*/false});
        },
        in, torch::kBFloat16);
    const double flash_err = MaxRelErr(flash, want);
    const double loops_err = MaxRelErr(loops, want);
    ::testing::Test::RecordProperty("flash_max_rel_err_" + label, flash_err);
    ::testing::Test::RecordProperty("loops_max_rel_err_" + label, loops_err);
    EXPECT_EQ(flash.out.scalar_type(), torch::kBFloat16) << label;
    EXPECT_TRUE(flash.out.transpose(1, 2).is_contiguous()) << label;
    // bf16 rounding of the output and the gradients' products: a few 1e-3.
    EXPECT_LT(flash_err, 2e-2) << label;
    EXPECT_LT(flash_err, std::max(2.0 * loops_err, 1e-2))
        << label << ": the blockwise loops' error is " << loops_err;
  }
}

TEST(FlashAttentionTest, Fp32InputsUnderBf16AutocastRunInBf16) {
  HLAB_SKIP_WITHOUT_CUDA();
  const Inputs in = MakeInputs(1, 4, 4, 257, 128, 2);
  const Result want = RunWithGrads(
      [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& s) {
        return NaiveAttention(q, k, v, s, 0);
      },
      in, torch::kFloat32);
  const Result got = RunWithGrads(
      [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& s) {
        SetAutocast(c10::DeviceType::CUDA, true, torch::kBFloat16);
        Tensor o = BlockwiseAttention(q, k, v, s, 0);
        SetAutocast(c10::DeviceType::CUDA, false);
        return o;
      },
      in, torch::kFloat32);
  EXPECT_EQ(got.out.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(got.dq.scalar_type(), torch::kFloat32);  // the leaves' dtype
  const double err = MaxRelErr(got, want);
  ::testing::Test::RecordProperty("max_rel_err", err);
  EXPECT_LT(err, 2e-2);
}

// GDN's scan over chunks through a CUDA graph (model/kernels/
// cuda_graphs.h) against the same loops launched one by one: the same
// kernels in the same order, so the same bits, forward and backward; a
// second call with other values checks that the inputs reach the graph.
TEST(CudaGraphsTest, GdnScanReplaysTheLoopsBitForBit) {
  HLAB_SKIP_WITHOUT_CUDA();
  const auto opts =
      torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  const int64_t bh = 4, n = 16, c = 64, dk = 32, dv = 48;
  for (uint64_t seed : {3, 4}) {
    torch::manual_seed(seed);
    const torch::Tensor u = torch::randn({bh, n, c, dv}, opts);
    const torch::Tensor w = 0.1 * torch::randn({bh, n, c, dk}, opts);
    const torch::Tensor kd = 0.1 * torch::randn({bh, n, c, dk}, opts);
    const torch::Tensor decay = torch::rand({bh, n}, opts);
    const torch::Tensor d_states = torch::randn({bh, n, dk, dv}, opts);
    const torch::Tensor d_values = torch::randn({bh, n, c, dv}, opts);
    std::vector<std::vector<Tensor>> runs;
    for (bool graphs : {false, true}) {
      SetCudaGraphs(graphs);
      std::vector<Tensor> leaves;
      for (const Tensor& x : {u, w, kd, decay}) {
        leaves.push_back(x.clone().requires_grad_());
      }
      const auto [states, values] = internal::ScanGatedDeltaChunks(
          leaves[0], leaves[1], leaves[2], leaves[3], /*direct_gemm=*/false);
      std::vector<Tensor> r =
          torch::autograd::grad({states, values}, leaves, {d_states, d_values});
      r.push_back(states.detach());
      r.push_back(values.detach());
      runs.push_back(r);
    }
    SetCudaGraphs(false);
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_TRUE(torch::equal(runs[0][i], runs[1][i]))
          << "seed " << seed << ", result " << i;
    }
  }
}

// The LM head's loss in blocks of rows on CUDA (each block ATen's
// log-softmax, its gradients taken in the forward) against the whole
// logits: loss, dx and dw in fp32, and under bf16 autocast with the backward
// after autocast is off (the trainer's order), within bf16 rounding; the
// per-row NLL too.
TEST(LinearCrossEntropyCudaTest, BlocksMatchTheWholeLogits) {
  HLAB_SKIP_WITHOUT_CUDA();
  const auto opts =
      torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
  torch::manual_seed(3);
  const int64_t n = 300, v = 5000;
  const Tensor x = torch::randn({n, 32}, opts);
  const Tensor w = torch::randn({v, 32}, opts) * 0.3;
  Tensor t = torch::randint(0, v, {n}, opts.dtype(torch::kInt64));
  t.index_put_({torch::indexing::Slice(0, n, 7)}, -1);
  for (const bool bf16 : {false, true}) {
    std::vector<std::vector<Tensor>> runs;
    for (const bool blocked : {false, true}) {
      const Tensor xx = x.clone().requires_grad_();
      const Tensor ww = w.clone().requires_grad_();
      if (bf16) SetAutocast(torch::kCUDA, true, torch::kBFloat16);
      const Tensor loss =
          blocked ? LinearCrossEntropy(xx, ww, t, 64)
                  : torch::nn::functional::cross_entropy(
                        LinearProduct(xx, ww).to(torch::kFloat32), t,
                        torch::nn::functional::CrossEntropyFuncOptions()
                            .ignore_index(-1));
      if (bf16) {
        SetAutocastEnabled(torch::kCUDA, false);
        at::autocast::clear_cache();
      }
      loss.backward();
      runs.push_back({loss.detach(), xx.grad(), ww.grad()});
    }
    const double tol = bf16 ? 1e-2 : 1e-4;
    const char* names[] = {"loss", "dx", "dw"};
    for (size_t i = 0; i < 3; ++i) {
      const double err = MaxRelError(runs[1][i], runs[0][i]);
      RecordProperty(
          std::string(bf16 ? "bf16_" : "fp32_") + names[i] + "_rel_error",
          std::to_string(err));
      EXPECT_LT(err, tol) << names[i] << (bf16 ? " bf16" : " fp32");
    }
  }
  Tensor want = -torch::log_softmax(LinearProduct(x, w).to(torch::kFloat32), -1)
                     .gather(-1, t.clamp_min(0).unsqueeze(-1))
                     .squeeze(-1);
  want.masked_fill_(t.eq(-1), 0);
  EXPECT_LT(MaxRelError(LinearTokenNll(x, w, t, 64), want), 1e-4);
}

}  // namespace
}  // namespace hlab::model
