// The blocked LM-head loss (model/kernels/linear_cross_entropy.h) against
// the plain path it replaces at a large vocabulary: forward(inputs) and
// cross_entropy over the whole logits. Loss, dx and the head's gradient, in
// fp32 and under CPU bf16 autocast with the backward called after autocast
// is off again (the trainer's order), and the whole model's loss and
// per-token NLL on both sides of the block threshold.
#include "model/kernels/linear_cross_entropy.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/config/architectures.h"
#include "model/hybrid_lm.h"
#include "model/layers/linear.h"
#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

// The plain path: the whole logits, then mean cross-entropy ignoring -1.
torch::Tensor PlainLoss(const torch::Tensor& x, const torch::Tensor& w,
                        const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(
      LinearProduct(x, w).to(torch::kFloat32), targets,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
}

struct LossAndGrads {
  torch::Tensor loss, dx, dw;
};

// Runs `loss_fn` on fresh leaves (x, w) with autocast on the CPU as asked
// for the forward only, then backward with autocast off.
template <typename Fn>
LossAndGrads RunLoss(const torch::Tensor& x0, const torch::Tensor& w0,
                     bool bf16_autocast, Fn loss_fn) {
  const torch::Tensor x = x0.clone().requires_grad_();
  const torch::Tensor w = w0.clone().requires_grad_();
  if (bf16_autocast) SetAutocast(torch::kCPU, true, torch::kBFloat16);
  torch::Tensor loss = loss_fn(x, w);
  if (bf16_autocast) {
    SetAutocastEnabled(torch::kCPU, false);
    at::autocast::clear_cache();
  }
  loss.backward();
  return {loss.detach(), x.grad(), w.grad()};
}

// A two-layer, 32-wide model with 65,536 ids: its logits pass one block
// at a few hundred tokens while the rest of the model stays cheap.
ModelConfig LargeVocabularyConfig(const std::string& arch, bool tied) {
  ModelConfig c;
  c.vocab_size = 65536;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.ffn_hidden = 64;
  c.tie_embeddings = tied;
  c.layers = *ExpandArchitecture(arch, 2);
  return c;
}

TEST(LinearCrossEntropyTest, BlockRowsBoundTheLogitsAndAreAFunctionOfTheShape) {
  // Llama 3's vocabulary: 256 MiB / (128256 * 4 B) = 523 rows, in 64s.
  EXPECT_EQ(LinearCrossEntropyBlockRows(8192, 128256), 512);
  EXPECT_EQ(LinearCrossEntropyBlockRows(523, 128256), 0);  // one block
  EXPECT_EQ(LinearCrossEntropyBlockRows(8192, 258), 0);    // the demo's
  EXPECT_EQ(LinearCrossEntropyBlockRows(16384, 4096), 0);  // exactly 256 MiB
  EXPECT_EQ(LinearCrossEntropyBlockRows(16385, 4096), 16384);
  // A vocabulary past 256 MiB a row group: at least 64 rows.
  EXPECT_EQ(LinearCrossEntropyBlockRows(4096, int64_t{1} << 24), 64);
  EXPECT_EQ(LinearCrossEntropyBlockRows(64, int64_t{1} << 24), 0);
}

TEST(LinearCrossEntropyTest, Fp32MatchesThePlainPathToRounding) {
  TwoThreads two_threads;
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({300, 32});
  const torch::Tensor w = torch::randn({97, 32}) * 0.3;
  torch::Tensor t = torch::randint(0, 97, {300}, torch::kInt64);
  t.index_put_({torch::indexing::Slice(0, 300, 7)}, -1);  // ignored rows
  const LossAndGrads plain = RunLoss(
      x, w, false, [&](auto xx, auto ww) { return PlainLoss(xx, ww, t); });
  for (const int64_t rows : {64, 100, 299, 300, 1000}) {
    const LossAndGrads got = RunLoss(x, w, false, [&](auto xx, auto ww) {
      return LinearCrossEntropy(xx, ww, t, rows);
    });
    EXPECT_LT(MaxRelError(got.loss, plain.loss), 1e-6) << rows;
    EXPECT_LT(MaxRelError(got.dx, plain.dx), 1e-5) << rows;
    EXPECT_LT(MaxRelError(got.dw, plain.dw), 1e-5) << rows;
    EXPECT_EQ(got.dx.index({0}).abs().sum().item<float>(), 0.0f) << rows;
  }
}

// The CPU fp32 loops split the vocabulary: logits and dw in 2048-column
// calls, dx summed over groups of at least 4096 columns. At 10,000 ids (five
// column chunks, the last short; two dx groups), d 24 and blocks of 64 rows
// (the last of 8): the loss, gradients and per-row NLL against the plain
// path; the same bits on one thread and on three; a target outside the
// vocabulary refused.
TEST(LinearCrossEntropyTest,
     VocabularySplitsMatchThePlainPathOnAnyThreadCount) {
  torch::manual_seed(13);
  const int64_t n = 200, v = 10000;
  const torch::Tensor x = torch::randn({n, 24});
  const torch::Tensor w = torch::randn({v, 24}) * 0.3;
  torch::Tensor t = torch::randint(0, v, {n}, torch::kInt64);
  t.index_put_({torch::indexing::Slice(0, n, 9)}, -1);
  t.index_put_({1}, v - 1);
  t.index_put_({2}, 0);
  const auto blocked = [&](auto xx, auto ww) {
    return LinearCrossEntropy(xx, ww, t, 64);
  };
  std::vector<LossAndGrads> runs;
  std::vector<torch::Tensor> nlls;
  const int saved = at::get_num_threads();
  for (const int threads : {1, 3}) {
    at::set_num_threads(threads);
    runs.push_back(RunLoss(x, w, false, blocked));
    nlls.push_back(LinearTokenNll(x, w, t, 64));
  }
  at::set_num_threads(saved);
  EXPECT_TRUE(torch::equal(runs[0].loss, runs[1].loss));
  EXPECT_TRUE(torch::equal(runs[0].dx, runs[1].dx));
  EXPECT_TRUE(torch::equal(runs[0].dw, runs[1].dw));
  EXPECT_TRUE(torch::equal(nlls[0], nlls[1]));

  const LossAndGrads plain = RunLoss(
      x, w, false, [&](auto xx, auto ww) { return PlainLoss(xx, ww, t); });
  EXPECT_LT(MaxRelError(runs[0].loss, plain.loss), 1e-6);
  EXPECT_LT(MaxRelError(runs[0].dx, plain.dx), 1e-5);
  EXPECT_LT(MaxRelError(runs[0].dw, plain.dw), 1e-5);
  EXPECT_EQ(runs[0].dx.index({0}).abs().sum().item<float>(), 0.0f);
  torch::Tensor plain_nll = -torch::log_softmax(LinearProduct(x, w), -1)
                                 .gather(-1, t.clamp_min(0).unsqueeze(-1))
                                 .squeeze(-1);
  plain_nll.masked_fill_(t.eq(-1), 0);
  EXPECT_LT(MaxRelError(nlls[0], plain_nll), 1e-6);
  EXPECT_EQ(nlls[0].index({0}).item<float>(), 0.0f);

  torch::Tensor bad = t.clone();
  bad.index_put_({5}, v);
  EXPECT_THROW(LinearTokenNll(x, w, bad, 64), c10::Error);
  EXPECT_THROW(LinearCrossEntropy(x, w, bad, 64), c10::Error);
}

// One block is the plain path's ops exactly, so under bf16 autocast the
// results are bitwise the plain path's, which they are only if the
// gradients come from the products autocast made (autocast is off by the
// backward); in blocks, within bf16 rounding.
TEST(LinearCrossEntropyTest, Bf16AutocastGradientsAreTheAutocastProducts) {
  TwoThreads two_threads;
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({256, 64});
  const torch::Tensor w = torch::randn({211, 64}) * 0.2;
  const torch::Tensor t = torch::randint(0, 211, {256}, torch::kInt64);
  const LossAndGrads plain = RunLoss(
      x, w, true, [&](auto xx, auto ww) { return PlainLoss(xx, ww, t); });
  const LossAndGrads one = RunLoss(x, w, true, [&](auto xx, auto ww) {
    return LinearCrossEntropy(xx, ww, t, 256);
  });
  EXPECT_TRUE(torch::equal(one.loss, plain.loss));
  EXPECT_TRUE(torch::equal(one.dx, plain.dx));
  EXPECT_TRUE(torch::equal(one.dw, plain.dw));
  EXPECT_FALSE(AutocastEnabled(torch::kCPU));  // put back as it was
  const LossAndGrads blocks = RunLoss(x, w, true, [&](auto xx, auto ww) {
    return LinearCrossEntropy(xx, ww, t, 64);
  });
  EXPECT_LT(MaxRelError(blocks.loss, plain.loss), 1e-5);
  EXPECT_LT(MaxRelError(blocks.dx, plain.dx), 1e-2);
  EXPECT_LT(MaxRelError(blocks.dw, plain.dw), 1e-2);
}

// The model at a vocabulary whose logits pass one block (2 x 544 tokens x
// 65536 ids x 4 B = 285 MB: blocks of 1024 and 64 rows): loss, every
// parameter's gradient and the per-token NLL against the plain path; below the
// threshold token_nll is bitwise the log-softmax of forward.
TEST(LinearCrossEntropyTest, TheModelsLossAndNllMatchThePlainPath) {
  TwoThreads two_threads;
  for (const bool tied : {true, false}) {
    const ModelConfig c = LargeVocabularyConfig("swa-16", tied);
    torch::manual_seed(11);
    HybridLM model(c);
    const torch::Tensor tokens =
        torch::randint(0, 65536, {2, 545}, torch::kInt64);
    const torch::Tensor in = tokens.narrow(1, 0, 544);
    const torch::Tensor out = tokens.narrow(1, 1, 544);
    ASSERT_GT(LinearCrossEntropyBlockRows(in.numel(), c.vocab_size), 0);

    const std::vector<torch::Tensor> params = model->parameters();
    const torch::Tensor logits = model->forward(in);
    const torch::Tensor plain = torch::nn::functional::cross_entropy(
        logits.reshape({-1, c.vocab_size}), out.reshape({-1}));
    const std::vector<torch::Tensor> plain_grads =
        torch::autograd::grad({plain}, params);
    const torch::Tensor blocked = model->loss(in, out);
    const std::vector<torch::Tensor> grads =
        torch::autograd::grad({blocked}, params);
    EXPECT_LT(MaxRelError(blocked, plain), 1e-6) << tied;
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_LT(MaxRelError(grads[i], plain_grads[i]), 1e-4)
          << model->named_parameters().keys()[i] << " tied " << tied;
    }
    const torch::Tensor plain_nll = -torch::log_softmax(logits.detach(), -1)
                                         .gather(-1, out.unsqueeze(-1))
                                         .squeeze(-1);
    EXPECT_LT(MaxRelError(model->token_nll(in, out), plain_nll), 1e-6);
    // One block: bitwise.
    const torch::Tensor short_in = in.narrow(1, 0, 64);
    const torch::Tensor short_out = out.narrow(1, 0, 64);
    ASSERT_EQ(LinearCrossEntropyBlockRows(short_in.numel(), c.vocab_size), 0);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(model->token_nll(short_in, short_out),
                             -torch::log_softmax(model->forward(short_in), -1)
                                  .gather(-1, short_out.unsqueeze(-1))
                                  .squeeze(-1)));
  }
}

// Greedy generation's prefill of the last position, and last_logits (the
// blocks' forward, for NextToken): bitwise the whole prefill's and
// forward's last row where the logits fit in one block; past it (1 x 1100
// tokens x 65536 ids x 4 B = 288 MB) the head runs over that position alone,
// equal to rounding, and the decoding state is the same.
TEST(LinearCrossEntropyTest, PrefillOfTheLastPositionMatchesTheWholePrefill) {
  TwoThreads two_threads;
  const ModelConfig c = LargeVocabularyConfig("gdn", /*tied=*/true);
  torch::manual_seed(19);
  HybridLM model(c);
  model->eval();
  torch::InferenceMode inference;
  for (const int64_t t : {int64_t{40}, int64_t{1100}}) {
    const torch::Tensor prompt =
        torch::randint(0, c.vocab_size, {1, t}, torch::kInt64);
    DecodeState whole_state, last_state;
    const torch::Tensor whole = model->prefill(prompt, &whole_state);
    const torch::Tensor last =
        model->prefill(prompt, &last_state, /*last_only=*/true);
    ASSERT_EQ(last.sizes(), (std::vector<int64_t>{1, 1, c.vocab_size}));
    const torch::Tensor want = whole.narrow(1, t - 1, 1);
    // last_logits: the same from the blocks' forward (NextToken's).
    const torch::Tensor next_logits = model->last_logits(prompt);
    const torch::Tensor forward_last =
        model->forward(prompt).narrow(1, t - 1, 1);
    ASSERT_EQ(next_logits.sizes(), last.sizes());
    if (LinearCrossEntropyBlockRows(t, c.vocab_size) == 0) {
      EXPECT_TRUE(torch::equal(last, want)) << t;
      EXPECT_TRUE(torch::equal(next_logits, forward_last)) << t;
    } else {
      EXPECT_LT(MaxRelError(last, want), 1e-5) << t;
      EXPECT_LT(MaxRelError(next_logits, forward_last), 1e-5) << t;
    }
    const torch::Tensor next = torch::full({1, 1}, 7, torch::kInt64);
    EXPECT_TRUE(torch::equal(model->step(next, &last_state),
                             model->step(next, &whole_state)))
        << t;
  }
}

}  // namespace
}  // namespace hlab::model
