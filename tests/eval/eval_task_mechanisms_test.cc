// EVAL tasks of the mechanism analyses (appendix D) on tiny checkpoints:
// the receptive-field restrictions, the gradient profile, layer probes and
// retrieval heads, with their known answers and bad input named.
#include <cmath>
#include <string>
#include <vector>

#include "eval/eval_task.h"
#include "eval_task_fixture.h"
#include "eval_test_util.h"
#include "gtest/gtest.h"
#include "train/trainer.h"
#include "train/training_data.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::EvalTaskRunTest;
using testing::FindRecord;
using testing::Parse;
using testing::TinyConfig;
using testing::WriteTinyCheckpoint;

// Appendix D.1: restricting a Full model's attention to [i-H, i] is the
// same weights run as SWA(H + 1); restricting the efficient layers of an
// SWA(16) hybrid to H >= 32 changes nothing (every window holds each
// output's 16 keys); a restriction without layers to restrict is null.
TEST_F(EvalTaskRunTest, ReceptiveFieldRestrictionsHaveTheirKnownAnswers) {
  const std::string full = (dir_ / "full" / "step-0000000010.ckpt").string();
  const std::string swa = (dir_ / "swa9" / "step-0000000010.ckpt").string();
  model::ModelConfig swa9 = TinyConfig("full");
  for (model::MixerSpec& layer : swa9.layers) {
    layer.kind = model::MixerKind::kSlidingWindow;
    layer.window = 9;
  }
  WriteTinyCheckpoint(full, TinyConfig("full"), "byte", 3, 10);
  WriteTinyCheckpoint(swa, swa9, "byte", 3, 10);  // the same weights
  Json j = Task();
  j["evals"].erase("longppl");
  j["evals"]["receptive_field"] = {{"limit", 8}};
  j["checkpoint"] = full;
  ASSERT_TRUE(Run(j).ok());
  EXPECT_EQ(records_.front()["evals"], Json({"val_loss", "receptive_field"}));
  const Json restricted =
      FindRecord(records_, "result", "rf_full_delta_val_loss");
  ASSERT_FALSE(restricted.is_null());
  EXPECT_EQ(restricted["details"]["limit"], 8);
  const double full_loss =
      FindRecord(records_, "result", "val_loss")["value"].get<double>();
  const Json none =
      FindRecord(records_, "result", "rf_efficient_delta_val_loss");
  ASSERT_FALSE(none.is_null());
  EXPECT_TRUE(none["value"].is_null());
  EXPECT_EQ(none["details"]["not_measured"],
            "the model has no efficient layer");

  j["checkpoint"] = swa;
  j["evals"].erase("receptive_field");
  ASSERT_TRUE(Run(j).ok());
  const double swa_loss =
      FindRecord(records_, "result", "val_loss")["value"].get<double>();
  EXPECT_NE(swa_loss, full_loss);
  EXPECT_NEAR(full_loss + restricted["value"].get<double>(), swa_loss, 1e-6);

  // log(LongPPL) on the same key tokens (every candidate key, as above):
  // the restricted Full model scores as SWA(9) does.
  Json lp = Task();
  lp["evals"]["longppl"]["min_key_tokens"] = 0;
  lp["evals"]["longppl"]["alpha"] = -100.0;
  lp["evals"]["longppl"]["beta"] = -100.0;
  lp["evals"]["receptive_field"] = {{"limit", 8}};
  lp["checkpoint"] = full;
  ASSERT_TRUE(Run(lp).ok());
  const double full_lp =
      FindRecord(records_, "result", "log_longppl")["value"].get<double>();
  const Json lp_delta =
      FindRecord(records_, "result", "rf_full_delta_log_longppl");
  ASSERT_FALSE(lp_delta.is_null());
  lp["checkpoint"] = swa;
  lp["evals"].erase("receptive_field");
  ASSERT_TRUE(Run(lp).ok());
  const double swa_lp =
      FindRecord(records_, "result", "log_longppl")["value"].get<double>();
  EXPECT_NE(swa_lp, full_lp);
  EXPECT_NEAR(full_lp + lp_delta["value"].get<double>(), swa_lp, 1e-6);

  // The SWA(16) hybrid, efficient layers restricted to H = 32.
  j = Task();
  j["evals"].erase("longppl");
  j["evals"]["receptive_field"] = {{"limit", 32}};
  ASSERT_TRUE(Run(j).ok());
  const Json efficient =
      FindRecord(records_, "result", "rf_efficient_delta_val_loss");
  ASSERT_FALSE(efficient.is_null());
  EXPECT_NEAR(efficient["value"].get<double>(), 0.0, 1e-6);
  // Its full layers restricted to 32 keys of 64 do change the loss.
  const Json full_layers =
      FindRecord(records_, "result", "rf_full_delta_val_loss");
  EXPECT_GT(std::abs(full_layers["value"].get<double>()), 1e-7);
}

// Appendix D.3 on the run's long held-out documents: an SWA(16)-only model
// (two layers: nothing beyond 30 tokens back) has its reach at the bin
// after 30, and G is 0 in every bin beyond.
TEST_F(EvalTaskRunTest, GradientProfileGivesTheReachAndTheBins) {
  const std::string swa = (dir_ / "swa16" / "step-0000000010.ckpt").string();
  model::ModelConfig only_swa = TinyConfig("full");
  for (model::MixerSpec& layer : only_swa.layers) {
    layer.kind = model::MixerKind::kSlidingWindow;
    layer.window = 16;
  }
  WriteTinyCheckpoint(swa, only_swa, "byte", 4, 10);
  Json j = Task();
  j["checkpoint"] = swa;
  j["evals"] = {{"gradient_profile", {{"sequences", 3}}}};
  const absl::Status ran = Run(j);
  ASSERT_TRUE(ran.ok()) << ran;
  const Json g = FindRecord(records_, "result", "grad_reach");
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(g["value"], 32);  // bins [16, 32) holds 16..30; [32, 64) is 0
  EXPECT_EQ(g["details"]["sequences"], 3);
  EXPECT_EQ(g["details"]["seq_len"], 64);
  const Json& bins = g["details"]["bins"];
  ASSERT_EQ(bins.size(), 7u);  // [0,1) [1,2) [2,4) ... [32,64)
  EXPECT_GT(bins[5]["g"].get<double>(), 0);
  EXPECT_EQ(bins[6]["g"].get<double>(), 0);
  EXPECT_EQ(g["details"]["scalar"], "the target logit at the last position");

  j["evals"]["gradient_profile"]["sequences"] = 0;
  const absl::Status bad = Run(j);
  EXPECT_NE(std::string(bad.message())
                .find("evals.gradient_profile.sequences: must be > 0"),
            std::string::npos)
      << bad;
}

// Appendix D.2: a probe per layer (the embeddings and each block) with its
// interval, the peak in probe_acc; a model without full attention, a
// context that cannot hold the sample or exceeds the trained length are
// refused naming the field, before anything runs.
TEST_F(EvalTaskRunTest, ProbingGivesEveryLayersAccuracyAndNamesBadInput) {
  Json j = Task();
  j["evals"] = {{"val_loss", {{"tokens", 256}}},
                {"probing", {{"samples", 64}, {"context_length", 48}}}};
  const absl::Status ran = Run(j);
  ASSERT_TRUE(ran.ok()) << ran;
  EXPECT_EQ(records_.front()["evals"], Json({"val_loss", "probing"}));
  const Json peak = FindRecord(records_, "result", "probe_acc");
  ASSERT_FALSE(peak.is_null());
  const Json& d = peak["details"];
  ASSERT_EQ(d["layers"].size(), 3u);  // the embeddings and two blocks
  EXPECT_EQ(d["layers"][0]["mixer"], "embedding");
  EXPECT_EQ(d["chance"], 0.125);
  EXPECT_EQ(d["classes"], 8);
  EXPECT_EQ(d["samples"], 64);
  EXPECT_EQ(d["context_length"], 48);
  const int64_t at = d["peak_layer"].get<int64_t>();
  EXPECT_EQ(peak["value"], d["layers"][static_cast<size_t>(at)]["accuracy"]);
  for (int k = 0; k < 3; ++k) {
    const Json layer =
        FindRecord(records_, "result", "probe_acc/l" + std::to_string(k));
    ASSERT_FALSE(layer.is_null()) << k;
    EXPECT_EQ(layer["value"], d["layers"][static_cast<size_t>(k)]["accuracy"]);
    EXPECT_LE(layer["details"]["lo"].get<double>(),
              layer["value"].get<double>());
    EXPECT_GE(layer["details"]["hi"].get<double>(),
              layer["value"].get<double>());
  }

  const std::string swa = (dir_ / "swa16" / "step-0000000010.ckpt").string();
  model::ModelConfig only_swa = TinyConfig("full");
  for (model::MixerSpec& layer : only_swa.layers) {
    layer.kind = model::MixerKind::kSlidingWindow;
    layer.window = 16;
  }
  WriteTinyCheckpoint(swa, only_swa, "byte", 4, 10);
  Json no_full = j;
  no_full["checkpoint"] = swa;
  absl::Status s = Run(no_full);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message())
                .find("evals.probing: the model has no full-attention "
                      "layer (layers swa, swa)"),
            std::string::npos)
      << s;
  EXPECT_EQ(FindRecord(records_, "result", "val_loss"), Json(nullptr))
      << "refused before anything ran";
  auto task = Parse(no_full);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(CheckEvalTask(*task).status().code(),
            absl::StatusCode::kFailedPrecondition);

  j["evals"]["probing"]["context_length"] = 4;
  s = Run(j);
  EXPECT_NE(std::string(s.message())
                .find("evals.probing: context_length: 4 tokens cannot hold"),
            std::string::npos)
      << s;
  j["evals"]["probing"]["context_length"] = 128;  // seq_len is 64
  s = Run(j);
  EXPECT_NE(std::string(s.message())
                .find("evals.probing.context_length: 128 tokens exceed"),
            std::string::npos)
      << s;
  j["evals"]["probing"]["context_length"] = 48;
  j["evals"]["probing"]["classes"] = 12;
  s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("evals.probing.classes"),
            std::string::npos)
      << s;
}

// Appendix D.4: every full-attention head's row, the top heads best first,
// retrieval_score and retrieval_mass the top head's; a model without full
// attention and bad fields are refused naming them, before anything runs.
TEST_F(EvalTaskRunTest, RetrievalHeadsTraceEveryFullHeadAndNameBadInput) {
  Json j = Task();
  j["evals"] = {{"val_loss", {{"tokens", 256}}},
                {"retrieval_heads", {{"samples", 6}, {"context_length", 48}}}};
  const absl::Status ran = Run(j);
  ASSERT_TRUE(ran.ok()) << ran;
  EXPECT_EQ(records_.front()["evals"], Json({"val_loss", "retrieval_heads"}));
  const Json score = FindRecord(records_, "result", "retrieval_score");
  ASSERT_FALSE(score.is_null());
  const Json& d = score["details"];
  // The model is TinyConfig("swa-16"): every head of its full layers.
  const model::ModelConfig config = TinyConfig("swa-16");
  int64_t full_layers = 0;
  for (const model::MixerSpec& l : config.layers) {
    full_layers += l.kind == model::MixerKind::kFull ? 1 : 0;
  }
  ASSERT_GT(full_layers, 0);
  ASSERT_EQ(d["heads"].size(),
            static_cast<size_t>(full_layers * config.n_heads));
  EXPECT_EQ(d["layers"].size(), static_cast<size_t>(full_layers));
  ASSERT_EQ(d["top"].size(), 2u);
  EXPECT_GE(d["top"][0]["score"].get<double>(),
            d["top"][1]["score"].get<double>());
  EXPECT_EQ(score["value"], d["top"][0]["score"]);
  EXPECT_EQ(d["samples"], 6);
  EXPECT_EQ(d["context_length"], 48);
  const Json mass = FindRecord(records_, "result", "retrieval_mass");
  ASSERT_FALSE(mass.is_null());
  EXPECT_EQ(mass["value"], d["top"][0]["needle_mass"]);
  EXPECT_EQ(mass["details"]["layer"], d["top"][0]["layer"]);

  const std::string swa = (dir_ / "swa16r" / "step-0000000010.ckpt").string();
  model::ModelConfig only_swa = TinyConfig("full");
  for (model::MixerSpec& layer : only_swa.layers) {
    layer.kind = model::MixerKind::kSlidingWindow;
    layer.window = 16;
  }
  WriteTinyCheckpoint(swa, only_swa, "byte", 4, 10);
  Json no_full = j;
  no_full["checkpoint"] = swa;
  absl::Status s = Run(no_full);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(s.message())
                .find("evals.retrieval_heads: the model has no full-attention "
                      "layer (layers swa, swa)"),
            std::string::npos)
      << s;
  EXPECT_EQ(FindRecord(records_, "result", "val_loss"), Json(nullptr))
      << "refused before anything ran";

  j["evals"]["retrieval_heads"]["context_length"] = 128;  // seq_len is 64
  s = Run(j);
  EXPECT_NE(
      std::string(s.message())
          .find("evals.retrieval_heads.context_length: 128 tokens exceed"),
      std::string::npos)
      << s;
  j["evals"]["retrieval_heads"]["context_length"] = 48;
  j["evals"]["retrieval_heads"]["top_heads"] = 0;
  s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("evals.retrieval_heads.top_heads"),
            std::string::npos)
      << s;
}

TEST_F(EvalTaskRunTest, BadReceptiveFieldLimitsNameTheField) {
  Json j = Task();
  j["evals"].erase("longppl");
  for (const int64_t bad : {-2, 1, 7}) {
    j["evals"]["receptive_field"] = {{"limit", bad}};
    const absl::Status s = Run(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(std::string(s.message()).find("evals.receptive_field.limit"),
              std::string::npos)
        << s;
  }
  j["evals"]["receptive_field"] = {{"limit", 64}};  // the context
  const absl::Status at_context = Run(j);
  EXPECT_EQ(at_context.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(at_context.message()).find("below the context"),
            std::string::npos)
      << at_context;
  j["evals"]["receptive_field"] = {{"limit", 8}};
  j["evals"].erase("val_loss");
  const absl::Status alone = Run(j);
  EXPECT_NE(std::string(alone.message()).find("needs evals.val_loss"),
            std::string::npos)
      << alone;
}

// RULER (eval/ruler/ruler.h) through an EVAL task: greedy decoding of the
// tiny model, a score per task and overall with every cell; a length above
// the context and an unknown task are refused before any result.
TEST_F(EvalTaskRunTest, RulerScoresEachTaskAndLengthByGreedyDecoding) {
  Json j = Task();
  j["config"]["seq_len"] = 1024;
  j["evals"] = {{"ruler",
                 {{"tasks", {"niah_single_1", "vt"}},
                  {"lengths", {900, 1000}},
                  {"samples", 2},
                  {"tokens_to_generate", 6}}}};
  const absl::Status run = Run(j);
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_EQ(records_.front()["evals"], Json({"ruler"}));
  const Json all = FindRecord(records_, "result", "ruler_score");
  ASSERT_FALSE(all.is_null());
  ASSERT_EQ(all["details"]["cells"].size(), 4u) << all.dump();
  EXPECT_EQ(all["details"]["generated_tokens"], 4 * 2 * 6);
  double sum = 0;
  for (const char* task : {"niah_single_1", "vt"}) {
    const Json one =
        FindRecord(records_, "result", std::string("ruler_score/") + task);
    ASSERT_FALSE(one.is_null()) << task;
    const double v = one["value"].get<double>();
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 1.0);
    EXPECT_EQ(one["details"]["cells"].size(), 2u);
    sum += v;
  }
  EXPECT_DOUBLE_EQ(all["value"].get<double>(), sum / 2);
  int64_t progress = 0;
  for (const Json& r : records_) {
    progress += r["type"] == "progress" && r["eval"] == "ruler" ? 1 : 0;
  }
  EXPECT_EQ(progress, 8);

  // A length above the trained context, an unknown task: exit code 2,
  // naming the field, and no result at all.
  j["evals"]["ruler"]["lengths"] = {900, 2048};
  j["evals"]["val_loss"] = {{"tokens", 500}};
  absl::Status s = Run(j);
  EXPECT_EQ(train::ExitCodeFor(s), 2) << s;
  EXPECT_NE(std::string(s.message()).find("evals.ruler.lengths[1]: 2048"),
            std::string::npos)
      << s;
  EXPECT_TRUE(FindRecord(records_, "result", "val_loss").is_null());
  j["evals"]["ruler"]["lengths"] = {900};
  j["evals"]["ruler"]["tasks"] = {"niah_single_9"};
  EXPECT_NE(Parse(j).status().message().find(
                "evals.ruler.tasks[0]: unknown RULER task"),
            std::string::npos)
      << Parse(j).status();
}

}  // namespace
}  // namespace hlab::eval
