// hlab-eval's evaluations on real text from the shared data directory
// ($HLAB_SHARED_DIR/data, default <repo>/../shared/data); each test skips
// with a message when its file is absent.
//   * validation loss on C4 (a JSONL file imported with the byte tokenizer):
//     every byte of every document is scored exactly once;
//   * log(LongPPL) on GovReport with a small reference trained in the test
//     on GovReport itself (prepared with data/import.h).
#include <fstream>

#include "data/import.h"
#include "eval/eval_task.h"
#include "eval_test_util.h"
#include "gtest/gtest.h"
#include "task/run_config.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using task::EvalTask;
using task::EvalTaskFromJson;
using testing::FindRecord;

class RealDataTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::TestDir(); }
  void TearDown() override { fs::remove_all(dir_); }

  // A task on `checkpoint` with byte-level synthetic run config.
  Json Task(const std::string& checkpoint, int64_t seq_len) {
    return {{"checkpoint", checkpoint},
            {"config",
             {{"format", "hlab.run.v1"},
              {"model", Json::parse(model::ModelConfigToJson(
                            testing::TinyConfig("swa-16")))},
              {"seq_len", seq_len},
              {"data",
               {{"source", "synthetic"},
                {"seed", 0},
                {"corpus_version", task::kSyntheticCorpusVersion}}}}},
            {"evals", Json::object()},
            {"cache_dir", (dir_ / "cache").string()},
            {"threads", 1}};
  }

  absl::StatusOr<std::vector<Json>> Run(const Json& j) {
    auto task = EvalTaskFromJson(j.dump());
    if (!task.ok()) return task.status();
    std::vector<Json> records;
    const absl::Status s =
        RunEvalTask(*task, [&](const Json& r) { records.push_back(r); });
    if (!s.ok()) return s;
    return records;
  }

  fs::path dir_;
};

TEST_F(RealDataTest, C4ValidationLossScoresEveryByteOfEveryDocument) {
  const std::string c4 = testing::SharedDataPath(
      "c4/dualguard_c4_realnewslike_val_200prefix.jsonl");
  if (c4.empty()) GTEST_SKIP() << "C4 sample not found; set HLAB_SHARED_DIR";
  int64_t bytes = 0, documents = 0;
  {
    std::ifstream in(c4);
    std::string line;
    while (std::getline(in, line)) {
      const Json j = Json::parse(line);
      const int64_t n =
          static_cast<int64_t>(j["prompt"].get<std::string>().size() +
                               j["response"].get<std::string>().size());
      bytes += n;
      documents += n > 0;
    }
  }
  ASSERT_EQ(documents, 200);
  const std::string checkpoint = (dir_ / "m" / "model.ckpt").string();
  testing::WriteTinyCheckpoint(checkpoint, testing::TinyConfig("swa-16"));
  Json j = Task(checkpoint, 128);
  j["evals"]["val_loss"] = {
      {"tokens", 100000000},
      {"data", {{"jsonl", c4}, {"text_field", "prompt+response"}}}};
  auto records = Run(j);
  ASSERT_TRUE(records.ok()) << records.status();
  const Json r = FindRecord(*records, "result", "val_loss");
  ASSERT_FALSE(r.is_null());
  // Each document: separator + its bytes; every byte is predicted once.
  EXPECT_EQ(r["details"]["tokens"], bytes);
  EXPECT_EQ(r["details"]["documents"], documents);
  EXPECT_EQ(r["details"]["source"], "jsonl:" + c4);
  // An untrained byte-level model: close to uniform over 258 ids.
  EXPECT_NEAR(r["value"].get<double>(), std::log(258.0), 0.3);
  // The import is cached: a second run reads the prepared copy.
  EXPECT_TRUE(fs::exists(dir_ / "cache" / "datasets"));
  auto again = Run(j);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(FindRecord(*again, "result", "val_loss")["value"], r["value"]);
}

TEST_F(RealDataTest, GovReportLongPplWithAReferenceTrainedOnGovReport) {
  const std::string gov =
      testing::SharedDataPath("govreport/gov_reports.jsonl");
  if (gov.empty()) GTEST_SKIP() << "GovReport not found; set HLAB_SHARED_DIR";
  data::PrepareOptions prepare;
  prepare.inputs = {gov};
  prepare.output_dir = (dir_ / "gov").string();
  prepare.held_out_fraction = 0.2;
  prepare.threads = 1;
  ASSERT_TRUE(data::PrepareDataset(prepare).ok());
  // The reference: full attention, trained briefly on GovReport.
  auto task = task::TrainTaskFromJson(R"({
    "model": {"arch": "full", "d_model": 32, "n_layers": 2, "n_heads": 2,
              "n_kv_heads": 1, "vocab_size": 258},
    "seq_len": 256, "batch_tokens": 2048, "budget_tokens": 122880,
    "schedule": {"warmup_steps": 5}, "threads": 1,
    "eval": {"sequences": 0}, "log_every_steps": 100})");
  ASSERT_TRUE(task.ok()) << task.status();
  task->data.source = "prepared";
  task->data.long_fraction = 1.0;  // every report is longer than seq_len
  task->data.long_dir = task->data.short_dir = prepare.output_dir;
  task->checkpoint.dir = (dir_ / "reference").string();
  const std::string reference = testing::Train(*task);
  ASSERT_FALSE(reference.empty());
  const auto meta = train::ReadCheckpointMeta(reference);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->tokenizer, "byte");  // recorded by the trainer

  // The evaluated model: the reference itself (its own key tokens).
  Json j = Task(reference, 256);
  j["config"]["model"] = Json::parse(meta->model_config);
  // A reference this small gains little from long context (with the
  // paper's alpha 2 it selects nothing): key tokens here are those the long
  // context helps at all (LSD > 0) and that it predicts (LCL > -4).
  j["evals"]["longppl"] = {{"reference", {{"checkpoint", reference}}},
                           {"alpha", 0.0},
                           {"beta", -4.0},
                           {"min_key_tokens", 1},
                           {"data", {{"jsonl", gov}}}};
  auto records = Run(j);
  ASSERT_TRUE(records.ok()) << records.status();
  const Json r = FindRecord(*records, "result", "log_longppl");
  ASSERT_FALSE(r.is_null());
  const Json& d = r["details"];
  EXPECT_EQ(
      d["documents"].get<int64_t>() + d["documents_skipped"].get<int64_t>(),
      10);  // all ten reports are longer than K + 1
  EXPECT_EQ(d["candidate_tokens"], 10 * (256 - 64));
  EXPECT_GT(d["key_tokens"].get<int64_t>(), 0);
  EXPECT_FALSE(d.contains("key_token_precision"));  // not synthetic
  // Key tokens are ones the full context makes likely: LCL > beta, so the
  // reference's own NLL on them is below 4.
  EXPECT_LT(r["value"].get<double>(), 4.0);
  EXPECT_GT(r["value"].get<double>(), 0.0);
  EXPECT_EQ(d["cache"], "miss");

  // An untrained model on the same key tokens (read from the cache) does
  // far worse: near uniform over 258 byte ids.
  const std::string untrained = (dir_ / "untrained" / "model.ckpt").string();
  testing::WriteTinyCheckpoint(untrained, testing::TinyConfig("full"));
  j["checkpoint"] = untrained;
  j["config"]["model"] =
      Json::parse(model::ModelConfigToJson(testing::TinyConfig("full")));
  auto again = Run(j);
  ASSERT_TRUE(again.ok()) << again.status();
  const Json u = FindRecord(*again, "result", "log_longppl");
  EXPECT_EQ(u["details"]["cache"], "hit");
  EXPECT_EQ(u["details"]["key_tokens"], d["key_tokens"]);
  EXPECT_NEAR(u["value"].get<double>(), std::log(258.0), 0.3);
  EXPECT_GT(u["value"].get<double>(), r["value"].get<double>() + 1.0);
}

}  // namespace
}  // namespace hlab::eval
