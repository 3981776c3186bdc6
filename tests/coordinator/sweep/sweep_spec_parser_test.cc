// Parsing sweep specs from YAML and JSON: the example specs, strictness
// (unknown fields, wrong types, malformed text with positions), and the
// shorthand for architectures.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/sweep/embedded_demo.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_parser.h"
#include "coordinator/sweep/spec_validator.h"

namespace hlab::sweep {
namespace {

std::string Example(const std::string& name) {
  return std::string(HLAB_SOURCE_DIR) + "/examples/sweeps/" + name;
}

TEST(SweepSpecParserTest, DemoSpecParsesAndValidates) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec(Example("demo.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "demo");
  EXPECT_GE(spec->architectures_size(), 4);
  EXPECT_GE(spec->scales_size(), 3);
  EXPECT_GE(
      spec->budgets().tokens_per_param_size() + spec->budgets().tokens_size(),
      3);
  EXPECT_FALSE(spec->fit().verify_scales().empty());
  EXPECT_TRUE(ValidateSweepSpec(*spec).ok()) << ValidateSweepSpec(*spec);
}

TEST(SweepSpecParserTest, EmbeddedDemoIsTheDemoFile) {
  absl::StatusOr<hlab::v1::SweepSpec> file =
      LoadSweepSpec(Example("demo.yaml"));
  absl::StatusOr<hlab::v1::SweepSpec> embedded =
      ParseSweepSpec(EmbeddedDemoSpec());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  EXPECT_EQ(SweepSpecToCanonicalJson(*file),
            SweepSpecToCanonicalJson(*embedded));
}

TEST(SweepSpecParserTest, PaperSpecParsesAndValidates) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec(Example("paper.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->scales_size(), 5);
  // Seven architectures plus the three section-6 variants.
  EXPECT_EQ(spec->architectures_size(), 10);
  EXPECT_EQ(spec->scales(4).budgets().tokens_per_param_size(), 1);
  EXPECT_TRUE(ValidateSweepSpec(*spec).ok()) << ValidateSweepSpec(*spec);
}

// The formation measurement (docs/evaluation.md): retrieval heads traced
// every 512 steps of each S4 trajectory, the Q-gradient hook on.
TEST(SweepSpecParserTest, DemoFormationSpecTracesAlongTraining) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec(Example("demo-formation.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->evaluation().trajectory().every_steps(), 512);
  EXPECT_TRUE(spec->evaluation().retrieval_heads().enabled());
  EXPECT_GT(spec->analysis().q_grad_every_steps(), 0);
  absl::StatusOr<SweepPlan> plan = PlanSweep(*spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  int evals = 0;
  for (const auto& t : plan->tasks) evals += t.kind() == v1::TASK_KIND_EVAL;
  // Per architecture: the trunk to step 7373 (8192 - 819) has 14 points
  // (512 ... 7168), the long run's decay one (7680), then both branch
  // points and both ends (the short run's end, 4096, is its decay's
  // multiple of 512 and gets no second EVAL).
  EXPECT_EQ(evals, 3 * (14 + 1 + 2 + 2));
}

// #21 point 4: the paper's design at micro scale: the seven architectures,
// the section-6 variants and the two short-convolution ablations, four
// scales (three fitted, one held out), five budgets.
TEST(SweepSpecParserTest, PaperMiniSpecHasThePapersDesign) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec(Example("paper-mini.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::vector<std::string> names;
  for (const auto& a : spec->architectures()) names.push_back(a.name());
  for (const char* arch : {"full", "swa-16", "swa-32", "swa-64", "lightning",
                           "mamba2", "gdn", "swa-16-1to3", "swa-16-headwise",
                           "swa-16-nope", "gdn-conv", "mamba2-conv"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), arch), names.end()) << arch;
  }
  EXPECT_GE(spec->scales_size(), 4);
  EXPECT_GE(
      spec->budgets().tokens_per_param_size() + spec->budgets().tokens_size(),
      5);
  EXPECT_TRUE(spec->share_trunk());
  EXPECT_FALSE(spec->fit().verify_scales().empty());
  EXPECT_TRUE(ValidateSweepSpec(*spec).ok()) << ValidateSweepSpec(*spec);
}

// docs/reproduction.md, "Claim 6 over three seeds": paper-mini's NoPE
// comparison with seeds 0-2, whose seed-0 runs are paper-mini's own (the
// same scales, budgets, data, schedule and shape of batch).
TEST(SweepSpecParserTest, NopeSeedsSpecIsPaperMinisComparisonOverSeeds) {
  absl::StatusOr<hlab::v1::SweepSpec> mini =
      LoadSweepSpec(Example("paper-mini.yaml"));
  absl::StatusOr<hlab::v1::SweepSpec> seeds =
      LoadSweepSpec(Example("paper-mini-nope-seeds.yaml"));
  ASSERT_TRUE(mini.ok()) << mini.status();
  ASSERT_TRUE(seeds.ok()) << seeds.status();
  EXPECT_TRUE(ValidateSweepSpec(*seeds).ok()) << ValidateSweepSpec(*seeds);
  std::vector<std::string> names;
  for (const auto& a : seeds->architectures()) names.push_back(a.name());
  EXPECT_EQ(names, (std::vector<std::string>{"full", "swa-16", "swa-16-nope"}));
  EXPECT_EQ(std::vector<int64_t>(seeds->seeds().begin(), seeds->seeds().end()),
            (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(seeds->scales_size(), mini->scales_size());
  for (int i = 0; i < mini->scales_size(); ++i) {
    EXPECT_EQ(seeds->scales(i).SerializeAsString(),
              mini->scales(i).SerializeAsString())
        << i;
  }
  EXPECT_EQ(seeds->budgets().SerializeAsString(),
            mini->budgets().SerializeAsString());
  EXPECT_EQ(seeds->data().SerializeAsString(),
            mini->data().SerializeAsString());
  EXPECT_EQ(seeds->schedule().SerializeAsString(),
            mini->schedule().SerializeAsString());
  EXPECT_EQ(seeds->seq_len(), mini->seq_len());
  EXPECT_EQ(seeds->batch_tokens(), mini->batch_tokens());
}

// The numbers the paper gives (examples/sweeps/paper.yaml lists them): six
// budgets for S1-S4 up to D/N = 1000 including 300 and 500, S5 of ~0.48B at
// D/N = 200, at most ~100B tokens in any run, its RoPE base set.
TEST(SweepSpecParserTest, PaperSpecKeepsThePapersNumbers) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec(Example("paper.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& ratios = spec->budgets().tokens_per_param();
  EXPECT_EQ(ratios.size(), 6);
  for (double r : {300.0, 500.0, 1000.0}) {
    EXPECT_NE(std::find(ratios.begin(), ratios.end(), r), ratios.end()) << r;
  }
  EXPECT_EQ(spec->scales(4).budgets().tokens_per_param(0), 200);
  EXPECT_GT(spec->rope_theta(), 1e4);
  absl::StatusOr<SweepPlan> plan = PlanSweep(*spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  int64_t largest = 0;
  for (const auto& run : plan->runs) {
    largest = std::max(largest, run.tokens());
    if (run.scale() == "S5" && run.architecture() == "full") {
      EXPECT_NEAR(static_cast<double>(run.non_embedding_params()), 0.48e9,
                  0.01e9);
    }
  }
  EXPECT_LE(largest, 1.05e11) << "the paper's largest run is ~100B tokens";
}

// scripts/gpu-check.sh measures MFU at paper.yaml's largest scale and names
// its shape in hlab-bench-gpu's flags: they must stay that scale's.
TEST(SweepSpecParserTest, GpuCheckBenchesThePaperSpecsLargestScale) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec(Example("paper.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const hlab::v1::Scale& s5 = spec->scales(spec->scales_size() - 1);
  ASSERT_EQ(s5.name(), "S5");
  ASSERT_EQ(s5.d_model() / s5.n_heads(), s5.head_dim());
  std::ifstream in(std::string(HLAB_SOURCE_DIR) + "/scripts/gpu-check.sh");
  std::stringstream script;
  script << in.rdbuf();
  const std::string flags =
      absl::StrCat("--d-model ", s5.d_model(), " --layers ", s5.n_layers(),
                   " --heads ", s5.n_heads(), " --kv-heads ", s5.n_kv_heads(),
                   " --vocab ", s5.vocab_size());
  EXPECT_NE(script.str().find(flags), std::string::npos)
      << "scripts/gpu-check.sh should run hlab-bench-gpu with " << flags;
}

TEST(SweepSpecParserTest, ArchitectureShorthandAndCustomPatterns) {
  absl::StatusOr<hlab::v1::SweepSpec> spec = ParseSweepSpec(
      "architectures: [full, {name: mine, pattern: 'gdn:conv,full'}]\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->architectures_size(), 2);
  EXPECT_EQ(spec->architectures(0).name(), "full");
  EXPECT_EQ(spec->architectures(1).pattern(), "gdn:conv,full");
}

TEST(SweepSpecParserTest, CanonicalJsonReadsBack) {
  // Protobuf's JSON printing (int64 as strings, every field) parses back to
  // the same spec, so a printed spec can be resubmitted.
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec(Example("paper.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string json = SweepSpecToCanonicalJson(*spec);
  EXPECT_NE(json.find("\"batch_tokens\":\""), std::string::npos)
      << "int64 printed as a string";
  absl::StatusOr<hlab::v1::SweepSpec> back = ParseSweepSpec(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(SweepSpecToCanonicalJson(*back), json);
}

// A number no double holds is malformed JSON, not an exception out of the
// parser (found by tests/fuzz/fuzz_sweep_spec.cc).
TEST(SweepSpecParserTest, ANumberBeyondDoubleIsMalformedJson) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      ParseSweepSpec("{\"seq_len\": 1E5315}", SpecFormat::kJson);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(spec.status().message()).find("malformed JSON"),
            std::string::npos)
      << spec.status();
}

TEST(SweepSpecParserTest, JsonAndYamlGiveTheSameSpec) {
  const auto yaml = ParseSweepSpec(
      "name: x\nseq_len: 64\nbudgets: {tokens_per_param: [5, 10]}\n"
      "schedule: {peak_lr: 1.0e-3}\n");
  const auto json = ParseSweepSpec(
      "{\"name\": \"x\", \"seq_len\": 64,\n"
      " \"budgets\": {\"tokens_per_param\": [5, 10]},\n"
      "\t\"schedule\": {\"peak_lr\": 0.001}}");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(SweepSpecToCanonicalJson(*yaml), SweepSpecToCanonicalJson(*json));
}

void ExpectInvalid(const std::string& text, const std::string& needle) {
  absl::StatusOr<hlab::v1::SweepSpec> spec = ParseSweepSpec(text);
  ASSERT_FALSE(spec.ok()) << "accepted: " << text;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(spec.status().message()).find(needle),
            std::string::npos)
      << spec.status().message() << "\n  should mention: " << needle;
}

TEST(SweepSpecParserTest, RejectsUnknownFieldWithPathAndPosition) {
  ExpectInvalid("name: x\nscales:\n  - {name: A, d_modle: 32}\n",
                "scales[0].d_modle: unknown field (line 3, column 15)");
}

TEST(SweepSpecParserTest, RejectsWrongTypes) {
  ExpectInvalid("seq_len: long\n", "seq_len: expected an integer, got 'long'");
  ExpectInvalid("seq_len: '64k'\n", "seq_len: expected an integer");
  ExpectInvalid("share_trunk: 'true'\n", "share_trunk: expected true or false");
  ExpectInvalid("share_trunk: 1\n", "share_trunk: expected true or false");
  ExpectInvalid("schedule: 3\n", "schedule: expected a map");
  ExpectInvalid("seeds: 3\n", "seeds: expected a list");
  ExpectInvalid("priority: 99999999999\n", "priority: integer 99999999999 out");
  ExpectInvalid("{\"seq_len\": \"sixty\"}", "seq_len: expected an integer");
  ExpectInvalid("{\"seq_len\": 64.5}", "seq_len: expected an integer");
  ExpectInvalid("{\"schedule\": {\"peak_lr\": true}}",
                "schedule.peak_lr: expected a finite number");
}

TEST(SweepSpecParserTest, RejectsMalformedTextWithLineAndColumn) {
  ExpectInvalid("name: x\nscales: [unclosed\n", "malformed YAML");
  ExpectInvalid("name: x\nscales: [unclosed\n", "line ");
  ExpectInvalid("{\"name\": \"x\",\n \"seq_len\": }", "malformed JSON");
  ExpectInvalid("{\"name\": \"x\",\n \"seq_len\": }", "line 2");
}

TEST(SweepSpecParserTest, RejectsDuplicateKeysAndMissingValues) {
  ExpectInvalid("seq_len: 64\nseq_len: 128\n", "duplicate key 'seq_len'");
  ExpectInvalid("{\"seq_len\": 64, \"seq_len\": 128}",
                "duplicate key 'seq_len'");
  ExpectInvalid("name: x\nseq_len:\n", "seq_len: missing value");
}

TEST(SweepSpecParserTest, RejectsEmptyDocumentAndNonMapRoot) {
  ExpectInvalid("", "empty");
  ExpectInvalid("- a\n- b\n", "spec: expected a map");
  ExpectInvalid("hello\n", "spec: expected a map, got 'hello'");
  ExpectInvalid("scales: [S1]\n", "scales[0]: expected a map, got 'S1'");
}

TEST(SweepSpecParserTest, MissingFileIsNotFound) {
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      LoadSweepSpec("/nonexistent/spec.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hlab::sweep
