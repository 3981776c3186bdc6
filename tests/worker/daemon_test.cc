// The worker daemon end to end, against an in-process fake coordinator
// (tests/worker/fake_coordinator.h) and a fake trainer: a bash script that
// answers --probe-devices and, for a task, runs the behaviour named by the
// task file's name ("behavior=<name>") (behaviors/<name>.sh next to it), which
// writes records to fd 3 with `rec '{...}'` and exits as it likes.
// With HLAB_TRAIN_BIN set, one test runs the real hlab-train.
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/worker/fake_coordinator.h"
#include "tests/worker/fake_trainer.h"
#include "worker/coordinator_client.h"
#include "worker/daemon.h"
#include "worker/devices.h"
#include "worker/metrics.h"
#include "worker/stale_trainers.h"
#include "worker/trainer_process.h"

namespace hlab::worker {
namespace {

namespace fs = std::filesystem;
using testing::FakeCoordinator;
using testing::FakeServer;
using testing::FakeState;

hlab::v1::Task MakeTask(const std::string& id, const std::string& behavior,
                        int64_t attempt = 1) {
  hlab::v1::Task t;
  t.set_task_id(id);
  t.set_attempt(attempt);
  t.set_kind(hlab::v1::TASK_KIND_TRAIN);
  t.add_run_ids("run-" + id);
  nlohmann::json task = testing::FakeTrainTask(behavior);
  task["checkpoint"] = {{"every_steps", 5}};
  t.set_task_json(task.dump());
  return t;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hlab_worker_daemon_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    trainer_ = testing::WriteFakeTrainer(root_ / "bin");
    evaluator_ = testing::WriteFakeEvaluator(root_ / "bin");
    server_ = std::make_unique<FakeServer>(std::make_unique<FakeCoordinator>());
  }

  void TearDown() override {
    StopDaemon();
    server_.reset();
    fs::remove_all(root_);
  }

  FakeCoordinator& fake() { return server_->fake(); }

  absl::Duration stall_timeout_ = absl::Minutes(30);  // the watchdog's

  void StartDaemon(const std::string& trainer = "", int capacity = 1) {
    const std::string t = trainer.empty() ? trainer_ : trainer;
    client_ = std::make_unique<CoordinatorClient>(server_->address(), "tok-1",
                                                  absl::Seconds(5));
    metrics_ = *WorkerMetrics::Create("");
    DaemonOptions options;
    options.worker_id = "w-test";
    options.hostname = "testhost";
    auto devices = ProbeDevices(t);
    ASSERT_TRUE(devices.ok()) << devices.status();
    options.devices = *devices;
    options.capacity = capacity;
    options.lease_wait = absl::Milliseconds(200);
    options.min_backoff = absl::Milliseconds(20);
    options.max_backoff = absl::Milliseconds(200);
    options.runner.trainer = t;
    options.runner.evaluator = evaluator_;
    options.runner.data_dir = (root_ / "data").string();
    options.runner.kill_grace = absl::Seconds(20);
    options.runner.stall_timeout = stall_timeout_;
    options.runner.tick = absl::Milliseconds(20);
    options.runner.min_backoff = absl::Milliseconds(20);
    options.runner.max_backoff = absl::Milliseconds(200);
    daemon_ = std::make_unique<Daemon>(options, client_.get(), metrics_.get());
    run_thread_ = std::thread([this] { run_status_ = daemon_->Run(); });
  }

  // Stops the daemon and waits until the fake answers none of its Lease
  // polls: a poll still open would take a task the test adds next.
  void StopDaemon() {
    if (daemon_ == nullptr) return;
    daemon_->Shutdown();
    run_thread_.join();
    daemon_.reset();
    EXPECT_TRUE(fake().WaitFor(
        [](const FakeState& s) { return s.leases_in_flight == 0; }));
  }

  // A worker whose probe lists two GPUs, running tasks t-gpu-a and t-gpu-b
  // of one GPU each (both running on return).
  void StartTwoGpuTasks() {
    std::ofstream(root_ / "bin" / "probe.json")
        << R"({"cpu":{"cores":8,"memory_bytes":1},"cuda":[)"
        << R"({"index":0,"name":"G","memory_bytes":80},)"
        << R"({"index":1,"name":"G","memory_bytes":80}],"cuda_build":true})";
    for (const char* id : {"t-gpu-a", "t-gpu-b"}) {
      hlab::v1::Task t = MakeTask(id, "sleep");
      t.mutable_resources()->set_gpus(1);
      fake().AddTask(t);
    }
    StartDaemon("", /*capacity=*/0);  // one per GPU
    WaitForTrainer("t-gpu-a", "running");
    WaitForTrainer("t-gpu-b", "running");
  }

  fs::path TaskDir(const std::string& id) {
    return root_ / "data" / "tasks" / id;
  }

  // Waits for the fake trainer of task `id` to write `file`; returns its pid.
  pid_t WaitForTrainer(const std::string& id, const std::string& file) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!fs::exists(TaskDir(id) / file) && absl::Now() < deadline) {
      usleep(10000);
    }
    EXPECT_TRUE(fs::exists(TaskDir(id) / file)) << id << "/" << file;
    pid_t pid = 0;
    std::ifstream(TaskDir(id) / "pid") >> pid;
    return pid;
  }

  fs::path root_;
  std::string trainer_;
  std::string evaluator_;
  std::unique_ptr<FakeServer> server_;
  std::unique_ptr<CoordinatorClient> client_;
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<Daemon> daemon_;
  std::thread run_thread_;
  absl::Status run_status_;
};

TEST_F(DaemonTest, RegistersWithDevicesCapacityAndToken) {
  StartDaemon();
  ASSERT_TRUE(fake().WaitFor([](const FakeState& s) {
    return !s.registers.empty() && !s.heartbeats.empty() && !s.leases.empty();
  }));
  FakeState s = fake().Snapshot();
  const auto& reg = s.registers[0];
  EXPECT_EQ(reg.worker_id(), "w-test");
  EXPECT_EQ(reg.hostname(), "testhost");
  EXPECT_EQ(reg.capacity(), 1);
  ASSERT_EQ(reg.devices_size(), 1);
  EXPECT_EQ(reg.devices(0).kind(), "cpu");
  EXPECT_EQ(reg.devices(0).cores(), 3);
  EXPECT_EQ(reg.devices(0).memory_bytes(), 4096);
  EXPECT_EQ(s.authorization[0], "Bearer tok-1");
  EXPECT_EQ(s.leases[0].worker_id(), "w-test");
  ASSERT_EQ(s.leases[0].free_devices_size(), 1);
  EXPECT_EQ(s.leases[0].free_devices(0).kind(), "cpu");
  EXPECT_EQ(daemon_->worker_id(), "w-test");
}

TEST_F(DaemonTest, RelaysMetricsAndCheckpointsThenCompletes) {
  fake().AddTask(MakeTask("t-ok", "ok"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Completed("t-ok"); }));
  FakeState s = fake().Snapshot();
  const auto loss = s.Points("train_loss");
  ASSERT_EQ(loss.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(loss[i].step(), i + 1);
    EXPECT_EQ(loss[i].tokens(), (i + 1) * 64);
    EXPECT_DOUBLE_EQ(loss[i].value(), i + 1.5);
    EXPECT_EQ(loss[i].run_id(), "run-t-ok");
  }
  EXPECT_EQ(s.Points("lr").size(), 3u);
  EXPECT_EQ(s.Points("grad_norm").size(), 3u);
  EXPECT_EQ(s.Points("tokens_per_s").size(), 3u);
  ASSERT_EQ(s.Points("val_loss").size(), 1u);
  EXPECT_DOUBLE_EQ(s.Points("val_loss")[0].value(), 2.25);
  EXPECT_DOUBLE_EQ(s.Points("val_recall_loss")[0].value(), 4.5);
  ASSERT_EQ(s.checkpoints.size(), 1u);
  const auto& c = s.checkpoints[0];
  EXPECT_EQ(c.task_id(), "t-ok");
  EXPECT_EQ(c.attempt(), 1);
  EXPECT_EQ(c.worker_id(), "w-test");
  EXPECT_EQ(c.checkpoint().step(), 3);
  EXPECT_EQ(c.checkpoint().tokens(), 192);
  EXPECT_EQ(c.checkpoint().sha256(), "abc123");
  EXPECT_EQ(c.checkpoint().path(),
            (TaskDir("t-ok") / "checkpoints" / "step-3.ckpt").string());
  EXPECT_EQ(c.checkpoint().size_bytes(), 5);
  EXPECT_TRUE(s.fails.empty());
  ASSERT_EQ(s.completes.size(), 1u);
  EXPECT_EQ(s.completes[0].attempt(), 1);
  // The trainer got the task file with checkpoint.dir in the task dir, and
  // its records on fd 3.
  std::ifstream task_file(TaskDir("t-ok") / "task.json");
  const auto task = nlohmann::json::parse(task_file);
  EXPECT_EQ(task["checkpoint"]["dir"],
            (TaskDir("t-ok") / "checkpoints").string());
  EXPECT_EQ(task["checkpoint"]["every_steps"], 5);
  std::string args;
  std::getline(std::ifstream(TaskDir("t-ok") / "args.txt"), args);
  EXPECT_NE(args.find("--record-fd 3"), std::string::npos) << args;
  EXPECT_EQ(args.find("--rank"), std::string::npos) << args;
  StopDaemon();  // the runner counts after its Complete returns
  EXPECT_EQ(metrics_->completed(), 1);
}

// A coordinator that cannot write its database (disk full) refuses reports
// with UNAVAILABLE: the worker keeps the points and the checkpoint, sends
// them again, none lost and none twice, and still counts the coordinator
// as reached.
TEST_F(DaemonTest, ReportsRefusedByACoordinatorThatCannotWriteAreSentAgain) {
  fake().RefuseWrites(4);
  fake().AddTask(MakeTask("t-ok", "ok"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Completed("t-ok"); }));
  FakeState s = fake().Snapshot();
  EXPECT_EQ(s.refused, 4);
  const auto loss = s.Points("train_loss");
  ASSERT_EQ(loss.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(loss[i].step(), i + 1);
  EXPECT_EQ(s.Points("val_loss").size(), 1u);
  EXPECT_EQ(s.checkpoints.size(), 1u);
  EXPECT_EQ(metrics_->connected(), 1);
}

hlab::v1::Task MakeEvalTask(const std::string& id,
                            const std::string& behavior) {
  hlab::v1::Task t;
  t.set_task_id(id);
  t.set_attempt(1);
  t.set_kind(hlab::v1::TASK_KIND_EVAL);
  t.add_run_ids("run-e");
  t.set_eval_step(40);
  t.add_evals("val_loss");
  t.add_evals("niah");
  t.set_task_json(nlohmann::json{
      {"config", testing::FakeTrainTask(behavior)},
      {"kind", "eval"},
      {"task_id", id},
      {"run_id", "run-e"},
      {"step", 40},
      {"checkpoint", "/ckpt/run-e/step-40.ckpt"},
      {"evals", {{"val_loss", {{"tokens", 0}}}}},
      {"cache_dir", ""},
      {"threads", 2},
      {"allow_extrapolation",
       false}}.dump());
  return t;
}

TEST_F(DaemonTest, EvalTaskRunsTheEvaluatorAndCompletesWithItsResults) {
  fake().AddTask(MakeEvalTask("e-ok", "eval_ok"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Completed("e-ok"); }));
  FakeState s = fake().Snapshot();
  EXPECT_TRUE(s.fails.empty());
  ASSERT_EQ(s.completes.size(), 1u);
  const auto& results = s.completes[0].results();
  ASSERT_EQ(results.size(), 3);
  EXPECT_EQ(results[0].run_id(), "run-e");
  EXPECT_EQ(results[0].name(), "val_loss");
  EXPECT_EQ(results[0].step(), 40);  // the task's eval_step
  EXPECT_DOUBLE_EQ(results[0].value(), 2.5);
  const auto details = nlohmann::json::parse(results[0].details_json());
  EXPECT_EQ(details["tokens"], 4096);
  EXPECT_EQ(details["source"], "synthetic");
  EXPECT_EQ(results[1].name(), "niah_acc");
  EXPECT_DOUBLE_EQ(results[1].value(), 0.75);
  EXPECT_EQ(
      nlohmann::json::parse(results[1].details_json())["cells"][0]["kind"],
      "single");
  EXPECT_EQ(results[2].name(), "niah_acc/single");
  EXPECT_EQ(results[2].details_json(), "");  // none given
  // Results go with Complete, not as training metric points.
  EXPECT_TRUE(s.points.empty());
  // hlab-eval --task FILE --record-fd 3, not the trainer.
  std::string program, args;
  std::getline(std::ifstream(TaskDir("e-ok") / "program"), program);
  EXPECT_EQ(program, "fake-eval");
  std::getline(std::ifstream(TaskDir("e-ok") / "args.txt"), args);
  EXPECT_EQ(args,
            (std::string("--task ") + (TaskDir("e-ok") / "task.json").string() +
             " --record-fd 3"));
  // The worker filled cache_dir, kept the coordinator's threads, and left
  // the task's own fields alone (no checkpoint.dir).
  std::ifstream task_file(TaskDir("e-ok") / "task.json");
  const auto task = nlohmann::json::parse(task_file);
  EXPECT_EQ(task["cache_dir"], (root_ / "data" / "cache").string());
  EXPECT_TRUE(fs::is_directory(root_ / "data" / "cache"));
  EXPECT_EQ(task["threads"], 2);
  EXPECT_EQ(task["checkpoint"], "/ckpt/run-e/step-40.ckpt");
  EXPECT_FALSE(fs::exists(TaskDir("e-ok") / "checkpoints"));
  EXPECT_TRUE(fs::exists(TaskDir("e-ok") / "evaluator.log"));
}

TEST_F(DaemonTest, EvalExitTwoFailsPermanentlyWithTheEvaluatorsMessage) {
  fake().AddTask(MakeEvalTask("e-perm", "eval_permanent"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("e-perm"); }));
  FakeState s = fake().Snapshot();
  ASSERT_EQ(s.fails.size(), 1u);
  EXPECT_FALSE(s.fails[0].retryable());
  EXPECT_EQ(s.fails[0].exit_code(), 2);
  EXPECT_EQ(s.fails[0].error(),
            "hlab-eval: exit code 2: checkpoint /x/step-40.ckpt: no such file");
  EXPECT_TRUE(s.completes.empty());
}

TEST_F(DaemonTest, EvalThatMeasuredNothingFailsForGood) {
  fake().AddTask(MakeEvalTask("e-silent", "eval_silent"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("e-silent"); }));
  FakeState s = fake().Snapshot();
  ASSERT_EQ(s.fails.size(), 1u);
  EXPECT_FALSE(s.fails[0].retryable());
  EXPECT_NE(s.fails[0].error().find("without a result record"),
            std::string::npos)
      << s.fails[0].error();
  EXPECT_TRUE(s.completes.empty());
}

TEST_F(DaemonTest, ExitTwoFailsPermanentlyWithTheTrainersMessage) {
  fake().AddTask(MakeTask("t-perm", "permanent"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("t-perm"); }));
  FakeState s = fake().Snapshot();
  ASSERT_EQ(s.fails.size(), 1u);
  EXPECT_FALSE(s.fails[0].retryable());
  EXPECT_EQ(s.fails[0].fault(), hlab::v1::FAULT_CLASS_TASK);
  EXPECT_EQ(s.fails[0].exit_code(), 2);
  EXPECT_EQ(s.fails[0].error(),
            "hlab-train: exit code 2: model.d_model must be divisible by "
            "n_heads");
  EXPECT_TRUE(s.completes.empty());
}

TEST_F(DaemonTest, ExitSeventyFiveIsRetryable) {
  fake().AddTask(MakeTask("t-75", "retryable"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("t-75"); }));
  FakeState s = fake().Snapshot();
  EXPECT_TRUE(s.fails[0].retryable());
  EXPECT_EQ(s.fails[0].fault(), hlab::v1::FAULT_CLASS_TASK);
  EXPECT_EQ(s.fails[0].exit_code(), 75);
  EXPECT_NE(s.fails[0].error().find("out of memory"), std::string::npos);
}

// The task file bounds the resume by the lease's resume_step: 0 without a
// recorded checkpoint (start over), else that step.
TEST_F(DaemonTest, TheTaskFileResumesFromNoCheckpointPastTheRecordedOne) {
  hlab::v1::Task fresh = MakeTask("t-fresh", "ok");
  hlab::v1::Task again = MakeTask("t-again", "ok");
  again.set_resume_checkpoint("/ck/step-0000000042.ckpt");
  again.set_resume_step(42);
  fake().AddTask(fresh);
  fake().AddTask(again);
  StartDaemon();
  ASSERT_TRUE(fake().WaitFor(
      [](const FakeState& s) { return s.completes.size() == 2; }));
  auto limit = [&](const char* id) {
    const nlohmann::json written = nlohmann::json::parse(
        std::ifstream(TaskDir(id) / "task.json"), nullptr, false);
    return written["checkpoint"].value("resume_max_step", int64_t{-1});
  };
  EXPECT_EQ(limit("t-fresh"), 0);
  EXPECT_EQ(limit("t-again"), 42);
}

// A trainer that stops itself (SIGSTOP, as a hang would look) while the
// worker keeps heartbeating: the watchdog continues and terminates it after
// the stall timeout, and the attempt is an infrastructure fault.
TEST_F(DaemonTest, WatchdogStopsAHungTrainerAsAnInfrastructureFault) {
  stall_timeout_ = absl::Seconds(1);
  fake().AddTask(MakeTask("t-hang", "hang"));
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("t-hang"); }));
  FakeState s = fake().Snapshot();
  ASSERT_EQ(s.fails.size(), 1u);
  EXPECT_EQ(s.fails[0].fault(), hlab::v1::FAULT_CLASS_INFRASTRUCTURE);
  EXPECT_TRUE(s.fails[0].retryable());
  EXPECT_NE(s.fails[0].error().find("hlab-train wrote no record for"),
            std::string::npos)
      << s.fails[0].error();
  EXPECT_NE(s.fails[0].error().find("stopped by the worker's watchdog"),
            std::string::npos)
      << s.fails[0].error();
  // Continued, it honoured SIGTERM (its trap), not a SIGKILL.
  EXPECT_EQ(s.fails[0].exit_code(), 75) << s.fails[0].error();
  EXPECT_EQ(metrics_->watchdog_stops(), 1);
}

TEST_F(DaemonTest, KillNineIsRetryableAndHeartbeatsCarriedProgress) {
  fake().AddTask(MakeTask("t-kill", "sleep"));
  StartDaemon();
  const pid_t pid = WaitForTrainer("t-kill", "running");
  ASSERT_GT(pid, 0);
  // A heartbeat carries the task's progress (step 7 from its step record).
  ASSERT_TRUE(fake().WaitFor([](const FakeState& s) {
    for (const auto& h : s.heartbeats) {
      for (const auto& t : h.tasks()) {
        if (t.task_id() == "t-kill" && t.step() == 7 && t.tokens() == 448 &&
            t.loss() == 1.25) {
          return true;
        }
      }
    }
    return false;
  }));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("t-kill"); }));
  FakeState s = fake().Snapshot();
  EXPECT_TRUE(s.fails[0].retryable());
  // Killed from outside: the infrastructure's fault, unless the OOM killer
  // counted a kill meanwhile (another process of this cgroup, here).
  if (s.fails[0].error().find("OOM killer") == std::string::npos) {
    EXPECT_EQ(s.fails[0].fault(), hlab::v1::FAULT_CLASS_INFRASTRUCTURE);
    EXPECT_EQ(s.fails[0].error(), "hlab-train: killed by signal 9 (SIGKILL)");
  }
  EXPECT_EQ(s.fails[0].exit_code(), 128 + SIGKILL);
}

TEST_F(DaemonTest, LostLeaseKillsTheTrainerAndReportsNothing) {
  fake().AddTask(MakeTask("t-lost", "sleep"));
  StartDaemon();
  const pid_t pid = WaitForTrainer("t-lost", "running");
  ASSERT_GT(pid, 0);
  fake().StopTask("t-lost", 1);
  // The runner ends once the trainer is gone.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!daemon_->RunningTasks().empty() && absl::Now() < deadline) {
    usleep(10000);
  }
  ASSERT_TRUE(daemon_->RunningTasks().empty());
  EXPECT_NE(::kill(pid, 0), 0) << "trainer still alive";
  FakeState s = fake().Snapshot();
  EXPECT_FALSE(s.Failed("t-lost"));
  EXPECT_FALSE(s.Completed("t-lost"));
}

TEST_F(DaemonTest, FencedReportsStopTheTrainer) {
  fake().FenceTask("t-fenced");
  fake().AddTask(MakeTask("t-fenced", "sleep"));
  StartDaemon();
  WaitForTrainer("t-fenced", "running");
  // Its first metric batch is refused as stale: the trainer is terminated.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!daemon_->RunningTasks().empty() && absl::Now() < deadline) {
    usleep(10000);
  }
  EXPECT_TRUE(daemon_->RunningTasks().empty());
  EXPECT_TRUE(fake().Snapshot().fails.empty());
}

TEST_F(DaemonTest, StopsATrainerOrphanedByADeadWorkerBeforeRestarting) {
  // A trainer of task t-orphan from a worker that was killed: still
  // running, recorded in the task dir.
  fs::create_directories(TaskDir("t-orphan"));
  const std::string script = (root_ / "orphan.sh").string();
  std::ofstream(script) << "#!/bin/bash\nwhile true; do sleep 0.05; done\n";
  fs::permissions(script, fs::perms::owner_all);
  TrainerLaunch launch;
  launch.argv = {script};
  auto orphan = TrainerProcess::Start(launch);
  ASSERT_TRUE(orphan.ok()) << orphan.status();
  ASSERT_TRUE(
      RecordTrainerPids(TaskDir("t-orphan").string(), {(*orphan)->pid()}).ok());
  fake().AddTask(MakeTask("t-orphan", "ok", /*attempt=*/2));
  StartDaemon();
  ASSERT_TRUE(fake().WaitFor(
      [](const FakeState& s) { return s.Completed("t-orphan"); }));
  const ExitStatus exit = (*orphan)->Wait();
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.signal, SIGTERM);
  EXPECT_FALSE(fs::exists(TaskDir("t-orphan") / "trainer.pids"));
}

TEST_F(DaemonTest, SurvivesACrashingTrainerAndTakesTheNextTask) {
  fake().AddTask(MakeTask("t-crash", "crash"));
  fake().AddTask(MakeTask("t-next", "ok"));
  StartDaemon();
  ASSERT_TRUE(fake().WaitFor([](const FakeState& s) {
    return s.Failed("t-crash") && s.Completed("t-next");
  }));
  FakeState s = fake().Snapshot();
  EXPECT_TRUE(s.fails[0].retryable());
  EXPECT_EQ(s.fails[0].exit_code(), 128 + SIGSEGV);
  StopDaemon();
  EXPECT_EQ(metrics_->failed(/*retryable=*/true), 1);
  EXPECT_EQ(metrics_->completed(), 1);
}

TEST_F(DaemonTest, GangTaskLaunchesEveryRankAndFailsWhenOneFails) {
  hlab::v1::Task task = MakeTask("t-gang", "gang");
  task.mutable_resources()->set_gpus(2);
  fake().AddTask(task);
  StartDaemon();
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("t-gang"); }));
  FakeState s = fake().Snapshot();
  EXPECT_TRUE(s.fails[0].retryable());
  EXPECT_EQ(s.fails[0].error(), "hlab-train rank 1: exit code 75");
  std::ifstream args_file(TaskDir("t-gang") / "args.txt");
  std::string line, rank0, rank1;
  while (std::getline(args_file, line)) {
    (line.find("--rank 0 ") != std::string::npos ? rank0 : rank1) = line;
  }
  EXPECT_NE(rank0.find("--record-fd 3"), std::string::npos) << rank0;
  EXPECT_NE(rank0.find("--world-size 2 --master-addr 127.0.0.1 --master-port "),
            std::string::npos)
      << rank0;
  EXPECT_NE(rank1.find("--rank 1 --world-size 2"), std::string::npos) << rank1;
  EXPECT_EQ(rank1.find("--record-fd"), std::string::npos) << rank1;
}

TEST_F(DaemonTest, CpuRanksTaskRunsEveryRankOnThisWorkerAndTakesItsSlots) {
  hlab::v1::Task task = MakeTask("t-ranks", "gang");
  task.mutable_resources()->set_cpu_ranks(2);
  fake().AddTask(task);
  StartDaemon("", /*capacity=*/3);
  ASSERT_TRUE(
      fake().WaitFor([](const FakeState& s) { return s.Failed("t-ranks"); }));
  FakeState s = fake().Snapshot();
  // The first lease offered three slots; while both ranks ran, one.
  ASSERT_FALSE(s.leases.empty());
  EXPECT_EQ(s.leases[0].free_slots(), 3);
  bool saw_one_free = false;
  for (const auto& lease : s.leases) saw_one_free |= lease.free_slots() == 1;
  EXPECT_TRUE(saw_one_free);
  std::ifstream args_file(TaskDir("t-ranks") / "args.txt");
  std::string line;
  int ranks = 0;
  while (std::getline(args_file, line)) {
    ++ranks;
    EXPECT_NE(line.find("--world-size 2 --master-addr 127.0.0.1"),
              std::string::npos)
        << line;
  }
  EXPECT_EQ(ranks, 2);
  // CPU ranks see no GPU (CUDA_VISIBLE_DEVICES set, empty).
  std::string cuda = "not read";
  std::getline(std::ifstream(TaskDir("t-ranks") / "cuda"), cuda);
  EXPECT_EQ(cuda, "");
  const nlohmann::json written =
      nlohmann::json::parse(std::ifstream(TaskDir("t-ranks") / "task.json"));
  EXPECT_EQ(written["device"], "cpu");
}

TEST_F(DaemonTest, GpuWorkerRunsOneTaskPerGpu) {
  StartTwoGpuTasks();
  EXPECT_EQ(daemon_->capacity(), 2);
  EXPECT_EQ(daemon_->RunningTasks().size(), 2u);
  std::string cuda_a, cuda_b;
  std::ifstream(TaskDir("t-gpu-a") / "cuda") >> cuda_a;
  std::ifstream(TaskDir("t-gpu-b") / "cuda") >> cuda_b;
  EXPECT_EQ(cuda_a + cuda_b, "01");
  const nlohmann::json written =
      nlohmann::json::parse(std::ifstream(TaskDir("t-gpu-a") / "task.json"));
  EXPECT_EQ(written["device"], "cuda");
  FakeState s = fake().Snapshot();
  ASSERT_FALSE(s.registers.empty());
  EXPECT_EQ(s.registers[0].capacity(), 2);
  EXPECT_EQ(s.registers[0].devices_size(), 3);
  // The first lease offered the CPU and both GPUs.
  EXPECT_EQ(s.leases[0].free_devices_size(), 3);
  StopDaemon();
  EXPECT_EQ(fake().Snapshot().fails.size(), 2u);
}

// Under Slurm, MIG or a container the daemon has its own
// CUDA_VISIBLE_DEVICES; the probe numbers the GPUs within it, so a rank must
// get the daemon's entry, not the bare ordinal (physical GPU 0 or 1 here).
TEST_F(DaemonTest, GpuRanksAreNamedThroughTheDaemonsVisibleDevices) {
  ASSERT_EQ(::setenv("CUDA_VISIBLE_DEVICES", "GPU-5a,GPU-7b", 1), 0);
  StartTwoGpuTasks();
  std::string cuda_a, cuda_b;
  std::ifstream(TaskDir("t-gpu-a") / "cuda") >> cuda_a;
  std::ifstream(TaskDir("t-gpu-b") / "cuda") >> cuda_b;
  EXPECT_EQ(cuda_a + "," + cuda_b, "GPU-5a,GPU-7b");
  StopDaemon();
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

// hlab-train and hlab-eval re-execute themselves (starting LibTorch twice)
// when OMP_WAIT_POLICY is unset, so the daemon sets it for them; a policy
// the daemon itself was given is passed on unchanged.
TEST_F(DaemonTest, ChildrenGetPassiveOpenMpWaitUnlessTheDaemonHasAPolicy) {
  ::unsetenv("OMP_WAIT_POLICY");
  fake().AddTask(MakeTask("t-omp", "ok"));
  fake().AddTask(MakeEvalTask("e-omp", "eval_ok"));
  StartDaemon();
  ASSERT_TRUE(fake().WaitFor([](const FakeState& s) {
    return s.Completed("t-omp") && s.Completed("e-omp");
  }));
  StopDaemon();
  std::string train_policy, eval_policy;
  std::getline(std::ifstream(TaskDir("t-omp") / "omp_wait_policy"),
               train_policy);
  std::getline(std::ifstream(TaskDir("e-omp") / "omp_wait_policy"),
               eval_policy);
  EXPECT_EQ(train_policy, "PASSIVE");
  EXPECT_EQ(eval_policy, "PASSIVE");

  ASSERT_EQ(::setenv("OMP_WAIT_POLICY", "ACTIVE", 1), 0);
  fake().AddTask(MakeTask("t-omp-active", "ok"));
  StartDaemon();
  ASSERT_TRUE(fake().WaitFor(
      [](const FakeState& s) { return s.Completed("t-omp-active"); }));
  StopDaemon();
  ::unsetenv("OMP_WAIT_POLICY");
  std::string given;
  std::getline(std::ifstream(TaskDir("t-omp-active") / "omp_wait_policy"),
               given);
  EXPECT_EQ(given, "ACTIVE");
}

TEST_F(DaemonTest, ShutdownTerminatesTrainersAndReportsThemRetryable) {
  fake().AddTask(MakeTask("t-term", "sleep"));
  StartDaemon();
  WaitForTrainer("t-term", "running");
  daemon_->Shutdown();
  run_thread_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_;
  daemon_.reset();
  FakeState s = fake().Snapshot();
  ASSERT_EQ(s.fails.size(), 1u);
  EXPECT_TRUE(s.fails[0].retryable());
  EXPECT_EQ(s.fails[0].fault(), hlab::v1::FAULT_CLASS_INFRASTRUCTURE);
  EXPECT_EQ(s.fails[0].exit_code(), 75);
  EXPECT_EQ(s.fails[0].error().rfind("worker shutting down", 0), 0u)
      << s.fails[0].error();
  // Then it left: one Deregister with its id.
  ASSERT_EQ(s.deregisters.size(), 1u);
  EXPECT_EQ(s.deregisters[0].worker_id(), "w-test");
  // The checkpoint the trainer wrote on SIGTERM was reported first.
  ASSERT_EQ(s.checkpoints.size(), 1u);
  EXPECT_EQ(s.checkpoints[0].checkpoint().step(), 7);
}

TEST_F(DaemonTest, ReconnectsAfterTheCoordinatorRestarts) {
  fake().AddTask(MakeTask("t-re", "wait_go"));
  StartDaemon();
  WaitForTrainer("t-re", "running");
  const int port = server_->port();
  server_->Shutdown();
  // The trainer finishes while the coordinator is down.
  std::ofstream(TaskDir("t-re") / "go") << "go";
  usleep(300000);
  server_ =
      std::make_unique<FakeServer>(std::make_unique<FakeCoordinator>(), port);
  ASSERT_EQ(server_->port(), port);
  ASSERT_TRUE(fake().WaitFor([](const FakeState& s) {
    return !s.registers.empty() && s.Completed("t-re");
  }));
  FakeState s = fake().Snapshot();
  EXPECT_EQ(s.registers[0].worker_id(), "w-test");
  // The points held while it was down arrive (step 2's at least; step 1's
  // may have gone to the first instance).
  bool step2 = false;
  for (const auto& p : s.Points("train_loss")) step2 |= p.step() == 2;
  EXPECT_TRUE(step2);
}

TEST_F(DaemonTest, RealTrainerCompletesATinyTask) {
  const char* bin = std::getenv("HLAB_TRAIN_BIN");
  if (bin == nullptr || !fs::exists(bin)) {
    GTEST_SKIP() << "set HLAB_TRAIN_BIN to an hlab-train binary";
  }
  auto example = RunAndCapture({bin, "--example-task"}, absl::Seconds(60));
  ASSERT_TRUE(example.ok()) << example.status();
  nlohmann::json task = nlohmann::json::parse(*example);
  // A few steps only.
  task.erase("tokens_per_param");
  const int64_t batch = task.value("batch_tokens", int64_t{0});
  ASSERT_GT(batch, 0);
  const int64_t warmup = task["schedule"].value("warmup_steps", int64_t{0});
  task["budget_tokens"] = batch * (warmup + 4);
  task["log_every_steps"] = 1;
  task["threads"] = 1;
  hlab::v1::Task t;
  t.set_task_id("t-real");
  t.set_attempt(1);
  t.set_kind(hlab::v1::TASK_KIND_TRAIN);
  t.add_run_ids("run-real");
  t.set_task_json(task.dump());
  fake().AddTask(t);
  StartDaemon(bin);
  ASSERT_TRUE(fake().WaitFor(
      [](const FakeState& s) {
        return s.Completed("t-real") || s.Failed("t-real");
      },
      absl::Minutes(10)));
  FakeState s = fake().Snapshot();
  ASSERT_TRUE(s.fails.empty()) << s.fails[0].error();
  const auto loss = s.Points("train_loss");
  ASSERT_FALSE(loss.empty());
  EXPECT_EQ(loss.back().step(), warmup + 4);
  EXPECT_GT(loss.back().value(), 0);
}

// SIGTERM mid-run (the daemon's shutdown), then a second attempt on a new
// daemon with the same data dir: it resumes from the checkpoint the first
// one wrote, and completes.
TEST_F(DaemonTest, RealTrainerResumesInTheNextAttempt) {
  const char* bin = std::getenv("HLAB_TRAIN_BIN");
  if (bin == nullptr || !fs::exists(bin)) {
    GTEST_SKIP() << "set HLAB_TRAIN_BIN to an hlab-train binary";
  }
  auto example = RunAndCapture({bin, "--example-task"}, absl::Seconds(60));
  ASSERT_TRUE(example.ok()) << example.status();
  nlohmann::json task = nlohmann::json::parse(*example);
  const int64_t batch = task.value("batch_tokens", int64_t{0});
  const int64_t warmup = task["schedule"].value("warmup_steps", int64_t{0});
  const int64_t steps = warmup + 60;
  task["budget_tokens"] = batch * steps;
  task["log_every_steps"] = 1;
  task["threads"] = 1;
  task["checkpoint"]["every_steps"] = 5;
  task["eval"]["sequences"] = 4;
  hlab::v1::Task t;
  t.set_task_id("t-resume");
  t.set_attempt(1);
  t.set_kind(hlab::v1::TASK_KIND_TRAIN);
  t.add_run_ids("run-resume");
  t.set_task_json(task.dump());
  fake().AddTask(t);
  StartDaemon(bin);
  ASSERT_TRUE(fake().WaitFor(
      [](const FakeState& s) {
        for (const auto& c : s.checkpoints) {
          if (c.checkpoint().step() >= 10) return true;
        }
        return !s.fails.empty() || !s.completes.empty();
      },
      absl::Minutes(10)));
  StopDaemon();
  FakeState first = fake().Snapshot();
  ASSERT_TRUE(first.completes.empty()) << "finished before SIGTERM";
  ASSERT_EQ(first.fails.size(), 1u);
  EXPECT_TRUE(first.fails[0].retryable());
  EXPECT_EQ(first.fails[0].exit_code(), 75) << first.fails[0].error();
  int64_t newest = 0;
  std::string newest_path;
  for (const auto& c : first.checkpoints) {
    if (c.checkpoint().step() > newest) {
      newest = c.checkpoint().step();
      newest_path = c.checkpoint().path();
    }
  }
  ASSERT_GE(newest, 10);

  // As the coordinator does: the newest checkpoint it recorded, whose
  // points are all stored; the trainer resumes from none past it.
  t.set_attempt(2);
  t.set_resume_checkpoint(newest_path);
  t.set_resume_step(newest);
  fake().AddTask(t);
  StartDaemon(bin);
  ASSERT_TRUE(fake().WaitFor(
      [](const FakeState& s) {
        return !s.completes.empty() || s.fails.size() > 1;
      },
      absl::Minutes(10)));
  FakeState second = fake().Snapshot();
  ASSERT_EQ(second.fails.size(), 1u) << second.fails.back().error();
  ASSERT_EQ(second.completes.size(), 1u);
  EXPECT_EQ(second.completes[0].attempt(), 2);
  // Attempt 2's points start right after the newest checkpoint.
  int64_t first_step = -1, last_step = -1;
  for (size_t i = first.points.size(); i < second.points.size(); ++i) {
    const auto& p = second.points[i];
    if (p.name() != "train_loss") continue;
    if (first_step < 0) first_step = p.step();
    last_step = p.step();
  }
  EXPECT_EQ(first_step, newest + 1);
  EXPECT_EQ(last_step, steps);
}

}  // namespace
}  // namespace hlab::worker
