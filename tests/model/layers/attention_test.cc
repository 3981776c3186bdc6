// Tests of the softmax-attention mixers: RoPE, the blockwise kernel against
// plain references (fp64 to 1e-10 relative, outputs and gradients), GQA,
// sinks, windows, head-wise SWA, and the Attention module's causality and
// analysis hooks.
#include "model/layers/attention.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/config/model_config.h"
#include "model/kernels/attention_kernel.h"
#include "model/kernels/flash_attention.h"
#include "model/layers/rope.h"
#include "tests/model/model_test_util.h"

namespace hlab::model {
namespace {

using torch::Tensor;

constexpr double kFp64Tol = 1e-10;

Tensor Randn(at::IntArrayRef sizes, torch::ScalarType dtype) {
  return torch::randn(sizes, torch::TensorOptions().dtype(dtype));
}

// Inputs of one attention call, fp64.
struct Inputs {
  Tensor q, k, v, sink, grad_out;
};

Inputs MakeInputs(int64_t b, int64_t h, int64_t hkv, int64_t t, int64_t d,
                  bool with_sink, uint64_t seed = 0) {
  torch::manual_seed(seed);
  Inputs in;
  in.q = Randn({b, h, t, d}, torch::kFloat64);
  in.k = Randn({b, hkv, t, d}, torch::kFloat64);
  in.v = Randn({b, hkv, t, d}, torch::kFloat64);
  if (with_sink) in.sink = Randn({h}, torch::kFloat64);
  in.grad_out = Randn({b, h, t, d}, torch::kFloat64);
  return in;
}

// Output and gradients of an attention function; dsink undefined without a
// sink.
struct Result {
  Tensor out, dq, dk, dv, dsink;
};

using AttentionFn = std::function<Tensor(const Tensor&, const Tensor&,
                                         const Tensor&, const Tensor&)>;

// Runs fn on fresh leaves cast to `dtype` and differentiates
// sum(out * grad_out) with torch::autograd::grad.
Result RunWithGrads(const AttentionFn& fn, const Inputs& in,
                    torch::ScalarType dtype = torch::kFloat64) {
  const Tensor q = in.q.to(dtype).clone().requires_grad_();
  const Tensor k = in.k.to(dtype).clone().requires_grad_();
  const Tensor v = in.v.to(dtype).clone().requires_grad_();
  const Tensor sink =
      in.sink.defined() ? in.sink.to(dtype).clone().requires_grad_() : Tensor();
  Result r;
  r.out = fn(q, k, v, sink);
  std::vector<Tensor> leaves = {q, k, v};
  if (sink.defined()) leaves.push_back(sink);
  const std::vector<Tensor> grads = torch::autograd::grad(
      {r.out}, leaves, {in.grad_out.to(r.out.scalar_type())});
  r.dq = grads[0];
  r.dk = grads[1];
  r.dv = grads[2];
  if (sink.defined()) r.dsink = grads[3];
  return r;
}

void ExpectClose(const Result& got, const Result& want, double tol,
                 const std::string& label) {
  EXPECT_LT(RelErr(got.out, want.out), tol) << label << " out";
  EXPECT_LT(RelErr(got.dq, want.dq), tol) << label << " dq";
  EXPECT_LT(RelErr(got.dk, want.dk), tol) << label << " dk";
  EXPECT_LT(RelErr(got.dv, want.dv), tol) << label << " dv";
  ASSERT_EQ(got.dsink.defined(), want.dsink.defined()) << label;
  if (want.dsink.defined()) {
    EXPECT_LT(RelErr(got.dsink, want.dsink), tol) << label << " dsink";
  }
}

AttentionFn Blockwise(int64_t window, AttentionBlocks blocks = {}) {
  return
      [=](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& s) {
        return BlockwiseAttention(q, k, v, s, window, blocks);
      };
}

AttentionFn Naive(int64_t window) {
  return [=](const Tensor& q, const Tensor& k, const Tensor& v,
             const Tensor& s) { return NaiveAttention(q, k, v, s, window); };
}

// The definition, one head at a time: head h (KV head h / G) sees keys
// i - windows[h] < j <= i (all j <= i when windows[h] == 0); the sink is an
// extra logit column whose probability is dropped. Returns the output
// (B, H, T, D), probabilities (B, H, T, T) and sink probabilities (B, H, T).
struct Explicit {
  Tensor out, probs, p_sink;
};

Explicit ExplicitAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& sink,
                           const std::vector<int64_t>& windows) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t g = h / k.size(1);
  const Tensor i = torch::arange(t).unsqueeze(1), j = torch::arange(t);
  std::vector<Tensor> outs, probs, sinks;
  for (int64_t head = 0; head < h; ++head) {
    Tensor visible = j <= i;
    if (windows[head] > 0) visible = visible.logical_and(j > i - windows[head]);
    const Tensor qh = q.select(1, head), kh = k.select(1, head / g);
    Tensor scores = torch::matmul(qh, kh.transpose(1, 2)) / std::sqrt(1.0 * d);
    scores = scores.masked_fill(visible.logical_not(), -INFINITY);
    Tensor column = sink.defined()
                        ? sink[head].expand({b, t, 1})
                        : torch::full({b, t, 1}, -INFINITY, scores.options());
    const Tensor p = torch::softmax(torch::cat({scores, column}, -1), -1);
    probs.push_back(p.narrow(-1, 0, t));
    sinks.push_back(p.select(-1, t));
    outs.push_back(torch::matmul(probs.back(), v.select(1, head / g)));
  }
  return {torch::stack(outs, 1), torch::stack(probs, 1),
          torch::stack(sinks, 1)};
}

// ---------------------------------------------------------------- RoPE

TEST(RopeTest, MatchesRotateHalfFormula) {
  torch::manual_seed(1);
  const int64_t t = 7, d = 8;
  const double theta = 100.0;
  const Tensor x = Randn({2, 3, t, d}, torch::kFloat64);
  const Tensor got = ApplyRope(x, theta);
  Tensor want = torch::empty_like(x);
  for (int64_t pos = 0; pos < t; ++pos) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = pos * std::pow(theta, -2.0 * i / d);
      const Tensor x1 = x.select(2, pos).select(2, i);
      const Tensor x2 = x.select(2, pos).select(2, i + d / 2);
      want.select(2, pos).select(2, i).copy_(x1 * std::cos(angle) -
                                             x2 * std::sin(angle));
      want.select(2, pos)
          .select(2, i + d / 2)
          .copy_(x2 * std::cos(angle) + x1 * std::sin(angle));
    }
  }
  EXPECT_LT(RelErr(got, want), 1e-14);
  EXPECT_EQ(ApplyRope(x.to(torch::kBFloat16), theta).scalar_type(),
            torch::kBFloat16);
}

TEST(RopeTest, ScoresDependOnRelativePositionOnly) {
  torch::manual_seed(2);
  const int64_t t = 12, d = 16;
  // The same q and k vectors at every position.
  const Tensor q = Randn({1, 1, 1, d}, torch::kFloat64).expand({1, 1, t, d});
  const Tensor k = Randn({1, 1, 1, d}, torch::kFloat64).expand({1, 1, t, d});
  const Tensor scores =
      torch::matmul(ApplyRope(q, 1e4), ApplyRope(k, 1e4).transpose(-2, -1))
          .squeeze();
  EXPECT_NEAR(scores[5][2].item<double>(), scores[11][8].item<double>(), 1e-12);
  EXPECT_NEAR(scores[3][3].item<double>(), scores[0][0].item<double>(), 1e-12);
  EXPECT_GT(std::abs(scores[5][2].item<double>() - scores[5][3].item<double>()),
            1e-6);
}

// ------------------------------------------------------------- kernel

TEST(BlockwiseAttentionTest, MatchesNaiveForWindowsAndBlockSizesFp64) {
  const int64_t t = 37;  // not a multiple of any block size below
  const Inputs in = MakeInputs(2, 4, 2, t, 16, /*with_sink=*/true);
  // Both block loops: the fused one (GEMM calls and row loops, the default)
  // and the ATen one.
  std::vector<AttentionBlocks> block_sizes;
  for (bool fused : {true, false}) {
    for (const auto& [query, key] : std::vector<std::pair<int64_t, int64_t>>{
             {8, 8}, {8, 16}, {16, 8}, {5, 7}, {64, 64}}) {
      block_sizes.push_back({query, key, fused});
    }
  }
  for (int64_t window : {0, 1, 5, 8, 13, 36, 37, 50}) {
    const Result want = RunWithGrads(Naive(window), in);
    for (const AttentionBlocks& blocks : block_sizes) {
      ExpectClose(RunWithGrads(Blockwise(window, blocks), in), want, kFp64Tol,
                  "window " + std::to_string(window) + " blocks " +
                      std::to_string(blocks.query) + "/" +
                      std::to_string(blocks.key) +
                      (blocks.fused_loops ? " fused" : " aten"));
    }
  }
}

TEST(BlockwiseAttentionTest, OneQueryHeadPerKvHeadBatchOneFp64) {
  // G = 1 and B = 1: the per-row sink logits are a view with a zero stride.
  const Inputs in = MakeInputs(1, 2, 2, 21, 8, /*with_sink=*/true, 14);
  for (int64_t window : {0, 5}) {
    ExpectClose(RunWithGrads(Blockwise(window, {8, 8}), in),
                RunWithGrads(Naive(window), in), kFp64Tol,
                "G 1, B 1, window " + std::to_string(window));
  }
}

TEST(BlockwiseAttentionTest, StridedKeysAndValuesMatchContiguousFp64) {
  // The module passes k and v as transposed views of (B, T, Hkv, D); the
  // fused loops read them through their row strides.
  const Inputs in = MakeInputs(2, 4, 2, 31, 8, /*with_sink=*/true, 12);
  const AttentionFn strided = [](const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& s) {
    const Tensor ks = k.transpose(1, 2).contiguous().transpose(1, 2);
    const Tensor vs = v.transpose(1, 2).contiguous().transpose(1, 2);
    EXPECT_FALSE(ks.is_contiguous());
    return BlockwiseAttention(q, ks, vs, s, 6, {8, 16});
  };
  ExpectClose(RunWithGrads(strided, in), RunWithGrads(Naive(6), in), kFp64Tol,
              "strided k, v");
}

TEST(BlockwiseAttentionTest, MatchesNaiveWithoutSinkFp64) {
  const Inputs in = MakeInputs(2, 4, 2, 29, 8, /*with_sink=*/false, 1);
  for (int64_t window : {0, 4}) {
    const Result got = RunWithGrads(Blockwise(window, {8, 8}), in);
    EXPECT_FALSE(got.dsink.defined());
    ExpectClose(got, RunWithGrads(Naive(window), in), kFp64Tol,
                "no sink, window " + std::to_string(window));
  }
}

TEST(BlockwiseAttentionTest, ParallelWorkersMatchNaiveFp64) {
  // The block loop runs on the intra-op threads: many query blocks (one work
  // item each) and a single query block (items split over the batch).
  const int old_threads = at::get_num_threads();
  at::set_num_threads(2);
  const Inputs in = MakeInputs(3, 4, 2, 33, 8, /*with_sink=*/true, 9);
  for (const AttentionBlocks& blocks :
       {AttentionBlocks{4, 8}, AttentionBlocks{64, 16}}) {
    for (int64_t window : {0, 6}) {
      ExpectClose(RunWithGrads(Blockwise(window, blocks), in),
                  RunWithGrads(Naive(window), in), kFp64Tol,
                  "2 threads, query block " + std::to_string(blocks.query) +
                      " window " + std::to_string(window));
    }
  }
  at::set_num_threads(old_threads);
}

TEST(BlockwiseAttentionTest, GqaEqualsRepeatedKeysAndValuesFp64) {
  for (int64_t hkv : {2, 1}) {
    const Inputs in = MakeInputs(2, 4, hkv, 23, 8, /*with_sink=*/true, 2);
    const int64_t g = 4 / hkv;
    for (int64_t window : {0, 6}) {
      const AttentionFn repeated = [=](const Tensor& q, const Tensor& k,
                                       const Tensor& v, const Tensor& s) {
        return BlockwiseAttention(q, k.repeat_interleave(g, 1),
                                  v.repeat_interleave(g, 1), s, window, {8, 8});
      };
      ExpectClose(
          RunWithGrads(Blockwise(window, {8, 8}), in),
          RunWithGrads(repeated, in), kFp64Tol,
          "hkv " + std::to_string(hkv) + " window " + std::to_string(window));
    }
  }
}

TEST(BlockwiseAttentionTest, SinkEqualsExtraLogitColumnFp64) {
  const Inputs in = MakeInputs(2, 4, 2, 19, 8, /*with_sink=*/true, 3);
  const AttentionFn explicit_column = [](const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& s) {
    return ExplicitAttention(q, k, v, s, {0, 0, 0, 0}).out;
  };
  ExpectClose(RunWithGrads(Blockwise(0, {4, 8}), in),
              RunWithGrads(explicit_column, in), kFp64Tol, "sink");

  // The kernel-friendly identity: o = o_nosink * sigmoid(lse - sink).
  const Tensor o = BlockwiseAttention(in.q, in.k, in.v, in.sink, 0);
  const Tensor o_nosink = BlockwiseAttention(in.q, in.k, in.v, Tensor(), 0);
  const Tensor scores =
      torch::matmul(in.q, in.k.repeat_interleave(2, 1).transpose(-2, -1)) /
      std::sqrt(8.0);
  const Tensor lse =
      scores
          .masked_fill(torch::ones({19, 19}).triu(1).to(torch::kBool),
                       -INFINITY)
          .logsumexp(-1, /*keepdim=*/true);
  EXPECT_LT(
      RelErr(o, o_nosink * torch::sigmoid(lse - in.sink.view({1, 4, 1, 1}))),
      kFp64Tol);
  EXPECT_GT(RelErr(o, o_nosink), 1e-3);  // the sink does change the output
}

TEST(BlockwiseAttentionTest, HeadwiseWindowsEqualPerHeadMasksFp64) {
  // The module's head-wise split: windowed heads (KV group 0) and full heads
  // (KV group 1) in two kernel calls, concatenated.
  const Inputs in = MakeInputs(1, 4, 2, 21, 8, /*with_sink=*/true, 4);
  const AttentionFn split = [](const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& s) {
    return torch::cat(
        {BlockwiseAttention(q.narrow(1, 0, 2), k.narrow(1, 0, 1),
                            v.narrow(1, 0, 1), s.narrow(0, 0, 2), 5, {4, 4}),
         BlockwiseAttention(q.narrow(1, 2, 2), k.narrow(1, 1, 1),
                            v.narrow(1, 1, 1), s.narrow(0, 2, 2), 0, {4, 4})},
        1);
  };
  const AttentionFn definition = [](const Tensor& q, const Tensor& k,
                                    const Tensor& v, const Tensor& s) {
    return ExplicitAttention(q, k, v, s, {5, 5, 0, 0}).out;
  };
  ExpectClose(RunWithGrads(split, in), RunWithGrads(definition, in), kFp64Tol,
              "head-wise");
}

TEST(BlockwiseAttentionTest, Float32MatchesFp64) {
  // fp32 rounding only: measured ~2e-7; tolerance 1e-5.
  const Inputs in = MakeInputs(2, 4, 2, 45, 16, /*with_sink=*/true, 5);
  for (int64_t window : {0, 7}) {
    const Result got =
        RunWithGrads(Blockwise(window, {16, 16}), in, torch::kFloat32);
    EXPECT_EQ(got.out.scalar_type(), torch::kFloat32);
    ExpectClose(got, RunWithGrads(Naive(window), in), 1e-5,
                "fp32 window " + std::to_string(window));
  }
}

TEST(BlockwiseAttentionTest, BFloat16SmokeMatchesFp64) {
  // bf16 matmuls (8-bit mantissa), fp32 statistics: measured ~6e-3; 3e-2.
  const Inputs in = MakeInputs(2, 4, 2, 45, 16, /*with_sink=*/true, 6);
  for (int64_t window : {0, 7}) {
    const Result got =
        RunWithGrads(Blockwise(window, {16, 16}), in, torch::kBFloat16);
    EXPECT_EQ(got.out.scalar_type(), torch::kBFloat16);
    EXPECT_EQ(got.dq.scalar_type(), torch::kBFloat16);
    ExpectClose(got, RunWithGrads(Naive(window), in), 3e-2,
                "bf16 window " + std::to_string(window));
  }
}

TEST(BlockwiseAttentionTest, FusedLoopsMatchAtenLoopsAtModelShapes) {
  // The model's head shape (D = 64, G = 2) with the default blocks, T = 600
  // (several query blocks, a partial last one, windows inside and across key
  // blocks). fp32: the two loops differ only in summation order and the
  // fused loop's exp (Cephes' expf, ~2 ulp): measured <= 2e-7 between the
  // loops and <= 4e-7 against fp64; tolerance 1e-5. bf16 (oneDNN's bf16 GEMM,
  // P and dS rounded to bf16 once per block): measured <= 4.4e-3 against
  // fp64 for the output and every gradient; tolerance 3e-2, as
  // BFloat16SmokeMatchesFp64.
  const Inputs in = MakeInputs(1, 4, 2, 600, 64, /*with_sink=*/true, 13);
  for (int64_t window : {0, 128, 300}) {
    const std::string label = "window " + std::to_string(window);
    const Result want = RunWithGrads(Naive(window), in);
    const AttentionBlocks fused, aten{0, 256, false};
    ExpectClose(RunWithGrads(Blockwise(window, fused), in, torch::kFloat32),
                RunWithGrads(Blockwise(window, aten), in, torch::kFloat32),
                1e-5, "fp32 fused vs aten, " + label);
    ExpectClose(RunWithGrads(Blockwise(window, fused), in, torch::kFloat32),
                want, 1e-5, "fp32 fused vs fp64, " + label);
    const Result bf16 =
        RunWithGrads(Blockwise(window, fused), in, torch::kBFloat16);
    EXPECT_EQ(bf16.out.scalar_type(), torch::kBFloat16);
    ExpectClose(bf16, want, 3e-2, "bf16 fused vs fp64, " + label);
  }
}

TEST(BlockwiseAttentionTest, RestoresAutocastState) {
  const Inputs in = MakeInputs(1, 2, 1, 5, 4, /*with_sink=*/false, 7);
  hlab::model::SetAutocastEnabled(torch::kCPU, true);
  const Tensor o = BlockwiseAttention(in.q, in.k, in.v, Tensor(), 0);
  EXPECT_TRUE(hlab::model::AutocastEnabled(torch::kCPU));
  hlab::model::SetAutocastEnabled(torch::kCPU, false);
  EXPECT_EQ(o.scalar_type(), torch::kFloat64);  // no autocast inside
}

// The GPU form (model/kernels/flash_attention.h): the sink folded into a
// core's log-sum-exp, with FlashAttention's backward contract (D from the
// `out` it is given). The dense core has that contract on the CPU, so these
// check the fold's algebra, forward and backward, that the CUDA path uses.
AttentionFn SinkFolded(int64_t window) {
  return
      [=](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& s) {
        return SinkFoldedAttention(q, k, v, s, window, AttentionCore::kDense);
      };
}

TEST(SinkFoldedAttentionTest, DenseCoreMatchesNaiveWithAndWithoutSinkFp64) {
  const int64_t t = 19;
  for (bool with_sink : {true, false}) {
    for (const auto& [h, hkv] :
         std::vector<std::pair<int64_t, int64_t>>{{4, 2}, {3, 3}, {4, 1}}) {
      const Inputs in = MakeInputs(2, h, hkv, t, 8, with_sink, 11);
      // Window 1 without a sink has zero dq and dk, where a relative error
      // means nothing; with a sink it is the case w_i * v_i.
      for (int64_t window : {0, 1, 4, 18, 19, 40}) {
        if (window == 1 && !with_sink) continue;
        ExpectClose(RunWithGrads(SinkFolded(window), in),
                    RunWithGrads(Naive(window), in), kFp64Tol,
                    "window " + std::to_string(window) + " heads " +
                        std::to_string(h) + "/" + std::to_string(hkv) +
                        (with_sink ? " sink" : " no sink"));
      }
    }
  }
}

TEST(SinkFoldedAttentionTest, LargeSinksAndFloat32MatchNaive) {
  // Sinks that take most of a row's mass (w near 0) and none of it.
  Inputs in = MakeInputs(1, 4, 2, 9, 8, /*with_sink=*/true, 12);
  in.sink = torch::tensor({8.0, -8.0, 0.0, 3.0}, torch::kFloat64);
  ExpectClose(RunWithGrads(SinkFolded(3), in), RunWithGrads(Naive(3), in),
              kFp64Tol, "large sinks fp64");
  ExpectClose(RunWithGrads(SinkFolded(0), in, torch::kFloat32),
              RunWithGrads(Naive(0), in), 2e-5, "fp32");
}

TEST(SinkFoldedAttentionTest, OutputIsTheTransposeOfAContiguousTensor) {
  const Inputs in = MakeInputs(2, 4, 2, 6, 8, /*with_sink=*/true, 13);
  for (const Tensor& sink : {in.sink, Tensor()}) {
    const Tensor o =
        SinkFoldedAttention(in.q, in.k, in.v, sink, 0, AttentionCore::kDense);
    EXPECT_EQ(o.sizes(), in.q.sizes());
    EXPECT_TRUE(o.transpose(1, 2).is_contiguous());
  }
}

TEST(SinkFoldedAttentionTest, FlashCoreRefusesCpuTensorsWithAClearError) {
  const Inputs in = MakeInputs(1, 2, 1, 4, 8, /*with_sink=*/false, 14);
  const Tensor q = in.q.to(torch::kBFloat16), k = in.k.to(torch::kBFloat16),
               v = in.v.to(torch::kBFloat16);
  EXPECT_FALSE(FlashAttentionServes(q, k, v));
  try {
    SinkFoldedAttention(q, k, v, Tensor(), 0, AttentionCore::kFlash);
    ADD_FAILURE() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("FlashAttention cannot run"),
              std::string::npos)
        << e.what();
  }
  // BlockwiseAttention on the CPU never takes the flash path.
  ExpectClose(RunWithGrads(Blockwise(2), in),
              RunWithGrads(Blockwise(2, {0, 256, true, /*flash=*/false}), in),
              1e-300, "flash flag on the CPU");
}

TEST(AttentionProbabilitiesTest, RowsSumToOneMinusSinkAndRespectWindow) {
  const Inputs in = MakeInputs(2, 4, 2, 17, 8, /*with_sink=*/true, 8);
  const int64_t window = 4;
  const Tensor p = AttentionProbabilities(in.q, in.k, in.sink, window);
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{2, 4, 17, 17}));
  EXPECT_EQ(p.scalar_type(), torch::kFloat32);
  const Explicit want =
      ExplicitAttention(in.q, in.k, in.v, in.sink, {4, 4, 4, 4});
  EXPECT_LT(RelErr(p, want.probs), 1e-6);
  EXPECT_LT(RelErr(p.sum(-1), 1.0 - want.p_sink), 1e-6);
  EXPECT_LT(p.sum(-1).max().item<double>(), 1.0);
  const Tensor i = torch::arange(17).unsqueeze(1), j = torch::arange(17);
  const Tensor invisible = (j > i).logical_or(j <= i - window);
  EXPECT_EQ(p.masked_select(invisible).abs().max().item<double>(), 0.0);
  EXPECT_GT(p.masked_select(invisible.logical_not()).min().item<double>(), 0.0);
}

// ------------------------------------------------------------- module

ModelConfig TestConfig() {
  ModelConfig config;
  config.d_model = 32;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.head_dim = 8;
  config.ffn_hidden = 64;
  config.rope_theta = 100.0;  // fast rotation, so RoPE/NoPE differences show
  config.init_std = 0.2;      // larger weights, less uniform attention
  return config;
}

MixerSpec Spec(MixerKind kind, int64_t window = 0, bool nope = false) {
  MixerSpec spec;
  spec.kind = kind;
  spec.window = window;
  spec.nope = nope;
  if (kind == MixerKind::kHeadwiseSlidingWindow) spec.windowed_heads = 2;
  return spec;
}

std::shared_ptr<Attention> MakeAttention(const MixerSpec& spec,
                                         uint64_t seed = 0) {
  torch::manual_seed(seed);
  auto attention = std::make_shared<Attention>(TestConfig(), spec, 0);
  attention->to(torch::kFloat64);
  attention->set_blocks({4, 8});  // several blocks at the test lengths
  return attention;
}

void CopyParameters(const Attention& from, Attention& to) {
  torch::NoGradGuard no_grad;
  const auto src = from.named_parameters();
  for (auto& p : to.named_parameters()) p.value().copy_(src[p.key()]);
}

// The module computed from its weights by the per-head definition. Heads get
// RoPE where rope[h].
Explicit ExplicitModule(Attention& m, const Tensor& x,
                        const std::vector<int64_t>& windows,
                        const std::vector<bool>& rope, Tensor* y) {
  const ModelConfig config = TestConfig();
  const int64_t b = x.size(0), t = x.size(1), dh = config.head_dim;
  auto params = m.named_parameters();
  auto heads = [&](const std::string& name, int64_t n) {
    return torch::linear(x, params[name]).view({b, t, n, dh}).transpose(1, 2);
  };
  Tensor q = heads("q_proj.weight", 4), k = heads("k_proj.weight", 2);
  const Tensor v = heads("v_proj.weight", 2);
  std::vector<Tensor> qs, ks;
  for (int64_t h = 0; h < 4; ++h) {
    const Tensor qh = q.narrow(1, h, 1);
    qs.push_back(rope[h] ? ApplyRope(qh, config.rope_theta) : qh);
  }
  for (int64_t kv = 0; kv < 2; ++kv) {
    const Tensor kh = k.narrow(1, kv, 1);
    ks.push_back(rope[2 * kv] ? ApplyRope(kh, config.rope_theta) : kh);
  }
  Explicit e = ExplicitAttention(torch::cat(qs, 1), torch::cat(ks, 1), v,
                                 params["sinks"], windows);
  *y = torch::linear(e.out.transpose(1, 2).reshape({b, t, 4 * dh}),
                     params["o_proj.weight"]);
  return e;
}

TEST(AttentionTest, HasTheDocumentedParameters) {
  const auto attention = MakeAttention(Spec(MixerKind::kFull));
  const auto params = attention->named_parameters();
  ASSERT_EQ(params.size(), 5u);
  EXPECT_EQ(params["q_proj.weight"].sizes(), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(params["k_proj.weight"].sizes(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(params["v_proj.weight"].sizes(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(params["o_proj.weight"].sizes(), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(params["sinks"].sizes(), (std::vector<int64_t>{4}));
}

TEST(AttentionTest, ForwardMatchesReferenceWithGradientsFp64) {
  const std::vector<MixerSpec> specs = {
      Spec(MixerKind::kFull), Spec(MixerKind::kFull, 0, /*nope=*/true),
      Spec(MixerKind::kSlidingWindow, 5),
      Spec(MixerKind::kHeadwiseSlidingWindow, 3, /*nope=*/true)};
  for (const MixerSpec& spec : specs) {
    const auto attention = MakeAttention(spec, 1);
    torch::manual_seed(2);
    const Tensor x = Randn({2, 19, 32}, torch::kFloat64);
    const Tensor y = attention->forward(x);
    const Tensor y_ref = attention->forward_reference(x);
    EXPECT_LT(RelErr(y, y_ref), kFp64Tol) << MixerKindName(spec.kind);
    const auto params = attention->parameters();
    const Tensor w = Randn(y.sizes(), torch::kFloat64);
    const auto grads = torch::autograd::grad({(y * w).sum()}, params);
    const auto grads_ref = torch::autograd::grad({(y_ref * w).sum()}, params);
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_LT(RelErr(grads[i], grads_ref[i]), kFp64Tol)
          << MixerKindName(spec.kind) << " parameter " << i;
    }
  }
}

TEST(AttentionTest, IsCausalForEveryKind) {
  const std::vector<MixerSpec> specs = {
      Spec(MixerKind::kFull), Spec(MixerKind::kSlidingWindow, 3),
      Spec(MixerKind::kHeadwiseSlidingWindow, 3, /*nope=*/true)};
  const int64_t t = 13;
  for (const MixerSpec& spec : specs) {
    const auto attention = MakeAttention(spec, 3);
    torch::NoGradGuard no_grad;
    torch::manual_seed(4);
    const Tensor x = Randn({2, t, 32}, torch::kFloat64);
    const Tensor y = attention->forward(x);
    for (int64_t pos : {0, 5, 11}) {
      Tensor x2 = x.clone();
      x2.narrow(1, pos + 1, t - pos - 1).normal_();
      const Tensor y2 = attention->forward(x2);
      EXPECT_LT((y2.narrow(1, 0, pos + 1) - y.narrow(1, 0, pos + 1))
                    .abs()
                    .max()
                    .item<double>(),
                1e-12)
          << MixerKindName(spec.kind) << " pos " << pos;
      EXPECT_GT((y2 - y).abs().max().item<double>(), 1e-6);  // later ones do
    }
  }
}

TEST(AttentionTest, HeadwiseSlidingWindowMatchesPerHeadDefinition) {
  const int64_t window = 4;
  for (bool nope : {false, true}) {
    const auto attention =
        MakeAttention(Spec(MixerKind::kHeadwiseSlidingWindow, window, nope), 5);
    torch::NoGradGuard no_grad;
    torch::manual_seed(6);
    const Tensor x = Randn({2, 15, 32}, torch::kFloat64);
    Tensor want;
    ExplicitModule(*attention, x, {window, window, 0, 0},
                   {true, true, !nope, !nope}, &want);
    EXPECT_LT(RelErr(attention->forward(x), want), kFp64Tol) << nope;
  }
  // NoPE matters: the full heads differ from a RoPE model.
  const auto rope =
      MakeAttention(Spec(MixerKind::kHeadwiseSlidingWindow, window, false), 5);
  const auto no_rope =
      MakeAttention(Spec(MixerKind::kHeadwiseSlidingWindow, window, true), 5);
  torch::NoGradGuard no_grad;
  const Tensor x = Randn({1, 15, 32}, torch::kFloat64);
  EXPECT_GT(RelErr(rope->forward(x), no_rope->forward(x)), 1e-4);
}

TEST(AttentionTest, KeyLimitEqualsSlidingWindow) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  const Tensor x = Randn({2, 17, 32}, torch::kFloat64);
  const auto swa = MakeAttention(Spec(MixerKind::kSlidingWindow, 3), 8);
  // Full heads limited to 3 keys, and windowed heads min(5, 3) = 3.
  for (const MixerSpec& spec :
       {Spec(MixerKind::kFull), Spec(MixerKind::kHeadwiseSlidingWindow, 5)}) {
    const auto limited = MakeAttention(spec, 9);
    CopyParameters(*swa, *limited);
    limited->set_key_limit(3);
    EXPECT_LT(RelErr(limited->forward(x), swa->forward(x)), kFp64Tol)
        << MixerKindName(spec.kind);
    limited->set_key_limit(0);
    EXPECT_GT(RelErr(limited->forward(x), swa->forward(x)), 1e-4);
  }
  // A window narrower than the limit is kept: hswa(2) limited to 3 keys.
  const auto hswa = MakeAttention(Spec(MixerKind::kHeadwiseSlidingWindow, 2));
  hswa->set_key_limit(3);
  Tensor want;
  ExplicitModule(*hswa, x, {2, 2, 3, 3}, {true, true, true, true}, &want);
  EXPECT_LT(RelErr(hswa->forward(x), want), kFp64Tol);
}

TEST(AttentionTest, CapturesProbabilitiesOfTheLastCall) {
  for (const MixerSpec& spec :
       {Spec(MixerKind::kFull), Spec(MixerKind::kHeadwiseSlidingWindow, 3)}) {
    const auto attention = MakeAttention(spec, 10);
    torch::NoGradGuard no_grad;
    torch::manual_seed(11);
    const Tensor x = Randn({2, 9, 32}, torch::kFloat64);
    EXPECT_FALSE(attention->captured_probabilities().defined());
    attention->set_capture_probabilities(true);
    attention->forward(x);
    const Tensor p = attention->captured_probabilities();
    ASSERT_EQ(p.sizes(), (std::vector<int64_t>{2, 4, 9, 9}));
    EXPECT_FALSE(p.requires_grad());

    const bool hswa = spec.kind == MixerKind::kHeadwiseSlidingWindow;
    const std::vector<int64_t> windows = hswa
                                             ? std::vector<int64_t>{3, 3, 0, 0}
                                             : std::vector<int64_t>{0, 0, 0, 0};
    Tensor y;
    const Explicit want =
        ExplicitModule(*attention, x, windows, {true, true, true, true}, &y);
    EXPECT_LT(RelErr(p, want.probs), 1e-6);
    // Rows sum to 1 - p_sink, and nothing is visible above the diagonal or,
    // in the windowed heads, before the window.
    EXPECT_LT(RelErr(p.sum(-1), 1.0 - want.p_sink), 1e-6);
    EXPECT_EQ(p.triu(1).abs().max().item<double>(), 0.0);
    if (hswa) {
      EXPECT_EQ(p.narrow(1, 0, 2).tril(-3).abs().max().item<double>(), 0.0);
      EXPECT_GT(p.narrow(1, 2, 2).tril(-3).abs().max().item<double>(), 0.0);
    }
    attention->set_capture_probabilities(false);
    EXPECT_FALSE(attention->captured_probabilities().defined());
  }
}

TEST(AttentionTest, AutocastBf16RunsTheKernelInBf16) {
  const auto attention = MakeAttention(Spec(MixerKind::kFull), 12);
  attention->to(torch::kFloat32);
  torch::manual_seed(13);
  const Tensor x = Randn({2, 21, 32}, torch::kFloat32);
  const Tensor want = attention->forward(x);
  hlab::model::SetAutocastEnabled(torch::kCPU, true);
  hlab::model::SetAutocastDtype(torch::kCPU, torch::kBFloat16);
  const Tensor got = attention->forward(x);
  hlab::model::SetAutocastEnabled(torch::kCPU, false);
  at::autocast::clear_cache();
  EXPECT_EQ(got.scalar_type(), torch::kBFloat16);
  // bf16 projections and matmuls: measured ~5e-3; tolerance 3e-2.
  EXPECT_LT(RelErr(got, want), 3e-2);
  got.to(torch::kFloat32).sum().backward();
  EXPECT_TRUE(torch::isfinite(attention->named_parameters()["sinks"].grad())
                  .all()
                  .item<bool>());
}

// dK and dV sum contributions of many query blocks, one accumulator per
// worker: with 2 and 3 workers, five runs of the same fp32 and bf16
// backward give the same bits (a shared work queue gave each worker other
// blocks from run to run).
TEST(AttentionTest, GradientsAreTheSameFromRunToRun) {
  const Inputs in = MakeInputs(2, 4, 2, 700, 16, /*with_sink=*/true, 21);
  const int threads = at::get_num_threads();
  for (const int n : {2, 3}) {
    at::set_num_threads(n);
    for (const torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
      const Result first = RunWithGrads(Blockwise(0, {32, 64}), in, dtype);
      for (int run = 1; run < 5; ++run) {
        const Result again = RunWithGrads(Blockwise(0, {32, 64}), in, dtype);
        const std::string what = std::to_string(n) + " threads, " +
                                 std::string(c10::toString(dtype)) + ", run " +
                                 std::to_string(run);
        EXPECT_TRUE(torch::equal(again.out, first.out)) << what;
        EXPECT_TRUE(torch::equal(again.dq, first.dq)) << what;
        EXPECT_TRUE(torch::equal(again.dk, first.dk)) << what;
        EXPECT_TRUE(torch::equal(again.dv, first.dv)) << what;
        EXPECT_TRUE(torch::equal(again.dsink, first.dsink)) << what;
      }
    }
  }
  at::set_num_threads(threads);
}

}  // namespace
}  // namespace hlab::model
