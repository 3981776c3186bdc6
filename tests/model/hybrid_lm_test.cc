// Tests of the assembled HybridLM: parameter counts against the closed form,
// causality and reference agreement for every named architecture, and the
// analysis hooks.
#include "model/hybrid_lm.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/config/architectures.h"
#include "model/config/param_count.h"

namespace hlab::model {
namespace {

// The paper's architectures with windows scaled to a tiny model.
const std::vector<std::string>& TinyArchitectures() {
  static const std::vector<std::string> names = {
      "full",
      "swa-4",
      "swa-8",
      "swa-16",
      "lightning",
      "mamba2",
      "gdn",
      "swa-4-1to3",
      "swa-4-headwise",
      "swa-4-nope",
      "gdn-nope",
      "mamba2-1to3",
      "gdn:conv,mamba2:conv,lightning,full:nope"};
  return names;
}

ModelConfig TinyConfig(const std::string& arch) {
  ModelConfig c;
  c.vocab_size = 50;
  c.d_model = 32;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.ffn_hidden = 48;
  c.arch = arch;
  auto layers = ExpandArchitecture(arch, c.n_layers);
  EXPECT_TRUE(layers.ok()) << layers.status();
  c.layers = *layers;
  for (MixerSpec& spec : c.layers) {
    if (spec.kind == MixerKind::kMamba2) spec.ssm_head_dim = 8;
    if (spec.kind == MixerKind::kMamba2 || spec.kind == MixerKind::kLightning ||
        spec.kind == MixerKind::kGatedDeltaNet) {
      spec.chunk = 4;  // several chunks even at T = 13
    }
  }
  return c;
}

int64_t CountTensors(torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

TEST(HybridLMTest, ParameterCountsMatchTheClosedForm) {
  for (const std::string& arch : TinyArchitectures()) {
    ModelConfig c = TinyConfig(arch);
    HybridLM model(c);
    const ParamCount count = CountParameters(c);
    EXPECT_EQ(CountTensors(*model), count.total) << arch;
    for (int64_t i = 0; i < c.n_layers; ++i) {
      EXPECT_EQ(CountTensors(*model->block(i)), count.layers[i].total())
          << arch << " layer " << i;
      EXPECT_EQ(CountTensors(*model->block(i)->mixer), count.layers[i].mixer)
          << arch << " layer " << i;
    }
  }
  ModelConfig untied = TinyConfig("gdn");
  untied.tie_embeddings = false;
  HybridLM model(untied);
  EXPECT_EQ(CountTensors(*model), CountParameters(untied).total);
}

TEST(HybridLMTest, MatchedVariantsBuildWithTheirCounts) {
  for (const char* arch : {"lightning", "gdn", "mamba2"}) {
    ModelConfig c = TinyConfig(arch);
    auto matched = MatchParameters(c, 0.02);
    ASSERT_TRUE(matched.ok()) << arch << ": " << matched.status();
    HybridLM model(matched->config);
    EXPECT_EQ(CountTensors(*model), CountParameters(matched->config).total);
  }
}

TEST(HybridLMTest, EveryArchitectureIsCausal) {
  torch::manual_seed(0);
  const int64_t t = 13, cut = 6;
  for (const std::string& arch : TinyArchitectures()) {
    HybridLM model(TinyConfig(arch));
    model->to(torch::kFloat64);
    torch::NoGradGuard no_grad;
    torch::Tensor tokens = torch::randint(0, 50, {2, t}, torch::kInt64);
    torch::Tensor changed = tokens.clone();
    changed.narrow(1, cut + 1, t - cut - 1).random_(0, 50);
    torch::Tensor a = model->forward(tokens).narrow(1, 0, cut + 1);
    torch::Tensor b = model->forward(changed).narrow(1, 0, cut + 1);
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-12) << arch;
    // And the future does matter (the test can fail).
    torch::Tensor tail_a =
        model->forward(tokens).narrow(1, cut + 1, t - cut - 1);
    torch::Tensor tail_b =
        model->forward(changed).narrow(1, cut + 1, t - cut - 1);
    EXPECT_GT((tail_a - tail_b).abs().max().item<double>(), 1e-6) << arch;
  }
}

TEST(HybridLMTest, EfficientFormsAgreeWithReferenceForms) {
  torch::manual_seed(1);
  for (const std::string& arch : TinyArchitectures()) {
    HybridLM model(TinyConfig(arch));
    model->to(torch::kFloat64);
    torch::NoGradGuard no_grad;
    torch::Tensor tokens = torch::randint(0, 50, {2, 19}, torch::kInt64);
    torch::Tensor fast = model->forward(tokens);
    torch::Tensor ref = model->forward_reference(tokens);
    const double rel = ((fast - ref).norm() / ref.norm()).item<double>();
    EXPECT_LT(rel, 1e-10) << arch;
  }
}

TEST(HybridLMTest, LossIsFiniteAndNearUniformAtInit) {
  torch::manual_seed(2);
  HybridLM model(TinyConfig("gdn"));
  torch::Tensor tokens = torch::randint(0, 50, {2, 17}, torch::kInt64);
  torch::Tensor loss =
      model->loss(tokens.narrow(1, 0, 16), tokens.narrow(1, 1, 16));
  EXPECT_NEAR(loss.item<double>(), std::log(50.0), 0.2);
  loss.backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_TRUE(torch::isfinite(p.value().grad()).all().item<bool>())
        << p.key();
  }
}

// A training step's loss and every gradient are the same bits from run to
// run on 2 and 3 threads, for every mixer, with products large enough for
// both BLAS paths (model/cpu/blas.h). (They may differ between thread
// counts: attention sums one dK / dV accumulator per worker.)
TEST(HybridLMTest, StepIsTheSameFromRunToRun) {
  const int threads = at::get_num_threads();
  for (const std::string arch :
       {"full", "swa-64", "lightning", "mamba2", "gdn"}) {
    ModelConfig c = TinyConfig(arch);
    c.d_model = 128;
    c.n_layers = 2;
    c.head_dim = 32;
    c.ffn_hidden = 352;
    c.vocab_size = 256;
    auto layers = ExpandArchitecture(arch, c.n_layers);
    ASSERT_TRUE(layers.ok()) << layers.status();
    c.layers = *layers;
    torch::manual_seed(5);
    HybridLM model(c);
    const torch::Tensor tokens =
        torch::randint(0, 256, {4, 257}, torch::kInt64);
    for (const int n : {2, 3}) {
      at::set_num_threads(n);
      std::vector<std::vector<torch::Tensor>> grads;
      std::vector<std::string> names;
      for (int run = 0; run < 4; ++run) {
        model->zero_grad();
        model->loss(tokens.narrow(1, 0, 256), tokens.narrow(1, 1, 256))
            .backward();
        grads.emplace_back();
        names.clear();
        for (const auto& p : model->named_parameters()) {
          grads.back().push_back(p.value().grad().clone());
          names.push_back(p.key());
        }
      }
      for (size_t i = 1; i < grads.size(); ++i) {
        for (size_t j = 0; j < grads[i].size(); ++j) {
          EXPECT_TRUE(torch::equal(grads[i][j], grads[0][j]))
              << arch << ", " << n << " threads, run " << i << ", " << names[j];
        }
      }
    }
    at::set_num_threads(threads);
  }
}

// The Q-gradient hook (appendix D.4): after backward, each full head's
// norm equals the norm of its q_proj rows in a separate torch::autograd::grad
// of the same loss; SWA layers are left out, and nothing before a backward.
TEST(HybridLMTest, QGradNormsEqualASeparateAutogradComputation) {
  torch::manual_seed(4);
  const ModelConfig config = TinyConfig("swa-4");  // full at layers 1 and 3
  HybridLM model(config);
  EXPECT_TRUE(model->full_attention_q_grad_norms().empty());
  const torch::Tensor tokens = torch::randint(0, 50, {2, 10}, torch::kInt64);
  const torch::Tensor inputs = tokens.narrow(1, 0, 9);
  const torch::Tensor targets = tokens.narrow(1, 1, 9);
  model->loss(inputs, targets).backward();
  const auto norms = model->full_attention_q_grad_norms();
  ASSERT_EQ(norms.size(), 2u * static_cast<size_t>(config.n_heads));

  std::vector<torch::Tensor> weights;
  for (int64_t layer : {1, 3}) {
    for (const auto& item : model->block(layer)->named_parameters()) {
      if (item.key() == "mixer.q_proj.weight") weights.push_back(item.value());
    }
  }
  ASSERT_EQ(weights.size(), 2u);
  const std::vector<torch::Tensor> grads =
      torch::autograd::grad({model->loss(inputs, targets)}, weights);
  const int64_t dh = config.head_dim;
  for (size_t i = 0; i < norms.size(); ++i) {
    const auto& n = norms[i];
    EXPECT_EQ(n.layer, i < static_cast<size_t>(config.n_heads) ? 1 : 3);
    EXPECT_EQ(n.head, static_cast<int64_t>(i) % config.n_heads);
    const torch::Tensor rows =
        grads[n.layer == 1 ? 0 : 1].narrow(0, n.head * dh, dh);
    EXPECT_NEAR(n.norm, rows.to(torch::kFloat64).norm().item<double>(),
                1e-6 * (1 + n.norm))
        << n.layer << "/" << n.head;
    EXPECT_GT(n.norm, 0);
  }
}

TEST(HybridLMTest, CapturesHiddenStatesAndAttention) {
  torch::manual_seed(3);
  HybridLM model(TinyConfig("swa-4"));
  model->capture_hidden_states({0, 3});
  model->capture_attention({1, 3});  // the full layers
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 50, {2, 9}, torch::kInt64);
  model->forward(tokens);
  ASSERT_EQ(model->captured_hidden_states().size(), 2u);
  EXPECT_EQ(model->captured_hidden_states().at(3).sizes(),
            (std::vector<int64_t>{2, 9, 32}));
  torch::Tensor probs = model->captured_attention(1);
  EXPECT_EQ(probs.sizes(), (std::vector<int64_t>{2, 4, 9, 9}));
  // Causal: nothing above the diagonal; rows sum to at most 1 (the sink).
  EXPECT_EQ(probs.triu(1).abs().max().item<double>(), 0.0);
  EXPECT_LE(probs.sum(-1).max().item<double>(), 1.0 + 1e-6);
  // Position 0 shares its row with the sink: about half.
  EXPECT_GT(probs.sum(-1).min().item<double>(), 0.3);
  HybridLM gdn(TinyConfig("gdn"));
  EXPECT_THROW(gdn->capture_attention({0}), std::invalid_argument);
  EXPECT_THROW(model->capture_hidden_states({4}), std::invalid_argument);
}

TEST(HybridLMTest, KeyLimitEqualsSlidingWindowWithTheSameWeights) {
  torch::manual_seed(4);
  ModelConfig full = TinyConfig("full");
  ModelConfig swa = full;
  for (MixerSpec& spec : swa.layers) {
    spec = MixerSpec();
    spec.kind = MixerKind::kSlidingWindow;
    spec.window = 3;
  }
  HybridLM a(full), b(swa);
  {
    torch::NoGradGuard no_grad;
    auto src = a->named_parameters();
    for (auto& p : b->named_parameters()) p.value().copy_(src[p.key()]);
  }
  a->set_full_attention_key_limit(3);
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 50, {2, 11}, torch::kInt64);
  EXPECT_LT(
      (a->forward(tokens) - b->forward(tokens)).abs().max().item<double>(),
      1e-5);
  a->set_full_attention_key_limit(0);
  EXPECT_GT(
      (a->forward(tokens) - b->forward(tokens)).abs().max().item<double>(),
      1e-4);
  // Bitwise in fp64 (appendix D.1's exact mask is the SWA kernel's).
  a->to(torch::kFloat64);
  b->to(torch::kFloat64);
  a->set_full_attention_key_limit(3);
  EXPECT_TRUE(torch::equal(a->forward(tokens), b->forward(tokens)));
}

// Appendix D.1's windows (span 3: windows of 1.5H, stride H/2, each giving
// its last H/2 outputs) equal recomputing each window from a zero state, for
// every recurrent mixer.
TEST(HybridLMTest, ReceptiveFieldWindowsEqualEachWindowFromAZeroState) {
  for (const MixerKind kind :
       {MixerKind::kGatedDeltaNet, MixerKind::kMamba2, MixerKind::kLightning}) {
    torch::manual_seed(6);
    ModelConfig c = TinyConfig("full");
    for (MixerSpec& spec : c.layers) {
      spec = MixerSpec();
      spec.kind = kind;
      spec.chunk = 4;
      if (kind == MixerKind::kMamba2) spec.ssm_head_dim = 8;
    }
    HybridLM model(c);
    model->to(torch::kFloat64);
    const int64_t s = 4, m = 3, t = 23;  // t not a multiple of s
    Block block = model->block(0);
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::randn({2, t, c.d_model}, torch::kFloat64);
    block->set_receptive_field(s, m);
    const torch::Tensor y = block->forward(x);
    block->set_receptive_field(0);
    for (int64_t k = 0; k * s < t; ++k) {
      const int64_t from = std::max<int64_t>(0, (k + 1 - m) * s);
      const int64_t to = std::min(t, (k + 1) * s);
      const int64_t first = k * s;
      const torch::Tensor alone = block->forward(x.narrow(1, from, to - from));
      EXPECT_LT((alone.narrow(1, first - from, to - first) -
                 y.narrow(1, first, to - first))
                    .abs()
                    .max()
                    .item<double>(),
                1e-12)
          << MixerKindName(kind) << " stride " << k;
    }
    EXPECT_THROW(model->set_efficient_receptive_field(4, 1),
                 std::invalid_argument);
  }
}

TEST(HybridLMTest, EfficientReceptiveFieldResetsState) {
  torch::manual_seed(5);
  ModelConfig c = TinyConfig("gdn");
  for (MixerSpec& spec : c.layers) {
    spec = MixerSpec();
    spec.kind = MixerKind::kGatedDeltaNet;
    spec.chunk = 4;
  }
  HybridLM model(c);
  model->to(torch::kFloat64);
  const int64_t w = 4, t = 17;
  Block block = model->block(0);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({1, t, 32}, torch::kFloat64);
  block->set_receptive_field(w);
  torch::Tensor y = block->forward(x);
  // Window k >= 1 covers [kw - w, (k+1)w): positions 12..15 see tokens from 8
  // on, so changing tokens 0..7 leaves them (and position 16) unchanged.
  torch::Tensor x2 = x.clone();
  x2.narrow(1, 0, 8).normal_();
  torch::Tensor y2 = block->forward(x2);
  EXPECT_LT((y - y2).narrow(1, 12, 5).abs().max().item<double>(), 1e-12);
  EXPECT_GT((y - y2).narrow(1, 8, 4).abs().max().item<double>(), 1e-8);
  // Positions 12..15 equal running the unrestricted block on tokens 8..15.
  block->set_receptive_field(0);
  torch::Tensor alone = block->forward(x.narrow(1, 8, 8));
  EXPECT_LT(
      (alone.narrow(1, 4, 4) - y.narrow(1, 12, 4)).abs().max().item<double>(),
      1e-12);
  // Unrestricted, the far past does matter.
  torch::Tensor free_y = block->forward(x), free_y2 = block->forward(x2);
  EXPECT_GT((free_y - free_y2).narrow(1, 12, 5).abs().max().item<double>(),
            1e-8);
}

TEST(HybridLMTest, InvalidConfigThrowsWithTheField) {
  ModelConfig c = TinyConfig("full");
  c.n_kv_heads = 3;
  try {
    HybridLM model(c);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("n_kv_heads"), std::string::npos);
  }
}

}  // namespace
}  // namespace hlab::model
