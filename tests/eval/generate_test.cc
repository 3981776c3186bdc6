// Cached greedy generation (ModelScorer::Generate over HybridLM::prefill /
// step) against prefix re-computation (TokenScorer's default Generate,
// NextToken on the whole prefix), for every architecture of
// model/config/architectures.h and its variants, in fp64: the same token
// ids, and step logits equal to the full forward's last position.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "absl/strings/str_replace.h"
#include "eval/token_scorer.h"
#include "model/config/architectures.h"
#include "model/hybrid_lm.h"

namespace hlab::eval {
namespace {

// Prompt and generation lengths: 7 + 24 = 31 positions cross every window
// below (4, 8, 16) and the recurrent chunks (4), in the prompt and in the
// steps.
constexpr int64_t kPrompt = 7, kNew = 24, kVocab = 50;

// The paper's architectures with windows scaled to a tiny model, and the
// variants: head-wise SWA with NoPE, the short conv on GDN and Mamba-2,
// GDN's per-head q/k, the 1:3 ratio of every efficient mixer, other head
// and state sizes, and a mixed pattern.
std::vector<std::string> Architectures() {
  std::vector<std::string> names;
  for (const std::string& name : model::PaperArchitectureNames()) {
    names.push_back(absl::StrReplaceAll(
        name,
        {{"swa-128", "swa-4"}, {"swa-512", "swa-8"}, {"swa-2048", "swa-16"}}));
  }
  for (const char* variant :
       {"gdn-conv", "mamba2-conv", "gdn-mha", "gdn-nope", "lightning-1to3",
        "mamba2-1to3", "gdn-1to3", "gdn-conv-mha", "hswa:4:nope", "hswa:8:2",
        "mamba2:conv:state=8:dim=4,full", "gdn:dim=12,swa:8",
        "gdn:conv,mamba2:conv,lightning,full:nope"}) {
    names.push_back(variant);
  }
  return names;
}

model::ModelConfig TinyConfig(const std::string& arch) {
  model::ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = 32;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.ffn_hidden = 48;
  c.init_std = 0.2;  // sharper logits: the greedy tokens vary
  c.arch = arch;
  auto layers = model::ExpandArchitecture(arch, c.n_layers);
  EXPECT_TRUE(layers.ok()) << layers.status();
  c.layers = *layers;
  for (model::MixerSpec& spec : c.layers) {
    if (spec.kind == model::MixerKind::kMamba2 && spec.ssm_head_dim == 64) {
      spec.ssm_head_dim = 8;  // the default 64 is wider than d_model
    }
    if (spec.kind == model::MixerKind::kMamba2 ||
        spec.kind == model::MixerKind::kLightning ||
        spec.kind == model::MixerKind::kGatedDeltaNet) {
      spec.chunk = 4;
    }
  }
  return c;
}

model::HybridLM Fp64Model(const std::string& arch) {
  model::HybridLM lm(TinyConfig(arch));
  lm->to(torch::kFloat64);
  lm->eval();
  return lm;
}

GenerateOptions Options(int64_t max_new_tokens,
                        std::vector<int32_t> stop_tokens = {}) {
  GenerateOptions options;
  options.max_new_tokens = max_new_tokens;
  options.stop_tokens = std::move(stop_tokens);
  return options;
}

std::vector<int32_t> RandomTokens(int64_t n) {
  const torch::Tensor t = torch::randint(0, kVocab, {n}, torch::kInt32);
  return std::vector<int32_t>(t.data_ptr<int32_t>(), t.data_ptr<int32_t>() + n);
}

TEST(GenerateTest, CachedTokensEqualPrefixRecomputationForEveryArchitecture) {
  for (const std::string& arch : Architectures()) {
    torch::manual_seed(7);
    ModelScorer scorer(Fp64Model(arch));
    const std::vector<int32_t> prompt = RandomTokens(kPrompt);
    const GenerateOptions options = Options(kNew);
    absl::StatusOr<std::vector<int32_t>> cached =
        scorer.Generate(prompt, options);
    absl::StatusOr<std::vector<int32_t>> recomputed =
        scorer.TokenScorer::Generate(prompt, options);
    ASSERT_TRUE(cached.ok()) << arch << ": " << cached.status();
    ASSERT_TRUE(recomputed.ok()) << arch << ": " << recomputed.status();
    ASSERT_EQ(cached->size(), static_cast<size_t>(kNew)) << arch;
    EXPECT_EQ(*cached, *recomputed) << arch;
  }
}

// Teacher-forced random continuations of two rows. The prefill is forward,
// bit for bit (the same computation). Each step equals forward over the
// whole sequence at its last position up to rounding (the chunked kernels
// and the blockwise attention sum in another order than the recurrent
// scans and the cache's attention), compared in fp64 on the residual stream
// after every block (the logits are fp32, whose rounding hides fp64
// differences). Measured max |difference| over all architectures, blocks
// and steps: 2.7e-14; the fp32 logits came out equal.
TEST(GenerateTest, StepsEqualTheFullForwardsLastPosition) {
  torch::InferenceMode inference;
  double worst = 0, worst_logits = 0;
  for (const std::string& arch : Architectures()) {
    torch::manual_seed(11);
    model::HybridLM lm = Fp64Model(arch);
    std::vector<int64_t> layers(lm->num_layers());
    for (int64_t i = 0; i < lm->num_layers(); ++i) layers[i] = i;
    lm->capture_hidden_states(layers);
    const torch::Tensor tokens =
        torch::randint(0, kVocab, {2, kPrompt + kNew}, torch::kInt64);
    model::DecodeState state;
    const torch::Tensor prompt = tokens.narrow(1, 0, kPrompt);
    const torch::Tensor prefilled = lm->prefill(prompt, &state);
    const auto prefilled_hidden = lm->captured_hidden_states();
    EXPECT_TRUE(torch::equal(prefilled, lm->forward(prompt))) << arch;
    for (const auto& [layer, hidden] : lm->captured_hidden_states()) {
      EXPECT_TRUE(torch::equal(prefilled_hidden.at(layer), hidden)) << arch;
    }
    EXPECT_EQ(state.position, kPrompt);
    double arch_worst = 0;
    for (int64_t t = kPrompt; t < kPrompt + kNew; ++t) {
      const torch::Tensor stepped = lm->step(tokens.narrow(1, t, 1), &state);
      const auto stepped_hidden = lm->captured_hidden_states();
      const torch::Tensor full =
          lm->forward(tokens.narrow(1, 0, t + 1)).narrow(1, t, 1);
      ASSERT_EQ(stepped_hidden.size(), layers.size());
      for (const auto& [layer, hidden] : lm->captured_hidden_states()) {
        arch_worst = std::max(
            arch_worst, (stepped_hidden.at(layer) - hidden.narrow(1, t, 1))
                            .abs()
                            .max()
                            .item<double>());
      }
      worst_logits =
          std::max(worst_logits, (stepped - full).abs().max().item<double>());
    }
    EXPECT_LT(arch_worst, 1e-12) << arch;
    worst = std::max(worst, arch_worst);
  }
  EXPECT_LT(worst_logits, 1e-5);
  std::printf(
      "max |step - forward| over all architectures: residual stream %.3g, "
      "fp32 logits %.3g\n",
      worst, worst_logits);
}

// The analysis hook that limits full-attention heads to their last keys
// holds in decoding too: the cache keeps only the limited window.
TEST(GenerateTest, StepsHonourTheFullAttentionKeyLimit) {
  torch::InferenceMode inference;
  for (const char* arch : {"full", "hswa:8:nope"}) {
    torch::manual_seed(5);
    model::HybridLM lm = Fp64Model(arch);
    lm->set_full_attention_key_limit(5);
    lm->capture_hidden_states({lm->num_layers() - 1});
    const torch::Tensor tokens =
        torch::randint(0, kVocab, {1, kPrompt + kNew}, torch::kInt64);
    model::DecodeState state;
    lm->prefill(tokens.narrow(1, 0, kPrompt), &state);
    double worst = 0;
    for (int64_t t = kPrompt; t < kPrompt + kNew; ++t) {
      lm->step(tokens.narrow(1, t, 1), &state);
      const torch::Tensor stepped =
          lm->captured_hidden_states().begin()->second;
      lm->forward(tokens.narrow(1, 0, t + 1));
      const torch::Tensor full =
          lm->captured_hidden_states().begin()->second.narrow(1, t, 1);
      worst = std::max(worst, (stepped - full).abs().max().item<double>());
    }
    EXPECT_LT(worst, 1e-12) << arch;
    // Without the limit the same steps differ (the test can fail).
    lm->set_full_attention_key_limit(0);
    lm->forward(tokens);
    const torch::Tensor unlimited =
        lm->captured_hidden_states().begin()->second.narrow(
            1, kPrompt + kNew - 1, 1);
    lm->set_full_attention_key_limit(5);
    lm->forward(tokens);
    const torch::Tensor limited =
        lm->captured_hidden_states().begin()->second.narrow(
            1, kPrompt + kNew - 1, 1);
    EXPECT_GT((unlimited - limited).abs().max().item<double>(), 1e-6) << arch;
  }
}

TEST(GenerateTest, StopTokenEndsGenerationAfterEmittingIt) {
  torch::manual_seed(3);
  ModelScorer scorer(Fp64Model("gdn:conv,swa:4,mamba2,full"));
  const std::vector<int32_t> prompt = RandomTokens(kPrompt);
  absl::StatusOr<std::vector<int32_t>> all =
      scorer.Generate(prompt, Options(kNew));
  ASSERT_TRUE(all.ok()) << all.status();
  // The fifth token's first occurrence ends the generation.
  const int32_t stop = (*all)[4];
  const auto first = std::find(all->begin(), all->end(), stop);
  const std::vector<int32_t> want(all->begin(), first + 1);
  const GenerateOptions options = Options(kNew, {kVocab + 1, stop});
  absl::StatusOr<std::vector<int32_t>> stopped =
      scorer.Generate(prompt, options);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(*stopped, want);
  EXPECT_EQ(*stopped, *scorer.TokenScorer::Generate(prompt, options));
  // max_new_tokens still bounds it.
  EXPECT_EQ(scorer.Generate(prompt, Options(1))->size(), 1u);
}

TEST(GenerateTest, RefusesAnEmptyPromptAndNoNewTokens) {
  ModelScorer scorer(Fp64Model("full"));
  EXPECT_EQ(scorer.Generate({}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (int64_t bad : {0, -3}) {
    absl::StatusOr<std::vector<int32_t>> out =
        scorer.Generate({1, 2, 3}, Options(bad));
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("max_new_tokens"), std::string::npos);
  }
}

TEST(GenerateTest, DecodingRefusesTheReceptiveFieldHookAndAStepFirst) {
  torch::InferenceMode inference;
  model::HybridLM lm = Fp64Model("gdn");
  model::DecodeState state;
  const torch::Tensor token = torch::zeros({1, 1}, torch::kInt64);
  EXPECT_THROW(lm->step(token, &state), std::invalid_argument);
  lm->set_efficient_receptive_field(4, 2);
  EXPECT_THROW(lm->prefill(token, &state), std::invalid_argument);
}

}  // namespace
}  // namespace hlab::eval
