#include "task/train_task.h"

#include <string>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "task/train_plan.h"

namespace hlab::task {
namespace {

using Json = nlohmann::json;

Json BaseTask() {
  return Json::parse(R"({
    "model": {"arch": "swa-16", "d_model": 32, "n_layers": 2, "n_heads": 2,
              "n_kv_heads": 1, "vocab_size": 258},
    "seq_len": 32, "batch_tokens": 256, "budget_tokens": 5120,
    "schedule": {"warmup_steps": 2}
  })");
}

std::string ErrorOf(const Json& j) {
  auto task = TrainTaskFromJson(j.dump());
  EXPECT_FALSE(task.ok()) << j.dump();
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(task.status().message());
}

TEST(TrainTaskTest, ExampleTaskParsesAndRoundTrips) {
  auto task = TrainTaskFromJson(ExampleTaskJson());
  ASSERT_TRUE(task.ok()) << task.status();
  auto again = TrainTaskFromJson(TrainTaskToJson(*task));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(TrainTaskToJson(*again), TrainTaskToJson(*task));
}

TEST(TrainTaskTest, BadFieldsAreNamed) {
  Json j = BaseTask();
  j["optimiser"] = Json::object();
  EXPECT_NE(ErrorOf(j).find("optimiser: unknown field"), std::string::npos);

  j = BaseTask();
  j["schedule"]["warmup"] = 3;
  EXPECT_NE(ErrorOf(j).find("schedule.warmup: unknown field"),
            std::string::npos);

  j = BaseTask();
  j["optimizer"] = {{"peak_lr", "fast"}};
  EXPECT_NE(ErrorOf(j).find("optimizer.peak_lr: must be a number"),
            std::string::npos);

  j = BaseTask();
  j["batch_tokens"] = 250;
  EXPECT_NE(ErrorOf(j).find("batch_tokens: must be a multiple of seq_len"),
            std::string::npos);

  j = BaseTask();
  j["micro_batch_tokens"] = 96;
  EXPECT_NE(ErrorOf(j).find("micro_batch_tokens"), std::string::npos);

  j = BaseTask();
  j["tokens_per_param"] = 20;
  EXPECT_NE(ErrorOf(j).find("exactly one of budget_tokens"), std::string::npos);

  j = BaseTask();
  j["model"]["arch"] = "swb-3";
  EXPECT_NE(ErrorOf(j).find("model.arch"), std::string::npos);

  j = BaseTask();
  j["data"] = {{"source", "prepared"}};
  EXPECT_NE(ErrorOf(j).find("data.long_dir"), std::string::npos);

  j = BaseTask();
  j["schedule"]["decay_shape"] = "exp";
  EXPECT_NE(ErrorOf(j).find("schedule.decay_shape"), std::string::npos);

  j = BaseTask();
  j["branch_budgets_tokens"] = {1000};
  EXPECT_NE(ErrorOf(j).find("checkpoint.dir"), std::string::npos);

  EXPECT_NE(std::string(TrainTaskFromJson("{\"model\": ").status().message())
                .find("malformed JSON"),
            std::string::npos);
}

// A number no double holds: nlohmann throws even when asked not to, and
// the exception used to end hlab-train with std::terminate (found by
// tests/fuzz/fuzz_task_file.cc). Now a clean InvalidArgument, for
// hlab-eval's task files too.
TEST(TrainTaskTest, ANumberBeyondDoubleIsMalformedJsonNotACrash) {
  for (const char* text : {"8E4888", R"({"batch_tokens": 1e999})"}) {
    absl::StatusOr<TrainTask> task = TrainTaskFromJson(text);
    EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(std::string(task.status().message()).find("task: malformed JSON"),
              std::string::npos)
        << task.status();
  }
}

TEST(TrainTaskTest, BudgetSmallerThanWarmupIsRefusedByThePlan) {
  Json j = BaseTask();
  j["budget_tokens"] = 256 * 3;
  j["schedule"]["warmup_steps"] = 10;
  auto task = TrainTaskFromJson(j.dump());
  ASSERT_TRUE(task.ok()) << task.status();
  auto plan = PlanTraining(*task, 1000);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(plan.status().message()).find("budget_tokens"),
            std::string::npos);
}

TEST(TrainTaskTest, PlanResolvesStepsBranchesAndAccumulation) {
  Json j = BaseTask();
  j["budget_tokens"] = 256 * 40;
  j["micro_batch_tokens"] = 64;
  j["branch_budgets_tokens"] = {256 * 40, 256 * 20};
  j["checkpoint"] = {{"dir", "/tmp/unused"}};
  auto task = TrainTaskFromJson(j.dump());
  ASSERT_TRUE(task.ok()) << task.status();
  auto plan = PlanTraining(*task, 1000);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->total_steps, 40);
  EXPECT_EQ(plan->micro_batches, 4);
  EXPECT_EQ(plan->sequences_per_micro_batch, 2);
  // Branch points are each budget's decay start (90%), ascending.
  EXPECT_EQ(plan->branch_steps, (std::vector<int64_t>{18, 36}));
  EXPECT_EQ(plan->stop_step, 36);

  j["tokens_per_param"] = 10.0;
  j.erase("budget_tokens");
  j["branch_budgets_tokens"] = Json::array();
  task = TrainTaskFromJson(j.dump());
  ASSERT_TRUE(task.ok()) << task.status();
  plan = PlanTraining(*task, 2560);  // D = 25600 tokens = 100 steps
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->budget_tokens, 25600);
  EXPECT_EQ(plan->total_steps, 100);
}

TEST(TrainTaskTest, BranchBudgetAboveTheTrunkIsAnError) {
  Json j = BaseTask();
  j["branch_budgets_tokens"] = {5120 * 2};
  j["checkpoint"] = {{"dir", "/tmp/unused"}};
  auto task = TrainTaskFromJson(j.dump());
  ASSERT_TRUE(task.ok());
  auto plan = PlanTraining(*task, 1000);
  EXPECT_NE(std::string(plan.status().message()).find("branch_budgets_tokens"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::task
