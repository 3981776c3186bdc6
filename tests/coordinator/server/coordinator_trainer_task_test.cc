// The trainer task built at lease time: the fields of each kind, and every
// training task of examples/sweeps/demo.yaml accepted by the real trainer
// (`hlab-train --check`), when that binary is built.
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "coordinator/planning/proto_mapping.h"
#include "coordinator/planning/trainer_task.h"
#include "tests/coordinator/server/coordinator_test_util.h"

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
      EXPECT_EQ(t["init_from"], "");  // a trunk starts from scratch
    } else if (task.spec.kind == store::TaskKind::kDecay) {
      ++decays;
      EXPECT_EQ(
          t["budget_tokens"],
          coordinator_->store()->GetRun(task.spec.run_id)->spec.budget_tokens);
      EXPECT_EQ(t["init_from"], "/ckpt/" + task.spec.id + "/branch.ckpt");
      EXPECT_TRUE(t["branch_budgets_tokens"].empty());
    }
  }
  EXPECT_EQ(trunks, 16);
  EXPECT_EQ(decays, 48);
}

TEST_F(TrainerTaskTest, EvalTasksCarryTheirCheckpointsForHlabEval) {
  for (const store::Task& task : tasks_) {
    if (task.spec.kind != store::TaskKind::kEval) continue;
    TrainerTaskInputs inputs;
    EXPECT_EQ(BuildTrainerTask(task, inputs).status().code(),
              absl::StatusCode::kFailedPrecondition);
    inputs.checkpoint_path = "/ckpt/run/step-9.ckpt";
    // The demo measures LongPPL: without its reference checkpoint, no task.
    EXPECT_EQ(BuildTrainerTask(task, inputs).status().code(),
              absl::StatusCode::kFailedPrecondition);
    inputs.reference_checkpoint = "/ckpt/ref/step-20.ckpt";
    absl::StatusOr<std::string> text = BuildTrainerTask(task, inputs);
    ASSERT_TRUE(text.ok()) << text.status();
    const json t = json::parse(*text);
    EXPECT_EQ(t["kind"], "eval");
    EXPECT_EQ(t["task_id"], task.spec.id);
    EXPECT_EQ(t["run_id"], task.spec.run_id);
    EXPECT_EQ(t["checkpoint"], "/ckpt/run/step-9.ckpt");
    EXPECT_EQ(t["evals"]["longppl"]["reference"]["checkpoint"],
              "/ckpt/ref/step-20.ckpt");
    EXPECT_TRUE(t["evals"]["longppl"]["reference"].contains("run_id"));
    EXPECT_EQ(t["evals"]["niah"]["samples"], 20);
    EXPECT_EQ(t["evals"]["niah"]["haystack"], "synthetic");
    EXPECT_EQ(t["evals"]["longppl"]["min_key_tokens"], 3);
    EXPECT_EQ(t["config"]["seq_len"], 128);
    EXPECT_EQ(t["cache_dir"], "");
    EXPECT_TRUE(t["threads"].is_number_integer());
    EXPECT_EQ(t["allow_extrapolation"], false);
    // Before its reference run trained, the store cannot resolve it.
    EXPECT_EQ(BuildTrainerTaskFromStore(*coordinator_->store(),
                                        *coordinator_->context()->query, task)
                  .status()
                  .code(),
              absl::StatusCode::kFailedPrecondition);
    return;
  }
  FAIL() << "no eval task";
}

// A draft's analysis section (the spec's hook) reaches hlab-train's task.
TEST_F(TrainerTaskTest, TheDraftsAnalysisReachesTheTrainerTask) {
  for (store::Task task : tasks_) {
    if (task.spec.kind != store::TaskKind::kDecay) continue;
    EXPECT_EQ(Build(task)["analysis"]["q_grad_every_steps"], 0);
    json payload = json::parse(task.spec.payload);
    payload["draft"]["analysis"] = {{"q_grad_every_steps", 5}};
    task.spec.payload = payload.dump();
    EXPECT_EQ(Build(task)["analysis"]["q_grad_every_steps"], 5);
    return;
  }
  FAIL() << "no decay task";
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

// schedule_policy: adaptive plans each trunk as segments (sweep/expand.h):
// each one's task file has the largest budget's schedule, saves the branch
// checkpoint at its end and stops there, and a later one starts from the
// branch checkpoint its predecessor reported (trainer_test shows such a
// chain is bitwise the whole trunk).
TEST_F(TrainerTaskTest, TrunkSegmentsStartFromTheirPredecessorsCheckpoint) {
  std::unique_ptr<Coordinator> adaptive = testing::StartOrDie(
      testing::TestOptions(dir_.File("adaptive.db"), &clock_));
  ASSERT_NE(adaptive, nullptr);
  {
    auto stub = hlab::v1::ClientService::NewStub(testing::Connect(*adaptive));
    grpc::ClientContext ctx;
    hlab::v1::SubmitSweepRequest request;
    *request.mutable_spec() = testing::DemoSpec();
    request.mutable_spec()->set_schedule_policy("adaptive");
    hlab::v1::SubmitSweepResponse response;
    grpc::Status status = stub->SubmitSweep(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  store::Store& store = *adaptive->store();
  auto tasks = store.ListTasks({});
  ASSERT_TRUE(tasks.ok());
  const std::string trainer = TrainerBinary();
  int segments = 0;
  // Each chain's segments are one trunk group, its first segment's id.
  std::map<std::string, int> groups;
  std::string checked_group;  // the chain hlab-train checks (~5 s a task)
  for (const store::Task& task : *tasks) {
    if (task.spec.kind != store::TaskKind::kTrunk) continue;
    ++segments;
    ++groups[task.spec.trunk_group];
    if (checked_group.empty()) checked_group = task.spec.trunk_group;
    const hlab::v1::Task proto = ToProtoTask(task);
    TrainerTaskInputs inputs;
    int64_t largest = 0, at_end = 0;
    for (const auto& b : proto.branch_points()) {
      const int64_t budget = store.GetRun(b.run_id())->spec.budget_tokens;
      inputs.branch_budgets_tokens.push_back(budget);
      largest = std::max(largest, budget);
      if (b.step() == proto.end_step()) at_end = budget;
    }
    inputs.checkpoint_path = "/ckpt/before/branch.ckpt";
    absl::StatusOr<std::string> text = BuildTrainerTask(task, inputs);
    ASSERT_TRUE(text.ok()) << task.spec.id << ": " << text.status();
    json t = json::parse(*text);
    EXPECT_EQ(t["budget_tokens"], largest);
    EXPECT_EQ(t["branch_budgets_tokens"], json::array({at_end}));
    EXPECT_EQ(t["stop_at_tokens"], proto.end_step() * 512);
    EXPECT_EQ(t["init_from"], proto.start_step() > 0
                                  ? "/ckpt/before/branch.ckpt"
                                  : std::string());
    if (proto.start_step() > 0) {
      // Its predecessor reported nothing yet: no task file.
      EXPECT_EQ(
          BuildTrainerTaskFromStore(store, *adaptive->context()->query, task)
              .status()
              .code(),
          absl::StatusCode::kFailedPrecondition);
    }
    if (trainer.empty() || task.spec.trunk_group != checked_group) continue;
    t["checkpoint"]["dir"] = dir_.File("ckpt-" + task.spec.id);
    t["init_from"] = "";  // --check reads no checkpoint
    const std::string file = dir_.File(task.spec.id + ".json");
    std::ofstream(file) << t.dump(2);
    const std::string command = trainer + " --check --task " + file + " > " +
                                file + ".out 2> " + file + ".err";
    const int rc = system(command.c_str());
    ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << task.spec.id;
    std::ifstream out(file + ".out");
    const json plan = json::parse(out);
    EXPECT_EQ(plan["stop_step"], proto.end_step());
    EXPECT_EQ(plan["branch_steps"], json::array({proto.end_step()}));
  }
  EXPECT_EQ(segments, 48);  // 16 trunks of 3 budgets
  EXPECT_EQ(groups.size(), 16u);
  for (const auto& [group, n] : groups) EXPECT_EQ(n, 3) << group;

  // Through the lease: the first segment reports its branch checkpoint and
  // succeeds; the next one's task file starts from that checkpoint.
  auto worker = hlab::v1::WorkerService::NewStub(testing::Connect(*adaptive));
  {
    grpc::ClientContext ctx;
    hlab::v1::RegisterRequest request;
    request.set_worker_id("w");
    *request.add_devices() = testing::Cpu();
    hlab::v1::RegisterResponse response;
    ASSERT_TRUE(worker->Register(&ctx, request, &response).ok());
  }
  auto lease = [&]() {
    grpc::ClientContext ctx;
    hlab::v1::LeaseRequest request;
    request.set_worker_id("w");
    *request.add_free_devices() = testing::Cpu();
    hlab::v1::LeaseResponse response;
    EXPECT_TRUE(worker->Lease(&ctx, request, &response).ok());
    return response.task();
  };
  const hlab::v1::Task first = lease();
  ASSERT_EQ(first.kind(), hlab::v1::TASK_KIND_TRUNK);
  ASSERT_EQ(first.start_step(), 0);
  const std::string path = dir_.File("first/branch.ckpt");
  {
    grpc::ClientContext ctx;
    hlab::v1::ReportCheckpointRequest request;
    request.set_task_id(first.task_id());
    request.set_attempt(first.attempt());
    request.set_worker_id("w");
    hlab::v1::Checkpoint* c = request.mutable_checkpoint();
    c->set_step(first.end_step());
    c->set_tokens(first.end_step() * 512);
    c->set_path(path);
    c->set_sha256("00");
    c->set_branch_point(true);
    hlab::v1::ReportCheckpointResponse response;
    grpc::Status status = worker->ReportCheckpoint(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  {
    grpc::ClientContext ctx;
    hlab::v1::CompleteRequest request;
    request.set_task_id(first.task_id());
    request.set_attempt(first.attempt());
    request.set_worker_id("w");
    hlab::v1::CompleteResponse response;
    grpc::Status status = worker->Complete(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  bool found = false;
  for (int i = 0; i < 20 && !found; ++i) {
    const hlab::v1::Task next = lease();  // others stay leased
    if (next.kind() != hlab::v1::TASK_KIND_TRUNK ||
        next.depends_on_size() != 1 || next.depends_on(0) != first.task_id()) {
      continue;
    }
    found = true;
    EXPECT_EQ(next.start_step(), first.end_step());
    const json t = json::parse(next.task_json());
    EXPECT_EQ(t["init_from"], path);
    EXPECT_EQ(t["stop_at_tokens"], next.end_step() * 512);
  }
  EXPECT_TRUE(found) << "the second segment was never leased";
}

// A minimal worker: runs a leased task with the real trainer and relays its
// records (steps, evals, checkpoints) the way hlab-worker does.
class TrainerRun {
 public:
  TrainerRun(hlab::v1::WorkerService::Stub* stub, const std::string& trainer,
             const std::string& dir)
      : stub_(stub), trainer_(trainer), dir_(dir) {}

  // Trains `task` to completion and reports everything; false on failure.
  bool Run(const hlab::v1::Task& task) {
    json t = json::parse(task.task_json());
    t["checkpoint"]["dir"] = dir_ + "/ckpt-" + task.task_id();
    const std::string file = dir_ + "/" + task.task_id() + ".json";
    std::ofstream(file) << t.dump();
    const std::string records = file + ".records";
    const std::string command =
        trainer_ + " --task " + file + " > " + records + " 2> " + file + ".err";
    const int rc = system(command.c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << task.task_id();
    hlab::v1::ReportMetricsRequest metrics;
    metrics.set_task_id(task.task_id());
    metrics.set_attempt(task.attempt());
    std::ifstream in(records);
    std::string line;
    while (std::getline(in, line)) {
      json r = json::parse(line, nullptr, false);
      if (!r.is_object()) continue;
      const std::string type = r.value("type", "");
      if (type == "step" || type == "eval") {
        hlab::v1::MetricPoint* p = metrics.add_points();
        p->set_name(type == "step" ? "train_loss" : "val_loss");
        p->set_step(r["step"]);
        p->set_tokens(r["tokens"]);
        p->set_value(r[type == "step" ? "loss" : "val_loss"]);
      } else if (type == "checkpoint") {
        grpc::ClientContext ctx;
        hlab::v1::ReportCheckpointRequest request;
        request.set_task_id(task.task_id());
        request.set_attempt(task.attempt());
        hlab::v1::Checkpoint* c = request.mutable_checkpoint();
        c->set_step(r["step"]);
        c->set_tokens(r["tokens"]);
        c->set_path(r["path"]);
        c->set_sha256(r["sha256"]);
        c->set_branch_point(r["kind"] == "branch");
        hlab::v1::ReportCheckpointResponse response;
        grpc::Status status = stub_->ReportCheckpoint(&ctx, request, &response);
        EXPECT_TRUE(status.ok()) << status.error_message();
      }
    }
    // In batches, as the worker sends them (the API takes 1000 at most).
    grpc::Status status;
    constexpr int kBatch = 1000;
    for (int from = 0; from < metrics.points_size(); from += kBatch) {
      hlab::v1::ReportMetricsRequest batch;
      batch.set_task_id(task.task_id());
      batch.set_attempt(task.attempt());
      for (int i = from; i < std::min(from + kBatch, metrics.points_size());
           ++i) {
        *batch.add_points() = metrics.points(i);
      }
      grpc::ClientContext ctx;
      hlab::v1::ReportMetricsResponse accepted;
      status = stub_->ReportMetrics(&ctx, batch, &accepted);
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    grpc::ClientContext done_ctx;
    hlab::v1::CompleteRequest complete;
    complete.set_task_id(task.task_id());
    complete.set_attempt(task.attempt());
    hlab::v1::CompleteResponse done;
    status = stub_->Complete(&done_ctx, complete, &done);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && status.ok();
  }

 private:
  hlab::v1::WorkerService::Stub* stub_;
  std::string trainer_, dir_;
};

TEST_F(TrainerTaskTest, LeasedTrunkAndDecayTrainWithTheRealTrainer) {
  const std::string trainer = TrainerBinary();
  if (trainer.empty()) {
    GTEST_SKIP() << "hlab-train is not built (build it, or set HLAB_TRAIN)";
  }
  auto stub = hlab::v1::WorkerService::NewStub(testing::Connect(*coordinator_));
  {
    grpc::ClientContext ctx;
    hlab::v1::RegisterRequest request;
    request.set_worker_id("w");
    *request.add_devices() = testing::Cpu();
    hlab::v1::RegisterResponse response;
    ASSERT_TRUE(stub->Register(&ctx, request, &response).ok());
  }
  auto lease = [&]() {
    grpc::ClientContext ctx;
    hlab::v1::LeaseRequest request;
    request.set_worker_id("w");
    *request.add_free_devices() = testing::Cpu();
    hlab::v1::LeaseResponse response;
    EXPECT_TRUE(stub->Lease(&ctx, request, &response).ok());
    return response;
  };
  TrainerRun worker(stub.get(), trainer, dir_.File(""));
  // First the LongPPL reference's trunk, which every EVAL waits for (the
  // sweep's largest); left leased here. Then the cheapest trunk.
  hlab::v1::LeaseResponse reference = lease();
  ASSERT_EQ(reference.task().kind(), hlab::v1::TASK_KIND_TRUNK);
  EXPECT_EQ(reference.task().priority(), 1);
  hlab::v1::LeaseResponse trunk = lease();
  ASSERT_EQ(trunk.task().kind(), hlab::v1::TASK_KIND_TRUNK);
  EXPECT_EQ(trunk.task().priority(), 0);
  // (The demo trains every scale on the same token budgets: the cheapest
  // trunk is the smallest model's, as long as the reference's.)
  EXPECT_LE(trunk.task().end_step(), reference.task().end_step());
  EXPECT_LT(trunk.task().flops(), reference.task().flops());
  ASSERT_TRUE(worker.Run(trunk.task()));
  // Its decays are now the cheapest work, each from its branch checkpoint.
  hlab::v1::LeaseResponse decay = lease();
  ASSERT_EQ(decay.task().kind(), hlab::v1::TASK_KIND_DECAY);
  const std::string run_id = decay.task().run_ids(0);
  json t = json::parse(decay.task().task_json());
  EXPECT_TRUE(std::filesystem::exists(t["init_from"].get<std::string>()))
      << t["init_from"];
  ASSERT_TRUE(worker.Run(decay.task()));
  auto done = coordinator_->store()->GetTask(decay.task().task_id());
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, store::TaskState::kSucceeded);
  // (The run's EVAL waits for the demo's LongPPL reference run.)
  store::QueryOptions options;
  auto summary = coordinator_->context()->query->Run(
      "SELECT last_step, final_train_loss, final_val_loss FROM run_summary"
      " WHERE run_id = '" +
          run_id + "'",
      options);
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(summary->rows.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(summary->rows[0][0]), decay.task().end_step());
  EXPECT_TRUE(std::holds_alternative<double>(summary->rows[0][1]));
  EXPECT_TRUE(std::holds_alternative<double>(summary->rows[0][2]));
}

// Requirement of trunk segments: a sweep trained through them ends with
// every run's final losses bitwise those of the same sweep with whole
// trunks. Both sweeps leased task by task and trained by the real trainer.
TEST_F(TrainerTaskTest, RunsTrainedThroughSegmentsEndBitwiseAsWithWholeTrunks) {
  const std::string trainer = TrainerBinary();
  if (trainer.empty()) {
    GTEST_SKIP() << "hlab-train is not built (build it, or set HLAB_TRAIN)";
  }
  std::string yaml = testing::TinySpecYaml("segments", "[5, 10, 20]");
  yaml.replace(yaml.find("share_trunk: false"), 18, "share_trunk: true");
  // run id -> (final train loss, final validation loss)
  using Finals = std::map<std::string, std::pair<double, double>>;
  auto train_all = [&](const std::string& name, const std::string& spec_yaml,
                       int* trunks) -> Finals {
    std::unique_ptr<Coordinator> c = testing::StartOrDie(
        testing::TestOptions(dir_.File(name + ".db"), &clock_));
    EXPECT_NE(c, nullptr);
    if (c == nullptr) return {};
    {
      auto stub = hlab::v1::ClientService::NewStub(testing::Connect(*c));
      grpc::ClientContext ctx;
      hlab::v1::SubmitSweepRequest request;
      *request.mutable_spec() = testing::Spec(spec_yaml);
      hlab::v1::SubmitSweepResponse response;
      grpc::Status status = stub->SubmitSweep(&ctx, request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    auto worker = hlab::v1::WorkerService::NewStub(testing::Connect(*c));
    {
      grpc::ClientContext ctx;
      hlab::v1::RegisterRequest request;
      request.set_worker_id("w");
      *request.add_devices() = testing::Cpu();
      hlab::v1::RegisterResponse response;
      EXPECT_TRUE(worker->Register(&ctx, request, &response).ok());
    }
    std::filesystem::create_directories(dir_.File(name));
    TrainerRun run(worker.get(), trainer, dir_.File(name));
    for (int i = 0; i < 20; ++i) {
      grpc::ClientContext ctx;
      hlab::v1::LeaseRequest request;
      request.set_worker_id("w");
      *request.add_free_devices() = testing::Cpu();
      hlab::v1::LeaseResponse response;
      EXPECT_TRUE(worker->Lease(&ctx, request, &response).ok());
      if (!response.has_task()) break;
      *trunks += response.task().kind() == hlab::v1::TASK_KIND_TRUNK;
      EXPECT_TRUE(run.Run(response.task())) << response.task().task_id();
    }
    Finals finals;
    auto rows = c->context()->query->Run(
        "SELECT run_id, final_train_loss, final_val_loss FROM run_summary",
        store::QueryOptions());
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok()) return finals;
    for (const auto& row : rows->rows) {
      const auto* train = std::get_if<double>(&row[1]);
      const auto* val = std::get_if<double>(&row[2]);
      EXPECT_TRUE(train != nullptr && val != nullptr);
      if (train == nullptr || val == nullptr) continue;
      finals[std::get<std::string>(row[0])] = {*train, *val};
    }
    return finals;
  };
  int whole_trunks = 0, segments = 0;
  const Finals whole = train_all("whole", yaml, &whole_trunks);
  const Finals split = train_all("split",
                                 yaml +
                                     "fit: {fit_scales: [S1]}\n"
                                     "adaptive: {target: {scales: [S1]}}\n"
                                     "schedule_policy: adaptive\n",
                                 &segments);
  EXPECT_EQ(whole_trunks, 1);
  EXPECT_EQ(segments, 3);
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(split, whole);  // bitwise: doubles compared exactly
}

}  // namespace
}  // namespace hlab::coordinator
