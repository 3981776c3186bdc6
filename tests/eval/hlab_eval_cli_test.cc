// hlab-eval as the worker runs it: records on --record-fd, exit codes,
// --check and --example-task, on a tiny checkpoint written by the test.
#include <sys/wait.h>

#include <fstream>

#include "eval_test_util.h"
#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using hlab::eval::testing::FindRecord;
using hlab::eval::testing::ParseRecords;

struct Result {
  int exit_code = -1;
  std::string records, out, err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HlabEvalCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = hlab::eval::testing::TestDir();
    checkpoint_ = (dir_ / "run" / "step-0000000010.ckpt").string();
    hlab::eval::testing::WriteTinyCheckpoint(
        checkpoint_, hlab::eval::testing::TinyConfig("swa-16"));
  }
  void TearDown() override { fs::remove_all(dir_); }

  Json Task() {
    return {{"kind", "eval"},
            {"task_id", "t-cli"},
            {"run_id", "r-cli"},
            {"step", 10},
            {"checkpoint", checkpoint_},
            {"config", Json::parse(R"({
               "model": {"arch": "swa-16", "d_model": 32, "n_layers": 2,
                         "n_heads": 2, "n_kv_heads": 1, "vocab_size": 258},
               "seq_len": 32, "batch_tokens": 256, "budget_tokens": 25600})")},
            {"evals", {{"val_loss", {{"tokens", 320}}}}},
            {"threads", 1}};
  }

  // Runs hlab-eval with records on fd 3.
  Result Run(const std::string& args) {
    const std::string cmd = std::string(HLAB_EVAL_BIN) + " " + args +
                            " --record-fd 3 3> " + (dir_ / "records").string() +
                            " > " + (dir_ / "out").string() + " 2> " +
                            (dir_ / "err").string();
    const int status = std::system(cmd.c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.records = ReadFile(dir_ / "records");
    r.out = ReadFile(dir_ / "out");
    r.err = ReadFile(dir_ / "err");
    return r;
  }

  Result RunTask(const Json& task, const std::string& extra = "") {
    const fs::path path = dir_ / "task.json";
    std::ofstream(path) << task.dump(2);
    return Run("--task " + path.string() + " " + extra);
  }

  fs::path dir_;
  std::string checkpoint_;
};

TEST_F(HlabEvalCliTest, WritesStartResultAndDoneRecordsToTheRecordFd) {
  const Result r = RunTask(Task());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const auto records = ParseRecords(r.records);
  ASSERT_EQ(records.size(), 3u) << r.records;
  EXPECT_EQ(records[0]["type"], "start");
  EXPECT_EQ(records[0]["task_id"], "t-cli");
  const Json result = FindRecord(records, "result", "val_loss");
  ASSERT_FALSE(result.is_null());
  EXPECT_EQ(result["step"], 10);
  EXPECT_EQ(result["details"]["tokens"], 320);
  EXPECT_TRUE(std::isfinite(result["value"].get<double>()));
  EXPECT_EQ(records[2]["type"], "done");
}

TEST_F(HlabEvalCliTest, BadTasksExitTwoWithAnErrorRecordNamingTheField) {
  Json j = Task();
  j["evals"]["val_loss"]["tokenz"] = 5;
  Result r = RunTask(j);
  EXPECT_EQ(r.exit_code, 2);
  Json error = FindRecord(ParseRecords(r.records), "error");
  ASSERT_FALSE(error.is_null()) << r.records;
  EXPECT_EQ(error["exit_code"], 2);
  EXPECT_NE(error["message"].get<std::string>().find("evals.val_loss.tokenz"),
            std::string::npos);
  EXPECT_NE(r.err.find("evals.val_loss.tokenz"), std::string::npos);

  j = Task();
  j["checkpoint"] = (dir_ / "missing.ckpt").string();
  r = RunTask(j);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.ckpt"), std::string::npos);

  r = Run("--task " + (dir_ / "no-such-task.json").string());
  EXPECT_EQ(r.exit_code, 2);
}

// The bundled multiple-choice example through the binary; a task file with
// a gold index out of range exits 2 naming its file and line, and records
// no result.
TEST_F(HlabEvalCliTest, RunsTheBundledMultipleChoiceExample) {
  Json j = Task();
  j["config"]["seq_len"] = 64;  // the example's longest question: 63 bytes
  j["evals"] = {{"multiple_choice",
                 {{"tasks",
                   {{{"file", std::string(HLAB_REPO_ROOT) +
                                  "/examples/eval/simple_qa.jsonl"}}}}}}};
  Result r = RunTask(j);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto records = ParseRecords(r.records);
  for (const char* metric : {"mc_acc/simple_qa", "mc_acc_norm/simple_qa"}) {
    const Json result = FindRecord(records, "result", metric);
    ASSERT_FALSE(result.is_null()) << r.records;
    EXPECT_EQ(result["details"]["n"], 20);
  }

  const std::string bad = (dir_ / "bad.jsonl").string();
  std::ofstream(bad) << R"({"context": "a", "choices": ["x"], "gold": 0})"
                     << "\n"
                     << R"({"context": "b", "choices": ["x", "y"], "gold": 5})"
                     << "\n";
  j["evals"]["multiple_choice"]["tasks"][0]["file"] = bad;
  r = RunTask(j);
  EXPECT_EQ(r.exit_code, 2);
  records = ParseRecords(r.records);
  const Json error = FindRecord(records, "error");
  ASSERT_FALSE(error.is_null()) << r.records;
  EXPECT_NE(error["message"].get<std::string>().find(
                bad + ":2: gold: index 5 is out of range"),
            std::string::npos)
      << error;
  EXPECT_TRUE(FindRecord(records, "result").is_null()) << r.records;
}

TEST_F(HlabEvalCliTest, CheckPrintsThePlanAndEvaluatesNothing) {
  const Result r = RunTask(Task(), "--check");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json plan = Json::parse(r.out);
  EXPECT_EQ(plan["checkpoint_step"], 10);
  EXPECT_EQ(plan["evals"]["val_loss"]["tokens"], 320);
  EXPECT_TRUE(FindRecord(ParseRecords(r.records), "result").is_null());
}

TEST_F(HlabEvalCliTest, TheExampleTaskIsATemplateThatNamesMissingFiles) {
  Result r = Run("--example-task");
  ASSERT_EQ(r.exit_code, 0);
  const Json example = Json::parse(r.out);
  EXPECT_EQ(example["kind"], "eval");
  r = RunTask(example, "--check");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/path/to/run"), std::string::npos) << r.err;
}

}  // namespace
