// Gradient profiles (eval/gradient_profile.h) with known answers: a model of
// SWA(w) layers only cannot feel a token beyond L (w - 1) back, so G is
// exactly 0 there; a hand-set copy model peaks at the distance of the token
// it copies; full attention feels every distance; bad input is named.
#include "eval/gradient_profile.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/config/architectures.h"
#include "model/config/model_config.h"

namespace hlab::eval {
namespace {

model::ModelConfig Config(const std::string& pattern) {
  model::ModelConfig c;
  c.vocab_size = 64;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.ffn_hidden = 64;
  c.init_std = 0.2;  // strong enough that far gradients are not tiny
  c.layers = *model::ExpandArchitecture(pattern, c.n_layers);
  return c;
}

constexpr int32_t kMarker = 63;  // the copy model's marker token

std::vector<std::vector<int32_t>> Sequences(int64_t count, int64_t tokens) {
  torch::manual_seed(3);
  const torch::Tensor t = torch::randint(0, 64, {count, tokens}, torch::kInt32);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    out[static_cast<size_t>(i)].assign(t[i].data_ptr<int32_t>(),
                                       t[i].data_ptr<int32_t>() + tokens);
  }
  return out;
}

TEST(GradientProfileTest, SlidingWindowsAloneFeelNothingBeyondTheirReach) {
  torch::manual_seed(1);
  model::HybridLM swa(Config("swa:4"));     // two SWA(4) layers: reach 6
  const auto sequences = Sequences(5, 33);  // T = 32
  auto g = ProfileGradients(swa, sequences, /*batch_sequences=*/2);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->distances.size(), 32u);
  EXPECT_EQ(g->sequences, 5);
  for (int64_t d = 0; d < 32; ++d) {
    if (d <= 6) {
      EXPECT_GT(g->distances[static_cast<size_t>(d)], 0) << d;
    } else {
      EXPECT_EQ(g->distances[static_cast<size_t>(d)], 0) << d;
    }
  }
  EXPECT_EQ(g->baseline, 0);
  // Bins [0,1) [1,2) [2,4) [4,8) [8,16) [16,32): the signal ends in [4, 8).
  ASSERT_EQ(g->bins.size(), 6u);
  EXPECT_EQ(g->bins[3].from, 4);
  EXPECT_EQ(g->bins[3].to, 8);
  EXPECT_EQ(g->reach, 8);
}

// A hand-set copy model: one NoPE full-attention layer whose only query
// dimension reads the embeddings' constant dimension and whose only key
// dimension reads a marker flag, so every position attends (softmax
// weight ~1) to the marker token; its value path is amplified and the FFN
// silenced. The target logit then depends on the marker's embedding far
// more than on any other token's but the last (the residual stream), so
// G(d) peaks at the distance where the marker is planted.
model::HybridLM CopyModel() {
  model::ModelConfig c;
  c.vocab_size = 64;
  c.d_model = 32;
  c.n_layers = 1;
  c.n_heads = 1;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.ffn_hidden = 64;
  c.init_std = 0.2;
  c.layers = *model::ExpandArchitecture("full:nope", 1);
  torch::manual_seed(11);
  model::HybridLM m(c);
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> p;
  for (const auto& item : m->named_parameters()) p[item.key()] = item.value();
  auto at = [&](const std::string& name) {
    EXPECT_EQ(p.count(name), 1u) << "no parameter " << name;
    return p.count(name) ? p[name] : torch::zeros({1});
  };
  torch::Tensor e = at("embedding.weight");  // (V, d)
  e.normal_(0.0, 0.5);
  e.select(1, 0).fill_(1.0);  // the constant dimension
  e.select(1, 1).zero_();
  e[kMarker][1] = 1.0;  // the marker flag
  at("layers.0.mixer.q_proj.weight").zero_()[0][0] = 5.0;
  at("layers.0.mixer.k_proj.weight").zero_()[0][1] = 5.0;
  at("layers.0.mixer.o_proj.weight").mul_(20.0);
  at("layers.0.mixer.sinks").fill_(-30.0);
  at("layers.0.ffn.down_proj.weight").zero_();
  return m;
}

TEST(GradientProfileTest, ACopyModelPeaksAtThePlantedDistance) {
  model::HybridLM copy = CopyModel();
  for (const int64_t planted : {3, 11, 26}) {
    // T = 32 tokens from [0, kMarker), the marker `planted` back from the
    // last position (T - 1).
    std::vector<std::vector<int32_t>> sequences = Sequences(6, 33);
    for (auto& s : sequences) {
      for (int32_t& token : s) token %= kMarker;
      s[static_cast<size_t>(31 - planted)] = kMarker;
    }
    auto g = ProfileGradients(copy, sequences, /*batch_sequences=*/3);
    ASSERT_TRUE(g.ok()) << g.status();
    const auto& d = g->distances;
    const auto peak = std::max_element(d.begin(), d.end()) - d.begin();
    EXPECT_EQ(peak, planted);
    // Every other distance but the last token's own is far below it.
    for (int64_t i = 1; i < 32; ++i) {
      if (i == planted) continue;
      EXPECT_LT(d[static_cast<size_t>(i)],
                0.01 * d[static_cast<size_t>(planted)])
          << "distance " << i << ", marker at " << planted;
    }
  }
}

TEST(GradientProfileTest, FullAttentionFeelsEveryDistance) {
  torch::manual_seed(2);
  model::HybridLM full(Config("full"));
  auto g = ProfileGradients(full, Sequences(4, 33));
  ASSERT_TRUE(g.ok()) << g.status();
  for (double v : g->distances) EXPECT_GT(v, 0);
  EXPECT_GT(g->baseline, 0);
  // The same sequences in one batch or one at a time: the same profile.
  auto one = ProfileGradients(full, Sequences(4, 33), 1);
  ASSERT_TRUE(one.ok());
  for (size_t d = 0; d < g->distances.size(); ++d) {
    EXPECT_NEAR(one->distances[d], g->distances[d], 1e-5 * g->distances[d])
        << d;
  }
}

// hlab-eval scores (in inference mode) before it profiles: tables the
// model caches on the way (RoPE's) must still serve a backward.
TEST(GradientProfileTest, WorksAfterAnInferencePassOfTheSameShape) {
  torch::manual_seed(5);
  model::ModelConfig c = Config("full");
  c.rope_theta = 1234.0;  // a table no other test made
  model::HybridLM full(c);
  {
    torch::InferenceMode inference;
    full->forward(torch::randint(0, 64, {2, 32}, torch::kInt64));
  }
  auto g = ProfileGradients(full, Sequences(2, 33));
  EXPECT_TRUE(g.ok()) << g.status();
}

TEST(GradientProfileTest, BadInputIsNamed) {
  model::HybridLM full(Config("full"));
  EXPECT_EQ(ProfileGradients(full, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      std::string(ProfileGradients(full, Sequences(2, 5)).status().message())
          .find("at least 9 tokens"),
      std::string::npos);
  auto uneven = Sequences(2, 12);
  uneven[1].pop_back();
  EXPECT_NE(std::string(ProfileGradients(full, uneven).status().message())
                .find("differ in length"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::eval
