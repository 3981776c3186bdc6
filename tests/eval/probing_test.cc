// Layer-wise probes (eval/probing.h) with known answers: features that
// encode the class linearly are read at ~100%, random features at chance
// (inside the Wilson interval), the split is stratified, the interval has
// its textbook values, and the NIAH pipeline gives one probe per layer of a
// model with the embeddings' probe at chance (the query token does not
// carry the value). Bad input is named.
#include "eval/probing.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/tokenizer.h"
#include "model/config/architectures.h"
#include "model/config/model_config.h"

namespace hlab::eval {
namespace {

// Two layers, SWA(8) then full attention, over the byte vocabulary.
model::ModelConfig TinyConfig() {
  model::ModelConfig c;
  c.vocab_size = 258;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 16;
  c.ffn_hidden = 64;
  c.layers = *model::ExpandArchitecture("swa:8,full", c.n_layers);
  return c;
}

// Balanced labels in a scrambled order (3 is prime to the class counts).
std::vector<int> CyclicLabels(int64_t n, int classes) {
  std::vector<int> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[static_cast<size_t>(i)] = static_cast<int>((i * 3) % classes);
  }
  return labels;
}

torch::Tensor OneHot(const std::vector<int>& labels, int classes) {
  torch::Tensor y = torch::zeros({static_cast<int64_t>(labels.size()), classes},
                                 torch::kFloat64);
  for (size_t i = 0; i < labels.size(); ++i) {
    y[static_cast<int64_t>(i)][labels[i]] = 1.0;
  }
  return y;
}

TEST(ProbeSplitTest, TakesTheSameFractionOfEveryClass) {
  const std::vector<int> labels = CyclicLabels(400, 8);
  const std::vector<bool> test = ProbeSplit(labels, 8, 0.25);
  std::vector<int> tests(8, 0), all(8, 0);
  for (size_t i = 0; i < labels.size(); ++i) {
    ++all[static_cast<size_t>(labels[i])];
    if (test[i]) ++tests[static_cast<size_t>(labels[i])];
  }
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(tests[static_cast<size_t>(c)],
              all[static_cast<size_t>(c)] / 4)  // floor(count * f)
        << c;
  }
  // Of one class's samples the 4th, 8th, ... are test.
  const std::vector<bool> one = ProbeSplit({0, 0, 0, 0, 0, 0, 0, 0}, 1, 0.25);
  EXPECT_EQ(one, std::vector<bool>(
                     {false, false, false, true, false, false, false, true}));
}

TEST(WilsonIntervalTest, HasItsTextbookValues) {
  auto [lo, hi] = WilsonInterval(5, 10);
  EXPECT_NEAR(lo, 0.2366, 1e-4);
  EXPECT_NEAR(hi, 0.7634, 1e-4);
  std::tie(lo, hi) = WilsonInterval(0, 10);
  EXPECT_EQ(lo, 0);
  EXPECT_NEAR(hi, 0.2775, 1e-4);
  std::tie(lo, hi) = WilsonInterval(10, 10);
  EXPECT_NEAR(lo, 0.7225, 1e-4);
  EXPECT_NEAR(hi, 1, 1e-12);
}

TEST(FitLinearProbeTest, ALinearCodeOfTheClassIsReadAtAboutOne) {
  torch::manual_seed(11);
  const std::vector<int> labels = CyclicLabels(400, 8);
  const torch::Tensor code = torch::randn({8, 24}, torch::kFloat64);
  // Each class's direction, plus noise at a third of its size, plus a large
  // constant offset and scale that z-scoring removes.
  const torch::Tensor x =
      100 + 50 * (OneHot(labels, 8).matmul(code) +
                  0.3 * torch::randn({400, 24}, torch::kFloat64));
  auto fit = FitLinearProbe(x.to(torch::kFloat32), labels, 8);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->test, 8 * 12);  // floor(50 * 0.25) of each class's 50
  EXPECT_EQ(fit->train, 8 * 38);
  EXPECT_GE(fit->accuracy, 0.97);
  EXPECT_GE(fit->train_accuracy, 0.99);
  EXPECT_GT(fit->lo, 0.9);
  EXPECT_LE(fit->accuracy, fit->hi);
}

TEST(FitLinearProbeTest, RandomFeaturesAreAtChanceInsideTheirInterval) {
  const std::vector<int> labels = CyclicLabels(400, 8);
  double mean = 0;
  int inside = 0;
  for (int seed = 0; seed < 10; ++seed) {
    torch::manual_seed(100 + seed);
    const torch::Tensor x = torch::randn({400, 24}, torch::kFloat64);
    auto fit = FitLinearProbe(x, labels, 8);
    ASSERT_TRUE(fit.ok()) << fit.status();
    mean += fit->accuracy / 10;
    if (fit->lo <= 0.125 && 0.125 <= fit->hi) ++inside;
    if (seed == 0) {
      EXPECT_LE(fit->lo, 0.125);
      EXPECT_GE(fit->hi, 0.125);
    }
  }
  EXPECT_NEAR(mean, 0.125, 0.04);
  EXPECT_GE(inside, 8);  // a 95% interval: ~9.5 of 10
}

TEST(FitLinearProbeTest, BadInputIsNamed) {
  const std::vector<int> labels = CyclicLabels(40, 4);
  const torch::Tensor x = torch::randn({40, 3});
  auto message = [&](const std::vector<int>& l, const torch::Tensor& f,
                     int classes, ProbeOptions o) {
    auto fit = FitLinearProbe(f, l, classes, o);
    EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(fit.status().message());
  };
  std::vector<int> out_of_range = labels;
  out_of_range[7] = 4;
  EXPECT_NE(message(out_of_range, x, 4, {}).find("labels[7] = 4"),
            std::string::npos);
  EXPECT_NE(message(labels, x, 1, {}).find("classes"), std::string::npos);
  EXPECT_NE(message(labels, torch::randn({39, 3}), 4, {}).find("n = 40"),
            std::string::npos);
  ProbeOptions all_test;
  all_test.test_fraction = 1;
  EXPECT_NE(message(labels, x, 4, all_test).find("test_fraction"),
            std::string::npos);
  ProbeOptions negative;
  negative.l2 = -1;
  EXPECT_NE(message(labels, x, 4, negative).find("l2"), std::string::npos);
  EXPECT_NE(message({0, 1}, torch::randn({2, 3}), 2, {}).find("more samples"),
            std::string::npos);
}

TEST(ProbeNiahLayersTest, GivesOneProbePerLayerWithTheEmbeddingsAtChance) {
  torch::manual_seed(5);
  model::HybridLM model(TinyConfig());
  const auto tokenizer = data::MakeByteTokenizer();
  ProbingConfig config;
  config.context_length = 48;
  config.samples = 160;
  config.classes = 8;
  int64_t last_done = 0, total = 0;
  auto result =
      ProbeNiahLayers(model, *tokenizer, config, [&](int64_t done, int64_t n) {
        EXPECT_GT(done, last_done);
        last_done = done;
        total = n;
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(last_done, 160);
  EXPECT_EQ(total, 160);
  EXPECT_EQ(result->samples, 160);
  EXPECT_GT(result->skipped, 0);  // values 8 and 9 were drawn too
  EXPECT_LT(result->skipped, 120);
  EXPECT_DOUBLE_EQ(result->chance, 0.125);
  ASSERT_EQ(result->layers.size(), 3u);  // embeddings and two blocks
  EXPECT_EQ(result->layers[0].mixer, "embedding");
  EXPECT_EQ(result->layers[0].layer, 0);
  EXPECT_EQ(result->layers[2].layer, 2);
  for (const ProbeLayer& l : result->layers) {
    EXPECT_EQ(l.fit.test + l.fit.train, 160) << l.layer;
    EXPECT_NEAR(l.fit.test, 40, 8) << l.layer;
    EXPECT_LE(l.fit.lo, l.fit.accuracy);
    EXPECT_LE(l.fit.accuracy, l.fit.hi);
    EXPECT_GE(result->peak_accuracy, l.fit.accuracy);
  }
  // The query token is the key letter: its embedding says nothing of the
  // value.
  EXPECT_LE(result->layers[0].fit.lo, 0.125);
  EXPECT_GE(result->layers[0].fit.hi, 0.125);
  EXPECT_EQ(
      result->layers[static_cast<size_t>(result->peak_layer)].fit.accuracy,
      result->peak_accuracy);

  // The same again: deterministic.
  auto again = ProbeNiahLayers(model, *tokenizer, config);
  ASSERT_TRUE(again.ok());
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(again->layers[k].fit.correct, result->layers[k].fit.correct);
  }
}

TEST(ProbeNiahLayersTest, BadInputIsNamed) {
  model::HybridLM model(TinyConfig());
  const auto tokenizer = data::MakeByteTokenizer();
  auto message = [&](const ProbingConfig& c) {
    auto r = ProbeNiahLayers(model, *tokenizer, c);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  ProbingConfig c;
  c.context_length = 4;
  EXPECT_NE(message(c).find("context_length: 4 tokens cannot hold"),
            std::string::npos)
      << message(c);
  c.context_length = 48;
  c.classes = 11;
  EXPECT_NE(message(c).find("classes: must be in [2, 10]"), std::string::npos);
  c.classes = 8;
  c.samples = 10;
  EXPECT_NE(message(c).find("samples: must be at least 2 per class"),
            std::string::npos);
  c.samples = 64;
  c.depths = {0.5, 1.5};
  EXPECT_NE(message(c).find("depths[1]"), std::string::npos);
}

}  // namespace
}  // namespace hlab::eval
