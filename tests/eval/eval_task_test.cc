// EVAL tasks: parsing (every field named in its error), and running on tiny
// checkpoints written by the test: results, the key-token cache across
// runs, and each bad input the contract makes a permanent failure.
#include "eval/eval_task.h"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "eval_test_util.h"
#include "gtest/gtest.h"
#include "model/llama/llama_config.h"
#include "tests/data/test_util.h"
#include "tests/model/llama_test_util.h"
#include "train/trainer.h"
#include "train/training_data.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using task::EvalTask;
using task::EvalTaskFromJson;
using task::ExampleEvalTaskJson;
using testing::FindRecord;
using testing::TinyConfig;
using testing::WriteTinyCheckpoint;

// A task as the coordinator writes it (canonical run config).
Json ContractTask() {
  return Json::parse(R"({
    "kind": "eval", "task_id": "t-1", "run_id": "r-1", "step": 10,
    "checkpoint": "/nonexistent/step-0000000010.ckpt",
    "config": {"format": "hlab.run.v1",
               "model": {"arch": "swa-16", "d_model": 32, "n_layers": 2,
                         "n_heads": 2, "n_kv_heads": 1, "vocab_size": 258},
               "seq_len": 64, "batch_tokens": 256, "tokens": 2560,
               "steps": 10, "seed": 0,
               "data": {"source": "synthetic", "seed": 0,
                        "corpus_version": 3, "long_fraction": 0.5},
               "schedule": {"kind": "wsd", "peak_lr": 0.003}},
    "evals": {
      "val_loss": {"tokens": 0},
      "longppl": {"trunc_len": 0, "sliding_window": 0, "context_len": 0,
                  "reference": {"run_id": "r-ref", "checkpoint_path": "",
                                "checkpoint": "/nonexistent/ref.ckpt"}},
      "niah": {"context_lengths": [64], "depths": [0.5], "samples": 20}
    },
    "cache_dir": "", "threads": 0, "allow_extrapolation": false
  })");
}

absl::StatusOr<EvalTask> Parse(const Json& j) {
  return EvalTaskFromJson(j.dump());
}

TEST(EvalTaskParseTest, ReadsTheContractsTaskFile) {
  auto task = Parse(ContractTask());
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->task_id, "t-1");
  EXPECT_EQ(task->run_id, "r-1");
  EXPECT_EQ(task->step, 10);
  EXPECT_EQ(task->run.seq_len, 64);
  EXPECT_EQ(task->run.data.source, "synthetic");
  EXPECT_EQ(task->evals.Names(),
            (std::vector<std::string>{"val_loss", "longppl", "niah"}));
  EXPECT_EQ(task->evals.longppl->reference.File(), "/nonexistent/ref.ckpt");
  EXPECT_EQ(task->evals.longppl->reference.run_id, "r-ref");
  const task::LongPplPlan plan = PlanLongPpl(*task->evals.longppl, 64);
  EXPECT_EQ(plan.trunc_len, 16);      // seq_len / 4
  EXPECT_EQ(plan.sliding_window, 4);  // seq_len / 16
  EXPECT_EQ(plan.context_len, 64);
  EXPECT_EQ(task->evals.niah->context_lengths, std::vector<int64_t>{64});
}

TEST(EvalTaskParseTest, AcceptsAnHlabTrainTaskAsTheConfig) {
  Json j = ContractTask();
  j["config"] = Json::parse(task::ExampleTaskJson());
  auto task = Parse(j);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->run.seq_len, 128);
}

TEST(EvalTaskParseTest, TheTemplateParses) {
  auto task = EvalTaskFromJson(ExampleEvalTaskJson());
  ASSERT_TRUE(task.ok()) << task.status();
}

TEST(EvalTaskParseTest, UnknownFieldsAndWrongTypesNameTheField) {
  struct Case {
    std::string field;
    std::function<void(Json&)> edit;
  };
  const std::vector<Case> cases = {
      {"learning_rate", [](Json& j) { j["learning_rate"] = 1; }},
      {"evals.perplexity", [](Json& j) { j["evals"]["perplexity"] = {}; }},
      {"evals.val_loss.tokens",
       [](Json& j) { j["evals"]["val_loss"]["tokens"] = "many"; }},
      {"evals.val_loss.tokens",
       [](Json& j) { j["evals"]["val_loss"]["tokens"] = -5; }},
      {"evals.longppl.trunc_len",
       [](Json& j) { j["evals"]["longppl"]["trunc_len"] = 1.5; }},
      {"evals.longppl.reference.path",
       [](Json& j) { j["evals"]["longppl"]["reference"]["path"] = "x"; }},
      {"evals.longppl.reference.hf_dir",
       [](Json& j) {
         j["evals"]["longppl"]["reference"]["hf_dir"] = "/models/llama";
       }},
      {"evals.longppl.reference.dtype",
       [](Json& j) { j["evals"]["longppl"]["reference"]["dtype"] = "bf16"; }},
      {"evals.longppl.reference.dtype",
       [](Json& j) {
         j["evals"]["longppl"]["reference"] = {{"hf_dir", "/m"},
                                               {"dtype", "fp16"}};
       }},
      {"evals.longppl.data.jsonl",
       [](Json& j) {
         j["evals"]["longppl"]["data"] = {{"jsonl", 3}};
       }},
      {"evals.longppl.data.prepared",
       [](Json& j) {
         j["evals"]["longppl"]["data"] = {{"jsonl", "a"}, {"prepared", "b"}};
       }},
      {"evals.longppl.aggregation",
       [](Json& j) { j["evals"]["longppl"]["aggregation"] = "mean"; }},
      {"evals.longppl.key_tokens",
       [](Json& j) {
         j["evals"]["longppl"]["key_tokens"] = {{"file", "a"}, {"slices", "b"}};
       }},
      {"evals.longppl.key_tokens.texts",
       [](Json& j) {
         j["evals"]["longppl"].erase("reference");
         j["evals"]["longppl"]["key_tokens"] = {{"slices", "b"}};
       }},
      {"evals.longppl.reference",
       [](Json& j) {
         j["evals"]["longppl"]["key_tokens"] = {{"file", "a"}};
       }},
      {"evals.longppl.data",
       [](Json& j) {
         j["evals"]["longppl"].erase("reference");
         j["evals"]["longppl"]["key_tokens"] = {{"file", "a"}};
         j["evals"]["longppl"]["data"] = {{"jsonl", "x.jsonl"}};
       }},
      {"evals.niah.depths[0]",
       [](Json& j) { j["evals"]["niah"]["depths"] = {1.5}; }},
      {"evals.niah.kinds[1]",
       [](Json& j) {
         j["evals"]["niah"]["kinds"] = {"single", "haystack"};
       }},
      {"allow_extrapolation",
       [](Json& j) { j["allow_extrapolation"] = "yes"; }},
      {"threads", [](Json& j) { j["threads"] = -1; }},
      {"checkpoint", [](Json& j) { j.erase("checkpoint"); }},
      {"config", [](Json& j) { j.erase("config"); }},
      {"config.seq_len", [](Json& j) { j["config"]["seq_len"] = "64"; }},
      {"config.data.source",
       [](Json& j) { j["config"]["data"]["source"] = "web"; }},
      {"config.optimizer", [](Json& j) { j["config"]["optimizer"] = {}; }},
      {"config.format", [](Json& j) { j["config"]["format"] = "v0"; }},
      {"kind", [](Json& j) { j["kind"] = "train"; }},
      {"evals", [](Json& j) { j["evals"] = Json::object(); }},
  };
  for (const Case& c : cases) {
    Json j = ContractTask();
    c.edit(j);
    auto task = Parse(j);
    ASSERT_FALSE(task.ok()) << c.field;
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(task.status().message()).rfind(c.field + ":", 0), 0u)
        << "want '" << c.field
        << ":' at the start of: " << task.status().message();
  }
}

TEST(EvalTaskParseTest, AnUnresolvedReferenceRunSaysItMustHaveSucceeded) {
  Json j = ContractTask();
  j["evals"]["longppl"]["reference"] = {{"run_id", "r-ref"}};
  auto task = Parse(j);
  ASSERT_FALSE(task.ok());
  EXPECT_NE(std::string(task.status().message()).find("SUCCEEDED"),
            std::string::npos);
}

// Runs tasks against checkpoints written into a temporary directory.
class EvalTaskRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    model_ = (dir_ / "model" / "step-0000000010.ckpt").string();
    reference_ = (dir_ / "reference" / "step-0000000020.ckpt").string();
    WriteTinyCheckpoint(model_, TinyConfig("swa-16"), "byte", 1, 10);
    reference_sha_ =
        WriteTinyCheckpoint(reference_, TinyConfig("full"), "byte", 2, 20);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Json Task() {
    Json j = ContractTask();
    j["checkpoint"] = model_;
    j["evals"].erase("niah");
    j["evals"]["val_loss"]["tokens"] = 1000;
    j["evals"]["longppl"]["documents"] = 4;
    j["evals"]["longppl"]["reference"]["checkpoint"] = reference_;
    j["cache_dir"] = (dir_ / "cache").string();
    j["threads"] = 1;
    return j;
  }

  // Runs `j`; the records go to records_.
  absl::Status Run(const Json& j) {
    records_.clear();
    auto task = Parse(j);
    if (!task.ok()) return task.status();
    return RunEvalTask(*task, [&](const Json& r) { records_.push_back(r); });
  }

  fs::path dir_;
  std::string model_, reference_, reference_sha_;
  std::vector<Json> records_;
};

TEST_F(EvalTaskRunTest, EmitsStartResultsAndDoneAndReusesCachedKeyTokens) {
  Json v = Task();
  v["evals"].erase("longppl");
  ASSERT_TRUE(Run(v).ok());
  ASSERT_EQ(records_.size(), 3u);
  EXPECT_EQ(records_.front()["type"], "start");
  EXPECT_EQ(records_.front()["evals"], Json({"val_loss"}));
  EXPECT_EQ(records_.back()["type"], "done");
  const Json val = FindRecord(records_, "result", "val_loss");
  ASSERT_FALSE(val.is_null());
  EXPECT_EQ(val["run_id"], "r-1");
  EXPECT_EQ(val["step"], 10);
  EXPECT_EQ(val["details"]["tokens"], 16 * 64);  // ceil(1000 / 64) sequences
  EXPECT_GT(val["details"]["documents"].get<int64_t>(), 16);
  // An untrained model is near uniform over 258 tokens.
  EXPECT_NEAR(val["value"].get<double>(), std::log(258.0), 0.3);

  // An untrained reference selects few key tokens; make every candidate
  // key. Documents (65..128 tokens) are cut to 128 rather than seq_len, so
  // they hold recalls (the evaluated model is allowed to extrapolate).
  Json j = Task();
  j["evals"]["longppl"]["min_key_tokens"] = 0;
  j["evals"]["longppl"]["alpha"] = -100.0;
  j["evals"]["longppl"]["beta"] = -100.0;
  j["evals"]["longppl"]["context_len"] = 128;
  j["allow_extrapolation"] = true;
  ASSERT_TRUE(Run(j).ok());
  EXPECT_EQ(records_.front()["evals"], Json({"val_loss", "longppl"}));
  const Json first = FindRecord(records_, "result", "log_longppl");
  ASSERT_FALSE(first.is_null());
  const Json& d = first["details"];
  EXPECT_EQ(d["cache"], "miss");
  EXPECT_EQ(d["documents"], 4);
  EXPECT_EQ(d["documents_skipped"], 0);
  EXPECT_EQ(d["trunc_len"], 16);
  EXPECT_EQ(d["sliding_window"], 4);
  EXPECT_EQ(d["context_len"], 128);
  // Every position >= K of the 4 held-out documents is key.
  auto task = Parse(j);
  ASSERT_TRUE(task.ok());
  task->run.model = TinyConfig("swa-16");
  auto data = train::TrainingData::Create(task->run);
  ASSERT_TRUE(data.ok()) << data.status();
  int64_t candidates = 0;
  for (int64_t i = 0; i < 4; ++i) {
    candidates +=
        std::min<int64_t>(128, (*data)->long_held_out()->DocumentLength(i)) -
        16;
  }
  EXPECT_EQ(d["key_tokens"], candidates);
  EXPECT_EQ(d["candidate_tokens"], candidates);
  EXPECT_EQ(d["reference"]["payload_sha256"], reference_sha_);
  // Synthetic data: every true recall position >= K was selected.
  EXPECT_GT(d["true_recall_positions"].get<int64_t>(), 0);
  EXPECT_EQ(d["key_token_recall"], 1.0);
  EXPECT_NEAR(d["key_token_precision"].get<double>(),
              d["key_token_chance"].get<double>(), 1e-9);

  ASSERT_TRUE(Run(j).ok());
  const Json second = FindRecord(records_, "result", "log_longppl");
  EXPECT_EQ(second["details"]["cache"], "hit");
  EXPECT_EQ(second["value"], first["value"]);
}

// Key tokens chosen elsewhere (evals.longppl.key_tokens): three 100-byte
// texts with known key spans, byte tokens, cut to context_len = seq_len =
// 64. Document 0: characters [10, 30), 20 key tokens; document 1: [0, 5)
// and [50, 70), 4 (token 0 has no prediction) + 14 (cut at 64); document
// 2: [3, 8), 5 tokens, under min_key_tokens (10), skipped.
TEST_F(EvalTaskRunTest, ScoresKeyTokensChosenElsewhere) {
  std::vector<std::string> texts;
  for (char c : {'a', 'b', 'c'}) {
    std::string text;
    for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>(c + i % 20));
    texts.push_back(text);
  }
  const std::vector<Json> spans = {Json::parse("[[10, 30]]"),
                                   Json::parse("[[0, 5], [50, 70]]"),
                                   Json::parse("[[3, 8]]")};
  const fs::path keys = dir_ / "keys.jsonl";
  const fs::path texts_file = dir_ / "texts.jsonl";
  {
    std::ofstream out(keys), out_texts(texts_file);
    for (size_t d = 0; d < texts.size(); ++d) {
      out << Json{{"id", d}, {"text", texts[d]}, {"key_spans", spans[d]}}.dump()
          << "\n";
      out_texts << Json{{"text", texts[d]}}.dump() << "\n";
      std::string slice;
      for (const Json& span : spans[d]) {
        if (!slice.empty()) slice += ";";
        slice += absl::StrCat("[", span[0].get<int>(), ", ", span[1].get<int>(),
                              "]");
      }
      fs::create_directories(dir_ / "slices");
      std::ofstream(dir_ / "slices" / absl::StrCat("slice_", d, ".txt"))
          << slice;
    }
  }
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"] = {{"key_tokens", {{"file", keys.string()}}}};
  absl::Status status = Run(j);
  ASSERT_TRUE(status.ok()) << status;
  const Json pooled = FindRecord(records_, "result", "log_longppl");
  ASSERT_FALSE(pooled.is_null());
  const Json& d = pooled["details"];
  EXPECT_EQ(d["documents"], 2);
  EXPECT_EQ(d["documents_skipped"], 1);
  EXPECT_EQ(d["key_tokens"], 20 + 18);
  EXPECT_EQ(d["key_tokens_selected"], 20 + 18 + 5);
  EXPECT_EQ(d["candidate_tokens"], 3 * 63);
  EXPECT_EQ(d["context_len"], 64);
  EXPECT_EQ(d["aggregation"], "pooled");
  EXPECT_EQ(d["source"], "key_tokens:" + keys.string());
  EXPECT_EQ(pooled["value"], d["log_longppl_pooled"]);
  // Near uniform over 258 tokens; per document is at least pooled.
  EXPECT_NEAR(pooled["value"].get<double>(), std::log(258.0), 0.3);
  EXPECT_GE(d["log_longppl_per_document"].get<double>(),
            d["log_longppl_pooled"].get<double>());

  // The same spans as PKU-ML/LongPPL slice files give the same figure; the
  // per-document aggregation is the other one.
  j["evals"]["longppl"] = {{"key_tokens",
                            {{"slices", (dir_ / "slices").string()},
                             {"texts", texts_file.string()}}},
                           {"aggregation", "per_document"}};
  status = Run(j);
  ASSERT_TRUE(status.ok()) << status;
  const Json per_document = FindRecord(records_, "result", "log_longppl");
  EXPECT_EQ(per_document["details"]["log_longppl_pooled"],
            d["log_longppl_pooled"]);
  EXPECT_EQ(per_document["value"], d["log_longppl_per_document"]);

  // A span outside its text: a permanent error naming the field, the file,
  // the document and the span.
  {
    std::ofstream out(keys);
    out << Json{{"id", "doc-x"}, {"text", "short"}, {"key_spans", {{2, 9}}}}
               .dump()
        << "\n";
  }
  j["evals"]["longppl"] = {{"key_tokens", {{"file", keys.string()}}}};
  absl::Status bad = Run(j);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  const std::vector<std::string> parts = {
      "evals.longppl.key_tokens: ", keys.string() + ":1", "doc-x",
      "key_spans[0] = [2, 9]"};
  for (const std::string& part : parts) {
    EXPECT_NE(std::string(bad.message()).find(part), std::string::npos)
        << part << " not in: " << bad.message();
  }
}

// `documents` packs one kind of the run's held-out documents: long ones are
// exactly one sequence each (seq_len + 1 tokens), short ones 16 tokens.
TEST_F(EvalTaskRunTest, ValLossDocumentsPickOneKindOfHeldOutDocuments) {
  Json j = Task();
  j["evals"].erase("longppl");
  j["evals"]["val_loss"]["documents"] = "long";
  ASSERT_TRUE(Run(j).ok());
  Json val = FindRecord(records_, "result", "val_loss");
  ASSERT_FALSE(val.is_null());
  EXPECT_EQ(val["details"]["sequences"], 16);
  EXPECT_EQ(val["details"]["documents"], 16);
  EXPECT_NE(
      val["details"]["source"].get<std::string>().find("long documents only"),
      std::string::npos)
      << val["details"]["source"];

  j["evals"]["val_loss"]["documents"] = "short";
  ASSERT_TRUE(Run(j).ok());
  val = FindRecord(records_, "result", "val_loss");
  EXPECT_EQ(val["details"]["sequences"], 16);
  EXPECT_GT(val["details"]["documents"].get<int64_t>(), 3 * 16);

  j["evals"]["val_loss"]["documents"] = "shorts";
  absl::Status bad = Run(j);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.message()).find("evals.val_loss.documents"),
            std::string::npos)
      << bad;
  j["evals"]["val_loss"]["documents"] = "short";
  j["evals"]["val_loss"]["data"]["jsonl"] = (dir_ / "any.jsonl").string();
  bad = Run(j);
  EXPECT_NE(std::string(bad.message()).find("evals.val_loss.documents"),
            std::string::npos)
      << bad;
}

TEST_F(EvalTaskRunTest, AMissingOrCorruptCheckpointIsPermanent) {
  Json j = Task();
  j["checkpoint"] = (dir_ / "nope.ckpt").string();
  absl::Status s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(train::ExitCodeFor(s), 2);
  EXPECT_EQ(std::string(s.message()).rfind("checkpoint:", 0), 0u) << s;

  // Flip a byte of the payload.
  {
    std::fstream f(model_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x5a');
  }
  s = Run(Task());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(train::ExitCodeFor(s), 2);
  EXPECT_NE(std::string(s.message()).find("corrupt"), std::string::npos) << s;
}

TEST_F(EvalTaskRunTest, AReferenceWithAnotherTokenizerIsRefused) {
  const std::string other = (dir_ / "other" / "big-vocab.ckpt").string();
  WriteTinyCheckpoint(other, TinyConfig("full", 512), "byte");
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["reference"]["checkpoint"] = other;
  absl::Status s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message()).find("vocab/tokenizer differ"),
            std::string::npos);

  // Same vocabulary size, another tokenizer.
  WriteTinyCheckpoint(other, TinyConfig("full"), "sentencepiece:0123abcd");
  s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message()).find("sentencepiece:0123abcd"),
            std::string::npos);
  EXPECT_EQ(train::ExitCodeFor(s), 2);
  // --check finds it from the headers alone.
  auto task = Parse(j);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(CheckEvalTask(*task).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(EvalTaskRunTest, NoDocumentLongEnoughGivesTheLongestAndK) {
  const fs::path jsonl = dir_ / "short.jsonl";
  std::ofstream(jsonl) << "{\"text\": \"tiny doc\"}\n"
                       << "{\"text\": \"a short document\"}\n";
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["data"] = {{"jsonl", jsonl.string()}};
  absl::Status s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(train::ExitCodeFor(s), 2);
  const std::string m(s.message());
  EXPECT_NE(m.find("has 16 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("trunc_len + 1 = 17"), std::string::npos) << m;
}

TEST_F(EvalTaskRunTest, AContextAboveTheTrainedLengthNeedsAllowExtrapolation) {
  // The evaluated model has full RoPE attention.
  WriteTinyCheckpoint(model_, TinyConfig("full"), "byte", 1, 10);
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["context_len"] = 128;  // seq_len is 64
  absl::Status s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message()).find("RoPE"), std::string::npos);
  EXPECT_EQ(std::string(s.message()).rfind("evals.longppl.context_len:", 0),
            0u);
  auto task = Parse(j);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(CheckEvalTask(*task).status().code(),
            absl::StatusCode::kFailedPrecondition);

  j["allow_extrapolation"] = true;
  j["evals"]["longppl"]["min_key_tokens"] = 0;
  task = Parse(j);
  ASSERT_TRUE(task.ok());
  EXPECT_TRUE(CheckEvalTask(*task).ok());
  // A hybrid whose full layers use no RoPE extrapolates without being asked.
  WriteTinyCheckpoint(model_, TinyConfig("swa-16-nope"), "byte", 1, 10);
  j["allow_extrapolation"] = false;
  task = Parse(j);
  ASSERT_TRUE(task.ok());
  EXPECT_TRUE(CheckEvalTask(*task).ok()) << CheckEvalTask(*task).status();
}

TEST_F(EvalTaskRunTest, LongPplWithoutEnoughKeyTokensIsRecordedAsNull) {
  // The paper's thresholds on an untrained reference: no document keeps 10
  // key tokens, so log(LongPPL) is undefined; the task still succeeds, with
  // a null result that says why, and the validation loss is measured.
  Json j = Task();
  j["evals"]["longppl"]["min_key_tokens"] = 1000000;
  const absl::Status run = Run(j);
  ASSERT_TRUE(run.ok()) << run;
  const Json longppl = FindRecord(records_, "result", "log_longppl");
  ASSERT_FALSE(longppl.is_null());
  EXPECT_TRUE(longppl["value"].is_null()) << longppl.dump();
  EXPECT_EQ(longppl["details"]["documents"], 0);
  EXPECT_NE(
      longppl["details"]["not_measured"].get<std::string>().find("key tokens"),
      std::string::npos)
      << longppl.dump();
  EXPECT_FALSE(FindRecord(records_, "warning").is_null());
  EXPECT_FALSE(FindRecord(records_, "result", "val_loss").is_null());
}

TEST_F(EvalTaskRunTest, NiahReportsAccuracyOverallAndPerKindWithCells) {
  Json j = Task();
  j["evals"] = {{"niah",
                 {{"kinds", {"single"}},
                  {"context_lengths", {48, 64}},
                  {"depths", {0.25, 0.75}},
                  {"samples", 3}}}};
  const absl::Status run = Run(j);
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_EQ(records_.front()["evals"], Json({"niah"}));
  const Json all = FindRecord(records_, "result", "niah_acc");
  ASSERT_FALSE(all.is_null());
  const double accuracy = all["value"].get<double>();
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  // 1 kind x 2 lengths x 2 depths, 3 samples each.
  ASSERT_EQ(all["details"]["cells"].size(), 4u) << all.dump();
  int64_t samples = 0, correct = 0;
  for (const Json& cell : all["details"]["cells"]) {
    samples += cell["samples"].get<int64_t>();
    correct += cell["correct"].get<int64_t>();
  }
  EXPECT_EQ(samples, 12);
  EXPECT_DOUBLE_EQ(accuracy, static_cast<double>(correct) / 12.0);
  const Json single = FindRecord(records_, "result", "niah_acc/single");
  ASSERT_FALSE(single.is_null());
  EXPECT_DOUBLE_EQ(single["value"].get<double>(), accuracy);
  EXPECT_EQ(single["details"]["cells"].size(), 4u) << single.dump();

  // A length too short for the kind names the field and the minimum.
  j["evals"]["niah"]["kinds"] = {"passkey"};
  absl::Status short_length = Run(j);
  EXPECT_EQ(train::ExitCodeFor(short_length), 2) << short_length;
  EXPECT_NE(std::string(short_length.message())
                .find("evals.niah: context_lengths: 48 tokens cannot hold"),
            std::string::npos)
      << short_length;
  j["evals"]["niah"]["kinds"] = {"single"};

  // A haystack that is neither noise nor synthetic names the field.
  j["evals"]["niah"]["haystack"] = "lorem";
  absl::Status s = Run(j);
  EXPECT_EQ(train::ExitCodeFor(s), 2) << s;
  EXPECT_NE(std::string(s.message()).find("evals.niah.haystack"),
            std::string::npos)
      << s;
}

TEST_F(EvalTaskRunTest, DefaultNiahKindsThatDoNotFitAreSkippedWithAWarning) {
  // 48 tokens hold a single needle (37) but not a passkey prompt (248).
  Json j = Task();
  j["evals"] = {{"niah", {{"context_lengths", {48}}, {"samples", 2}}}};
  const absl::Status run = Run(j);
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_FALSE(FindRecord(records_, "result", "niah_acc/single").is_null());
  EXPECT_TRUE(FindRecord(records_, "result", "niah_acc/passkey").is_null());
  bool warned = false;
  for (const Json& r : records_) {
    if (r["type"] == "warning" &&
        r["message"].get<std::string>().find("kind 'passkey' skipped") !=
            std::string::npos) {
      warned = true;
    }
  }
  EXPECT_TRUE(warned);

  // Too short for every kind: recorded as null with the reason.
  j["evals"]["niah"]["context_lengths"] = {8};
  ASSERT_TRUE(Run(j).ok());
  const Json none = FindRecord(records_, "result", "niah_acc");
  ASSERT_FALSE(none.is_null());
  EXPECT_TRUE(none["value"].is_null()) << none.dump();
}

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

// A Hugging Face Llama as the reference (reference.hf_dir): a tiny random
// one of the byte vocabulary, written as config.json + model.safetensors.
TEST_F(EvalTaskRunTest, ALlamaReferenceSelectsKeyTokensAndIsCached) {
  model::llama::testing::TinyLlama llama;
  llama.vocab = 258;
  const std::string llama_dir = (dir_ / "llama").string();
  llama.Write(llama_dir);
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["reference"] = {{"hf_dir", llama_dir}};
  j["evals"]["longppl"]["min_key_tokens"] = 0;
  j["evals"]["longppl"]["alpha"] = -100.0;  // every candidate is key
  j["evals"]["longppl"]["beta"] = -100.0;
  j["evals"]["longppl"]["context_len"] = 128;
  j["allow_extrapolation"] = true;
  ASSERT_TRUE(Run(j).ok());
  const Json first = FindRecord(records_, "result", "log_longppl");
  ASSERT_FALSE(first.is_null());
  const Json& d = first["details"];
  EXPECT_EQ(d["cache"], "miss");
  EXPECT_EQ(d["reference"]["hf_dir"], llama_dir);
  EXPECT_EQ(d["reference"]["weights"], "model.safetensors");
  EXPECT_EQ(d["reference"]["dtype"], "fp32");
  EXPECT_EQ(d["reference"]["device"], "cpu");
  EXPECT_EQ(d["reference"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(d["key_tokens"], d["candidate_tokens"]);
  EXPECT_GT(d["key_tokens"].get<int64_t>(), 0);
  // No tokenizer.json: only the sizes were compared, and it says so.
  bool warned = false;
  for (const Json& r : records_) {
    if (r["type"] == "warning" &&
        r.dump().find("has no tokenizer.json") != std::string::npos) {
      warned = true;
    }
  }
  EXPECT_TRUE(warned);
  // The same weights again: the selection comes from the cache; other
  // weights (another seed) miss it.
  ASSERT_TRUE(Run(j).ok());
  EXPECT_EQ(FindRecord(records_, "result", "log_longppl")["details"]["cache"],
            "hit");
  model::llama::testing::TinyLlama other = llama;
  other.seed = 8;
  other.Generate();
  other.Write(llama_dir);
  ASSERT_TRUE(Run(j).ok());
  EXPECT_EQ(FindRecord(records_, "result", "log_longppl")["details"]["cache"],
            "miss");

  // --check reads the config and the tensors without the values.
  auto task = Parse(j);
  ASSERT_TRUE(task.ok());
  auto plan = CheckEvalTask(*task);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Json p = Json::parse(*plan);
  EXPECT_EQ(p["evals"]["longppl"]["reference"]["hf_dir"], llama_dir);
  EXPECT_EQ(p["evals"]["longppl"]["reference"]["parameters"],
            model::llama::LlamaParameterCount(
                *model::llama::ReadLlamaConfig(llama_dir)));
}

TEST_F(EvalTaskRunTest, ALlamaOfAnotherVocabularyIsRefusedByName) {
  model::llama::testing::TinyLlama llama;  // 37 tokens, not the byte 258
  const std::string llama_dir = (dir_ / "llama37").string();
  llama.Write(llama_dir);
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["reference"] = {{"hf_dir", llama_dir}};
  absl::Status s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(std::string(s.message())
                .find("evals.longppl.reference.hf_dir: vocab/tokenizer "
                      "differ: the Llama in " +
                      llama_dir + " has a vocabulary of 37 tokens"),
            std::string::npos)
      << s;
  EXPECT_EQ(train::ExitCodeFor(s), 2);
  auto task = Parse(j);
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(CheckEvalTask(*task).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A directory without weights is named too.
  fs::remove(llama_dir + "/model.safetensors");
  s = Run(j);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_EQ(
      std::string(s.message()).rfind("evals.longppl.reference.hf_dir: ", 0), 0u)
      << s;
}

// A Llama of another tokenizer (Llama 3's 128256 ids, its tokenizer.json
// from the shared data) selects for a byte-level model: its key tokens
// pass as character ranges.
TEST_F(EvalTaskRunTest, ALlamaOfAnotherTokenizerSelectsAcrossTokenizers) {
  const std::string llama3 =
      data::testing::SharedDataPath("tokenizers/llama3/tokenizer.json");
  if (llama3.empty()) {
    GTEST_SKIP() << "needs " << data::testing::SharedDataDir()
                 << "/tokenizers/llama3; set HLAB_SHARED_DIR";
  }
  model::llama::testing::TinyLlama llama;
  llama.vocab = 128256;
  llama.d = 8;
  llama.heads = 2;
  llama.kv_heads = 1;
  llama.head_dim = 4;
  llama.ffn = 16;
  llama.layers = 1;
  const std::string llama_dir = (dir_ / "llama3").string();
  llama.Write(llama_dir);
  fs::copy_file(llama3, llama_dir + "/tokenizer.json");
  fs::copy_file(fs::path(llama3).parent_path() / "tokenizer_config.json",
                llama_dir + "/tokenizer_config.json");
  Json j = Task();
  j["evals"].erase("val_loss");
  j["evals"]["longppl"]["reference"] = {{"hf_dir", llama_dir}};
  j["evals"]["longppl"]["min_key_tokens"] = 0;
  j["evals"]["longppl"]["alpha"] = -100.0;  // every candidate is key
  j["evals"]["longppl"]["beta"] = -100.0;
  j["evals"]["longppl"]["trunc_len"] = 4;  // Llama tokens
  j["evals"]["longppl"]["sliding_window"] = 2;
  j["evals"]["longppl"]["context_len"] = 128;
  j["allow_extrapolation"] = true;
  const absl::Status status = Run(j);
  ASSERT_TRUE(status.ok()) << status;
  const Json r = FindRecord(records_, "result", "log_longppl");
  ASSERT_FALSE(r.is_null());
  const Json& d = r["details"];
  EXPECT_EQ(d["reference"]["tokenizer"].get<std::string>().rfind("hf:", 0), 0u)
      << d.dump();
  // Every byte after the Llama's first 4 tokens is key: as many key tokens
  // as candidates, and at least one document scored.
  EXPECT_GT(d["key_tokens"].get<int64_t>(), 0) << d.dump();
  EXPECT_EQ(d["key_tokens"], d["candidate_tokens"]) << d.dump();
  EXPECT_GE(d["documents"].get<int64_t>(), 1) << d.dump();
  EXPECT_TRUE(r["value"].is_number()) << r.dump();
}

TEST_F(EvalTaskRunTest, CheckPrintsTheResolvedPlan) {
  auto task = Parse(Task());
  ASSERT_TRUE(task.ok());
  auto plan = CheckEvalTask(*task);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Json p = Json::parse(*plan);
  EXPECT_EQ(p["checkpoint_step"], 10);
  EXPECT_EQ(p["evals"]["val_loss"]["tokens"], 1000);
  EXPECT_EQ(p["evals"]["longppl"]["trunc_len"], 16);
  EXPECT_EQ(p["evals"]["longppl"]["reference"]["step"], 20);
}

}  // namespace
}  // namespace hlab::eval
