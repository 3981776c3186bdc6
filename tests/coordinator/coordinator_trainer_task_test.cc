// The trainer task built at lease time: the fields of each kind, and every
// training task of examples/sweeps/demo.yaml accepted by the real trainer
// (`hlab-train --check`), when that binary is built.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "coordinator/proto_mapping.h"
#include "coordinator/trainer_task.h"
#include "tests/coordinator/coordinator_test_util.h"

#ifndef HLAB_TRAIN_BINARY
#define HLAB_TRAIN_BINARY ""
#endif

namespace hlab::coordinator {
namespace {

using nlohmann::json;
using testing::FakeClock;
using testing::TempDir;

// hlab-train of this build tree, else $HLAB_TRAIN; empty if neither exists.
std::string TrainerBinary() {
  const char* from_env = getenv("HLAB_TRAIN");
  for (const char* candidate : {HLAB_TRAIN_BINARY, from_env}) {
    if (candidate != nullptr && *candidate != '\0' &&
        std::filesystem::exists(candidate)) {
      return candidate;
    }
  }
  return "";
}

class TrainerTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator_ = testing::StartOrDie(
        testing::TestOptions(dir_.File("hlab.db"), &clock_));
    ASSERT_NE(coordinator_, nullptr);
    auto stub =
        hlab::v1::ClientService::NewStub(testing::Connect(*coordinator_));
    grpc::ClientContext ctx;
    hlab::v1::SubmitSweepRequest request;
    *request.mutable_spec() = testing::DemoSpec();
    hlab::v1::SubmitSweepResponse response;
    ASSERT_TRUE(stub->SubmitSweep(&ctx, request, &response).ok());
    auto tasks = coordinator_->store()->ListTasks({});
    ASSERT_TRUE(tasks.ok());
    tasks_ = *tasks;
  }

  // The trainer task as the coordinator builds it; a DECAY gets a made-up
  // branch checkpoint path.
  json Build(const store::Task& task) {
    store::Store& store = *coordinator_->store();
    absl::StatusOr<std::string> text;
    if (task.spec.kind == store::TaskKind::kDecay) {
      TrainerTaskInputs inputs;
      inputs.checkpoint_path = "/ckpt/" + task.spec.id + "/branch.ckpt";
      text = BuildTrainerTask(task, inputs);
    } else {
      text = BuildTrainerTaskFromStore(store, *coordinator_->context()->query,
                                       task);
    }
    EXPECT_TRUE(text.ok()) << task.spec.id << ": " << text.status();
    return text.ok() ? json::parse(*text) : json();
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<store::Task> tasks_;
};

TEST_F(TrainerTaskTest, KindsCarryTheirBudgetsAndBranchPoints) {
  int trunks = 0, decays = 0;
  for (const store::Task& task : tasks_) {
    if (task.spec.kind == store::TaskKind::kEval) continue;
    json t = Build(task);
    EXPECT_EQ(t["checkpoint"]["dir"], "");
    EXPECT_EQ(t["model"]["vocab_size"], 258);
    EXPECT_EQ(t["data"]["source"], "synthetic");
    EXPECT_EQ(t["seq_len"], 128);
    EXPECT_EQ(t["schedule"]["warmup_steps"], 10);
    if (task.spec.kind == store::TaskKind::kTrunk) {
      ++trunks;
      std::vector<int64_t> budgets;
      const hlab::v1::Task proto = ToProtoTask(task);
      for (const std::string& run : proto.run_ids()) {
        budgets.push_back(
            coordinator_->store()->GetRun(run)->spec.budget_tokens);
      }
      std::sort(budgets.begin(), budgets.end());
      ASSERT_EQ(budgets.size(), 3u);
      EXPECT_EQ(t["budget_tokens"], budgets.back());
      EXPECT_EQ(t["branch_budgets_tokens"].get<std::vector<int64_t>>(),
                budgets);
      EXPECT_FALSE(t.contains("init_from"));
    } else if (task.spec.kind == store::TaskKind::kDecay) {
      ++decays;
      EXPECT_EQ(
          t["budget_tokens"],
          coordinator_->store()->GetRun(task.spec.run_id)->spec.budget_tokens);
      EXPECT_EQ(t["init_from"], "/ckpt/" + task.spec.id + "/branch.ckpt");
      EXPECT_FALSE(t.contains("branch_budgets_tokens"));
    }
  }
  EXPECT_EQ(trunks, 16);
  EXPECT_EQ(decays, 48);
}

TEST_F(TrainerTaskTest, DecayWithoutBranchCheckpointIsNotBuilt) {
  for (const store::Task& task : tasks_) {
    if (task.spec.kind != store::TaskKind::kDecay) continue;
    absl::StatusOr<std::string> t = BuildTrainerTaskFromStore(
        *coordinator_->store(), *coordinator_->context()->query, task);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
    return;
  }
  FAIL() << "no decay task";
}

TEST_F(TrainerTaskTest, TheTrainerAcceptsEveryDemoTask) {
  const std::string trainer = TrainerBinary();
  if (trainer.empty()) {
    GTEST_SKIP() << "hlab-train is not built (build it, or set HLAB_TRAIN)";
  }
  int checked = 0;
  for (const store::Task& task : tasks_) {
    if (task.spec.kind == store::TaskKind::kEval) continue;
    json t = Build(task);
    // What the worker does: its own checkpoint directory per task.
    t["checkpoint"]["dir"] = dir_.File("ckpt-" + task.spec.id);
    const std::string file = dir_.File(task.spec.id + ".json");
    std::ofstream(file) << t.dump(2);
    const std::string command = trainer + " --check --task " + file + " > " +
                                file + ".out 2> " + file + ".err";
    const int rc = system(command.c_str());
    std::ifstream out(file + ".out"), err(file + ".err");
    std::string output((std::istreambuf_iterator<char>(out)),
                       std::istreambuf_iterator<char>());
    std::string errors((std::istreambuf_iterator<char>(err)),
                       std::istreambuf_iterator<char>());
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0)
        << task.spec.id << ": " << output << errors << "\n"
        << t.dump(2);
    // The trainer's plan agrees with the coordinator's: a trunk branches
    // at the plan's branch points (workers' branch checkpoints are matched
    // to runs by step) and stops at the last; a task ends where the plan
    // says.
    json plan = json::parse(output);
    const hlab::v1::Task proto = ToProtoTask(task);
    EXPECT_EQ(plan["stop_step"], proto.end_step()) << task.spec.id;
    if (task.spec.kind == store::TaskKind::kTrunk) {
      std::vector<int64_t> steps;
      for (const auto& b : proto.branch_points()) steps.push_back(b.step());
      std::sort(steps.begin(), steps.end());
      EXPECT_EQ(plan["branch_steps"].get<std::vector<int64_t>>(), steps)
          << task.spec.id;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 64);
}

}  // namespace
}  // namespace hlab::coordinator
