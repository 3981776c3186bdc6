// Tests of model configs, named architectures and closed-form parameter
// counts (no LibTorch; tests/model/hybrid_lm_test.cc checks the counts against
// the built model's tensors).
#include "model/config/model_config.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "model/config/architectures.h"
#include "model/config/param_count.h"

namespace hlab::model {
namespace {

// The anchors' configuration (shared/anchors/README.md).
ModelConfig AnchorConfig(const std::string& arch) {
  ModelConfig c;
  c.vocab_size = 256;
  c.d_model = 256;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.ffn_hidden = 704;
  c.arch = arch;
  auto layers = ExpandArchitecture(arch, c.n_layers);
  EXPECT_TRUE(layers.ok()) << layers.status();
  c.layers = *layers;
  return c;
}

TEST(ArchitecturesTest, NamedHybridsInterleaveOneToOneEndingInFull) {
  auto layers = ExpandArchitecture("swa-128", 4);
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ(LayersToPattern(*layers), "swa:128,full,swa:128,full");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("gdn", 2)), "gdn,full");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("lightning", 2)),
            "lightning,full");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("mamba2", 2)), "mamba2,full");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("full", 2)), "full,full");
}

TEST(ArchitecturesTest, VariantsOneToThreeNopeAndHeadwise) {
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("swa-128-1to3", 8)),
            "swa:128,swa:128,swa:128,full,swa:128,swa:128,swa:128,full");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("swa-128-nope", 2)),
            "swa:128,full:nope");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("gdn-1to3-nope", 4)),
            "gdn,gdn,gdn,full:nope");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("swa-128-headwise", 2)),
            "hswa:128,hswa:128");
  // Appendix B.3/B.4's short-convolution ablation, by name.
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("gdn-conv", 2)),
            "gdn:conv,full");
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("mamba2-conv-1to3", 4)),
            "mamba2:conv,mamba2:conv,mamba2:conv,full");
  // Tiny models scale windows down by name.
  EXPECT_EQ(LayersToPattern(*ExpandArchitecture("swa-16", 2)), "swa:16,full");
}

TEST(ArchitecturesTest, EveryPaperArchitectureExpands) {
  for (const std::string& name : PaperArchitectureNames()) {
    auto layers = ExpandArchitecture(name, 8);
    ASSERT_TRUE(layers.ok()) << name << ": " << layers.status();
    ModelConfig c = AnchorConfig("full");
    c.n_layers = 8;
    c.layers = *layers;
    EXPECT_TRUE(ValidateModelConfig(c).ok()) << name;
  }
}

TEST(ArchitecturesTest, CustomPatternRepeatsAndRoundTrips) {
  auto layers = ExpandArchitecture("gdn:conv,mamba2:state=8,full:nope", 6);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ(LayersToPattern(*layers),
            "gdn:conv,mamba2:state=8,full:nope,gdn:conv,mamba2:state=8,"
            "full:nope");
  EXPECT_TRUE((*layers)[0].short_conv);
  EXPECT_EQ((*layers)[1].ssm_state, 8);
  // dim= is the recurrent head dimension of either mixer: Mamba-2's P (a
  // micro model's inner width of 16 cannot hold the default 64), GDN's dk.
  auto small = ExpandArchitecture("mamba2:conv:dim=8,gdn:dim=12", 2);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)[0].ssm_head_dim, 8);
  EXPECT_EQ((*small)[0].gdn_head_dim, 0);
  EXPECT_EQ((*small)[1].gdn_head_dim, 12);
  EXPECT_EQ(LayersToPattern(*small), "mamba2:conv:dim=8,gdn:dim=12");
}

TEST(ArchitecturesTest, BadNamesNameTheProblem) {
  auto unknown = ExpandArchitecture("transformer-xl", 4);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown name"), std::string::npos);
  auto zero = ExpandArchitecture("swa-0", 4);
  EXPECT_NE(zero.status().message().find("window must be > 0"),
            std::string::npos);
  EXPECT_FALSE(ExpandArchitecture("swa-abc", 4).ok());
  EXPECT_FALSE(ExpandArchitecture("gdn", 3).ok());  // 1:1 needs even layers
  EXPECT_FALSE(ExpandArchitecture("", 4).ok());
  EXPECT_FALSE(ExpandArchitecture("swa:64,full,full", 4).ok());
  auto bad_mixer = ExpandArchitecture("rwkv:1,full", 2);
  EXPECT_NE(bad_mixer.status().message().find("unknown mixer 'rwkv'"),
            std::string::npos);
  EXPECT_FALSE(ExpandArchitecture("swa", 2).ok());  // needs a window
  EXPECT_NE(ExpandArchitecture("swa-16-conv", 2)
                .status()
                .message()
                .find("-conv applies to mamba2 and gdn only"),
            std::string::npos);
  EXPECT_FALSE(ExpandArchitecture("gdn:bogus,full", 2).ok());
  EXPECT_NE(ExpandArchitecture("full", kMaxLayers + 1)
                .status()
                .message()
                .find("n_layers: must be at most 4096"),
            std::string::npos);
}

TEST(ModelConfigTest, InvalidConfigsNameTheField) {
  struct Case {
    std::string field;
    void (*mutate)(ModelConfig*);
  };
  const Case cases[] = {
      {"n_heads", [](ModelConfig* c) { c->n_heads = 3; }},
      {"n_kv_heads", [](ModelConfig* c) { c->n_kv_heads = 3; }},
      {"d_model", [](ModelConfig* c) { c->d_model = 0; }},
      {"vocab_size", [](ModelConfig* c) { c->vocab_size = -1; }},
      {"head_dim", [](ModelConfig* c) { c->head_dim = 63; }},
      {"layers", [](ModelConfig* c) { c->layers.clear(); }},
      {"layers", [](ModelConfig* c) { c->layers.pop_back(); }},
      {"layers[0].window", [](ModelConfig* c) { c->layers[0].window = 0; }},
      {"layers[0].window", [](ModelConfig* c) { c->layers[0].window = -5; }},
      {"layers[1].window", [](ModelConfig* c) { c->layers[1].window = 8; }},
      {"layers[0].nope", [](ModelConfig* c) { c->layers[0].nope = true; }},
      {"layers[0].short_conv",
       [](ModelConfig* c) { c->layers[0].short_conv = true; }},
      {"norm_eps", [](ModelConfig* c) { c->norm_eps = 0; }},
      {"vocab_size", [](ModelConfig* c) { c->vocab_size = kMaxVocab + 1; }},
      {"d_model", [](ModelConfig* c) { c->d_model = kMaxWidth + 1; }},
      {"ffn_hidden", [](ModelConfig* c) { c->ffn_hidden = INT64_MAX; }},
      {"layers[0].window",
       [](ModelConfig* c) { c->layers[0].window = kMaxWindow + 1; }},
      {"layers[1].ffn_hidden",
       [](ModelConfig* c) { c->layers[1].ffn_hidden = kMaxWidth + 1; }},
  };
  for (const Case& tc : cases) {
    ModelConfig c = AnchorConfig("swa-128");
    ASSERT_TRUE(ValidateModelConfig(c).ok());
    tc.mutate(&c);
    absl::Status status = ValidateModelConfig(c);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << tc.field;
    EXPECT_EQ(status.message().substr(0, tc.field.size() + 1), tc.field + ":")
        << status.message();
  }
}

TEST(ModelConfigTest, HeadwiseWindowedHeadsMustAlignWithKvGroups) {
  ModelConfig c = AnchorConfig("swa-128-headwise");
  EXPECT_TRUE(ValidateModelConfig(c).ok());
  c.layers[0].windowed_heads = 1;  // group size is 2
  absl::Status status = ValidateModelConfig(c);
  EXPECT_NE(status.message().find("layers[0].windowed_heads"),
            std::string::npos);
}

TEST(ModelConfigTest, JsonRoundTripAndForms) {
  auto from_arch = ModelConfigFromJson(
      R"({"vocab_size": 256, "d_model": 64, "n_layers": 4, "n_heads": 4,
          "n_kv_heads": 2, "arch": "gdn-nope"})");
  ASSERT_TRUE(from_arch.ok()) << from_arch.status();
  EXPECT_EQ(from_arch->head_dim, 16);
  EXPECT_EQ(from_arch->ffn_hidden, DefaultFfnHidden(64));
  EXPECT_EQ(LayersToPattern(from_arch->layers), "gdn,full:nope,gdn,full:nope");

  auto again = ModelConfigFromJson(ModelConfigToJson(*from_arch));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->layers, from_arch->layers);
  EXPECT_EQ(again->ffn_hidden, from_arch->ffn_hidden);

  auto from_list = ModelConfigFromJson(
      R"({"d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 4,
          "layers": [{"mixer": "swa", "window": 8}, "full:nope"]})");
  ASSERT_TRUE(from_list.ok()) << from_list.status();
  EXPECT_EQ(LayersToPattern(from_list->layers), "swa:8,full:nope");
}

TEST(ModelConfigTest, JsonErrorsNameTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 4, "arch": "full",
           "dropout": 0.1})",
       "dropout: unknown field"},
      {R"({"d_model": "big", "n_layers": 2, "arch": "full"})",
       "d_model: must be an integer"},
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 4})", "layers:"},
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 4,
           "layers": [{"mixer": "swa", "window": 0}, "full"]})",
       "layers[0].window"},
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 4,
           "layers": [{"mixer": "lstm"}, "full"]})",
       "layers[0].mixer"},
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 4,
           "layers": [{"mixer": "gdn", "windw": 3}, "full"]})",
       "layers[0].windw: unknown field (see docs/models.md)"},
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 4, "arch": "swa-x"})",
       "arch:"},
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 5, "arch": "full"})",
       "n_heads:"},
      {"{not json", "malformed JSON"},
      // Sizes past the bounds are refused before any arithmetic or expansion
      // (a fuzzer found both: 8 * d_model overflowed int64 in the default
      // ffn_hidden, and a pattern was expanded into billions of layers).
      {R"({"d_model": 7777777777777777564, "n_layers": 8, "n_heads": 8,
           "arch": "swa-80"})",
       "d_model: must be at most 1048576, got 7777777777777777564"},
      {R"({"d_model": 64, "n_layers": 4000000000, "n_heads": 4,
           "arch": "gdn"})",
       "n_layers: must be at most 4096"},
      {R"({"d_model": 64, "n_layers": 2, "n_heads": 4,
           "layers": [{"mixer": "mamba2", "ssm_expand": 9000000000000000000},
                      "full"]})",
       "layers[0].ssm_expand: must be at most"},
  };
  for (const auto& [json, expected] : cases) {
    auto config = ModelConfigFromJson(json);
    ASSERT_FALSE(config.ok()) << json;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(expected), std::string::npos)
        << "got: " << config.status().message() << "\nexpected: " << expected;
  }
}

TEST(ParamCountTest, MatchesTheAnchorsReportedCounts) {
  // shared/anchors/results.md, column "N non-emb" (its GDN gives q and k a
  // head per value head: hlab's gdn-mha).
  EXPECT_EQ(CountParameters(AnchorConfig("full")).non_embedding, 2951440);
  EXPECT_EQ(CountParameters(AnchorConfig("swa-128")).non_embedding, 2951440);
  EXPECT_EQ(CountParameters(AnchorConfig("gdn-mha")).non_embedding, 3217816);
  // Grouped q and k (2 heads for 4 value heads) save 2 x 256 x 2 x 64 per
  // GDN layer.
  EXPECT_EQ(CountParameters(AnchorConfig("gdn")).non_embedding,
            3217816 - 2 * (2 * 256 * 2 * 64));
  EXPECT_EQ(CountParameters(AnchorConfig("mamba2")).non_embedding, 2970400);
  ParamCount full = CountParameters(AnchorConfig("full"));
  EXPECT_EQ(full.embedding, 256 * 256);
  EXPECT_EQ(full.total, 2951440 + 256 * 256);
  ASSERT_EQ(full.layers.size(), 4u);
  EXPECT_EQ(full.layers[0].mixer, 196612);
  EXPECT_EQ(full.layers[0].ffn, 3 * 256 * 704);
}

TEST(ParamCountTest, ClosedFormPerMixer) {
  ModelConfig c = AnchorConfig("lightning");
  // q 256x256 + k,v 256x128 + o 256x256 + out_norm 256 + the low-rank
  // gate 256x64 + 64x256.
  EXPECT_EQ(CountMixerParameters(c, c.layers[0]),
            65536 + 2 * 32768 + 65536 + 256 + 2 * 16384);
  c.tie_embeddings = false;
  EXPECT_EQ(CountParameters(c).embedding, 2 * 256 * 256);
  MixerSpec conv_gdn;
  conv_gdn.kind = MixerKind::kGatedDeltaNet;
  conv_gdn.short_conv = true;
  MixerSpec plain_gdn;
  plain_gdn.kind = MixerKind::kGatedDeltaNet;
  // Convolved channels: q and k (2 heads each, grouped), v (4 heads).
  EXPECT_EQ(
      CountMixerParameters(c, conv_gdn) - CountMixerParameters(c, plain_gdn),
      (2 * 2 * 64 + 4 * 64) * 4);
}

TEST(ParamCountTest, MatchingBringsEveryHybridWithinTwoPercent) {
  for (const std::string& name : PaperArchitectureNames()) {
    ModelConfig c = AnchorConfig("full");
    c.layers = *ExpandArchitecture(name, 4);
    auto report = MatchParameters(c, 0.02);
    ASSERT_TRUE(report.ok()) << name << ": " << report.status();
    EXPECT_LE(std::abs(report->relative_gap), 0.02) << name;
    EXPECT_EQ(report->target_non_embedding, 2951440);
    EXPECT_TRUE(ValidateModelConfig(report->config).ok()) << name;
  }
  // GDN: dk = dv shrinks so the mixer matches attention's 196612: grouped,
  // 256 dk (2 x 2 + 3 x 4) + dk + 2056 (a, b, A_log, dt_bias) is nearest at
  // dk = 47; with a q, k head per value head, 256 dk 5 x 4 at dk = 38.
  for (const auto& [name, dk] : std::vector<std::pair<std::string, int64_t>>{
           {"gdn", 47}, {"gdn-mha", 38}}) {
    ModelConfig gdn = AnchorConfig(name);
    auto matched = MatchParameters(gdn);
    ASSERT_TRUE(matched.ok()) << name;
    EXPECT_EQ(matched->config.layers[0].gdn_head_dim, dk) << name;
    EXPECT_LT(std::abs(matched->relative_gap), 0.005) << name;
  }
  // Unmatched GDN-mha is 9% larger: outside a 2% tolerance.
  EXPECT_GT(static_cast<double>(
                CountParameters(AnchorConfig("gdn-mha")).non_embedding) /
                2951440,
            1.09);
  // Lightning's FFN shrinks slightly.
  auto lightning = MatchParameters(AnchorConfig("lightning"));
  ASSERT_TRUE(lightning.ok());
  EXPECT_LT(lightning->config.layers[0].ffn_hidden, 704);
  EXPECT_GT(lightning->config.layers[0].ffn_hidden, 600);
}

// Appendix B at the paper grid's scales (examples/sweeps/paper.yaml: head_dim
// 64, d = 64 H): GDN's dk = dv near the paper's 46 with the FFN unchanged,
// Mamba-2 unchanged and 5-8% over a Full layer (8.4% at S5, whose 11 query
// heads per kv head make attention smaller), Lightning's FFN cut slightly
// (1-3%: its low-rank gate adds 2 d dh).
TEST(ParamCountTest, MatchedDimensionsAtThePaperScales) {
  struct Scale {
    const char* name;
    int64_t d, layers, heads, kv_heads;
    int64_t gdn_dk, lightning_ffn;
    double mamba2_layer_ratio;
  };
  const Scale scales[] = {{"S1", 512, 4, 8, 2, 45, 1365, 1.05395},
                          {"S2", 512, 8, 8, 2, 45, 1365, 1.05395},
                          {"S3", 640, 12, 10, 2, 45, 1685, 1.06353},
                          {"S4", 768, 16, 12, 2, 44, 2005, 1.07017},
                          {"S5", 1408, 24, 22, 2, 43, 3733, 1.08381}};
  for (const Scale& s : scales) {
    ModelConfig c;
    c.vocab_size = 128256;
    c.d_model = s.d;
    c.n_layers = s.layers;
    c.n_heads = s.heads;
    c.n_kv_heads = s.kv_heads;
    c.head_dim = 64;
    c.ffn_hidden = DefaultFfnHidden(s.d);
    const auto match = [&](const std::string& arch) {
      ModelConfig m = c;
      m.layers = *ExpandArchitecture(arch, c.n_layers);
      auto report = MatchParameters(m);
      EXPECT_TRUE(report.ok()) << s.name << " " << arch << report.status();
      return report.ok() ? *report : MatchReport{};
    };
    const MatchReport gdn = match("gdn");
    EXPECT_EQ(gdn.config.layers[0].gdn_head_dim, s.gdn_dk) << s.name;
    EXPECT_EQ(EffectiveFfnHidden(gdn.config, gdn.config.layers[0]),
              c.ffn_hidden)
        << s.name;
    EXPECT_EQ(GdnQkHeads(gdn.config, gdn.config.layers[0]), s.kv_heads);
    EXPECT_LT(std::abs(gdn.relative_gap), 0.002) << s.name;

    const MatchReport lightning = match("lightning");
    EXPECT_EQ(lightning.config.layers[0].ffn_hidden, s.lightning_ffn) << s.name;

    const MatchReport mamba2 = match("mamba2");
    EXPECT_EQ(mamba2.config.layers[0].ffn_hidden, 0) << s.name;  // unchanged
    const ParamCount full = CountParameters(FullBackbone(mamba2.config));
    const ParamCount m2 = CountParameters(mamba2.config);
    EXPECT_NEAR(static_cast<double>(m2.layers[0].total()) /
                    static_cast<double>(full.layers[0].total()),
                s.mamba2_layer_ratio, 1e-5)
        << s.name;
    EXPECT_EQ(mamba2.exempt_excess, m2.non_embedding - full.non_embedding);
    EXPECT_GT(mamba2.relative_gap, 0.015) << s.name;  // reported, not matched
  }
}

TEST(ParamCountTest, FlopsPerTokenMatchesTheAnchorsFormula) {
  // Anchors: full at T=1024 is 30.68 MFLOP/token.
  EXPECT_NEAR(TrainingFlopsPerToken(AnchorConfig("full"), 1024) / 1e6, 30.68,
              0.01);
  // SWA counts only its window: 25.2M at T=1024.
  EXPECT_NEAR(TrainingFlopsPerToken(AnchorConfig("swa-128"), 1024) / 1e6, 25.2,
              0.05);
  // The anchors ran GDN (q, k with a head per value head) with chunk 64
  // (hlab's default is 16).
  ModelConfig gdn = AnchorConfig("gdn-mha");
  for (MixerSpec& spec : gdn.layers) {
    if (spec.kind == MixerKind::kGatedDeltaNet) spec.chunk = 64;
  }
  EXPECT_NEAR(TrainingFlopsPerToken(gdn, 8192) / 1e6, 71.4, 0.1);
  EXPECT_NEAR(TrainingFlopsPerToken(AnchorConfig("mamba2"), 8192) / 1e6, 68.9,
              0.1);
}

// GDN's unset chunk is 16 on the CPU and 64 on a GPU; a set chunk and the
// scalar-GLA kinds' 64 are the same on both.
TEST(ModelConfigTest, EffectiveChunkDependsOnTheDeviceOnlyForAnUnsetGdnChunk) {
  auto gdn = ParseLayerSpec("gdn");
  auto lightning = ParseLayerSpec("lightning");
  ASSERT_TRUE(gdn.ok() && lightning.ok());
  EXPECT_EQ(EffectiveChunk(*gdn), 16);
  EXPECT_EQ(EffectiveChunk(*gdn, /*on_gpu=*/true), 64);
  EXPECT_EQ(EffectiveChunk(*lightning), 64);
  EXPECT_EQ(EffectiveChunk(*lightning, /*on_gpu=*/true), 64);
  gdn->chunk = 32;
  EXPECT_EQ(EffectiveChunk(*gdn), 32);
  EXPECT_EQ(EffectiveChunk(*gdn, /*on_gpu=*/true), 32);
}

}  // namespace
}  // namespace hlab::model
