// EVAL tasks: parsing (every field named in its error), and running on tiny
// checkpoints written by the test: results, the key-token cache across
// runs, and each bad input the contract makes a permanent failure.
#include "eval/eval_task.h"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "eval_task_fixture.h"
#include "eval_test_util.h"
#include "gtest/gtest.h"
#include "train/trainer.h"
#include "train/training_data.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using task::EvalTask;
using task::EvalTaskFromJson;
using task::ExampleEvalTaskJson;
using testing::ContractTask;
using testing::EvalTaskRunTest;
using testing::FindRecord;
using testing::Parse;
using testing::TinyConfig;
using testing::WriteTinyCheckpoint;

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

TEST_F(EvalTaskRunTest, DefaultNiahKindsThatDoNotFitAreSkippedWithTheReason) {
  // 48 tokens hold a single needle (37) but not a passkey prompt (248).
  Json j = Task();
  j["evals"] = {{"niah", {{"context_lengths", {48}}, {"samples", 2}}}};
  const absl::Status run = Run(j);
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_FALSE(FindRecord(records_, "result", "niah_acc/single").is_null());
  EXPECT_TRUE(FindRecord(records_, "result", "niah_acc/passkey").is_null());
  // The reason is in niah_acc's details, not a warning: the kind was not
  // asked for.
  const Json acc = FindRecord(records_, "result", "niah_acc");
  ASSERT_FALSE(acc.is_null());
  const std::string reason =
      acc["details"]["skipped_kinds"].value("passkey", "");
  EXPECT_NE(reason.find("cannot hold the needles"), std::string::npos)
      << acc.dump();
  EXPECT_FALSE(acc["details"]["skipped_kinds"].contains("single"));
  for (const Json& r : records_) EXPECT_NE(r["type"], "warning") << r.dump();

  // Too short for every kind: recorded as null with the reason.
  j["evals"]["niah"]["context_lengths"] = {8};
  ASSERT_TRUE(Run(j).ok());
  const Json none = FindRecord(records_, "result", "niah_acc");
  ASSERT_FALSE(none.is_null());
  EXPECT_TRUE(none["value"].is_null()) << none.dump();
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
