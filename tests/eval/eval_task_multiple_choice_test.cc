// EVAL tasks of evals.multiple_choice (eval/multiple_choice.h) on a tiny
// checkpoint: the bundled example runs and is recorded as mc_acc/<name> and
// mc_acc_norm/<name>; bad task files and questions longer than the model's
// context end the task, naming the file and line, before any result.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_task.h"
#include "eval_task_fixture.h"
#include "eval_test_util.h"
#include "gtest/gtest.h"

namespace hlab::eval {
namespace {

using Json = nlohmann::json;
using testing::EvalTaskRunTest;
using testing::FindRecord;
using testing::Parse;

const std::string kExamples = std::string(HLAB_REPO_ROOT) + "/examples/eval";

class MultipleChoiceRunTest : public EvalTaskRunTest {
 protected:
  // val_loss and the bundled example, zero-shot.
  Json McTask() {
    Json j = Task();
    j["evals"].erase("longppl");
    j["evals"]["multiple_choice"] = {
        {"tasks",
         {{{"file", kExamples + "/simple_qa.jsonl"},
           {"fewshot_file", kExamples + "/simple_qa_fewshot.jsonl"}}}}};
    return j;
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  int Results() const {
    int n = 0;
    for (const Json& r : records_) n += r.value("type", "") == "result";
    return n;
  }
};

TEST_F(MultipleChoiceRunTest, TheBundledExampleIsRecordedPerTask) {
  ASSERT_TRUE(Run(McTask()).ok()) << records_.back();
  EXPECT_EQ(records_.front()["evals"], Json({"val_loss", "multiple_choice"}));
  for (const std::string metric :
       {"mc_acc/simple_qa", "mc_acc_norm/simple_qa"}) {
    const Json r = FindRecord(records_, "result", metric);
    ASSERT_FALSE(r.is_null()) << metric;
    const Json& d = r["details"];
    EXPECT_EQ(d["n"], 20) << metric;
    EXPECT_EQ(d["num_fewshot"], 0);
    EXPECT_EQ(d["sequences"], 80);
    EXPECT_EQ(d["longest_tokens"], 63);  // the longest question, in bytes
    EXPECT_EQ(d["normalization"], "characters");
    const std::string value = metric == "mc_acc/simple_qa" ? "acc" : "acc_norm";
    EXPECT_EQ(r["value"], d[value]);
    EXPECT_DOUBLE_EQ(
        r["value"].get<double>() * 20,
        d[value == "acc" ? "correct" : "correct_norm"].get<double>());
    const double p = r["value"].get<double>();
    EXPECT_DOUBLE_EQ(d[value + "_stderr"].get<double>(),
                     std::sqrt(p * (1 - p) / 19));
  }
  // --check reads and encodes the files too.
  auto task = Parse(McTask());
  ASSERT_TRUE(task.ok());
  auto plan = CheckEvalTask(*task);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Json mc = Json::parse(*plan)["evals"]["multiple_choice"];
  EXPECT_EQ(mc["tasks"][0]["questions"], 20);
  EXPECT_EQ(mc["tasks"][0]["longest_tokens"], 63);
  EXPECT_EQ(mc["max_tokens"], 64);
}

TEST_F(MultipleChoiceRunTest, FewShotContextsBeyondSeqLenNeedExtrapolation) {
  Json j = McTask();
  j["evals"]["multiple_choice"]["tasks"][0]["num_fewshot"] = 2;
  j["evals"]["multiple_choice"]["tasks"][0]["limit"] = 3;
  const absl::Status refused = Run(j);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.message())
                .find("evals.multiple_choice.tasks[0]: " + kExamples +
                      "/simple_qa.jsonl:1: the context and choices[0] take "),
            std::string::npos)
      << refused;
  EXPECT_NE(std::string(refused.message())
                .find("more than the model's context of 64 tokens"),
            std::string::npos)
      << refused;
  EXPECT_EQ(Results(), 0);  // not even val_loss, which runs first

  j["allow_extrapolation"] = true;  // the tiny model is SWA(16)
  ASSERT_TRUE(Run(j).ok()) << records_.back();
  const Json r = FindRecord(records_, "result", "mc_acc/simple_qa");
  EXPECT_EQ(r["details"]["n"], 3);
  EXPECT_EQ(r["details"]["num_fewshot"], 2);
  EXPECT_EQ(r["details"]["fewshot_pool"], 5);
  EXPECT_GT(r["details"]["longest_tokens"].get<int64_t>(), 64);
}

TEST_F(MultipleChoiceRunTest, BadTaskFilesEndTheTaskBeforeAnyResult) {
  const std::string ok =
      R"({"context": "2 + 2 =", "choices": ["3", "4"], "gold": 1})"
      "\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {ok + R"({"context": "1 + 1 =", "choices": ["2", "3"], "gold": 2})",
       ":2: gold: index 2 is out of range: there are 2 choices"},
      {ok + ok + R"({"context": "1 + 1 =", "choices": [], "gold": 0})",
       ":3: choices: no choices"},
      {ok + R"({"context": ")" + std::string(70, 'x') +
           R"(", "choices": ["a"], "gold": 0})",
       ":2: the context and choices[0] take 72 tokens, more than the "
       "model's context of 64 tokens"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string file =
        Write("bad" + std::to_string(i) + ".jsonl", cases[i].first);
    Json j = McTask();
    j["evals"]["multiple_choice"]["tasks"][0]["file"] = file;
    const absl::Status s = Run(j);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << i;
    EXPECT_NE(
        std::string(s.message())
            .find("evals.multiple_choice.tasks[0]: " + file + cases[i].second),
        std::string::npos)
        << s;
    EXPECT_EQ(Results(), 0) << i;
    auto task = Parse(j);
    ASSERT_TRUE(task.ok());
    EXPECT_EQ(CheckEvalTask(*task).status().message(), s.message()) << i;
  }
}

}  // namespace
}  // namespace hlab::eval
