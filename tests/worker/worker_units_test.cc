// Unit tests of the worker's parts: record relay, exit classification,
// device probe parsing, and the trainer child process.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "worker/devices.h"
#include "worker/record_relay.h"
#include "worker/task_runner.h"
#include "worker/trainer_process.h"

namespace hlab::worker {
namespace {

namespace fs = std::filesystem;

hlab::v1::Task TrainTask() {
  hlab::v1::Task t;
  t.set_task_id("t1");
  t.set_attempt(2);
  t.set_kind(hlab::v1::TASK_KIND_TRAIN);
  t.add_run_ids("run-a");
  return t;
}

TEST(RecordRelayTest, StepAndEvalRecordsBecomePoints) {
  RecordRelay relay(TrainTask());
  const absl::Time now = absl::FromUnixMillis(1000);
  ASSERT_TRUE(relay
                  .Add(R"({"type":"step","step":10,"tokens":640,"loss":2.5,)"
                       R"("lr":0.001,"grad_norm":0.7,"tokens_per_s":123.0})",
                       now)
                  .ok());
  ASSERT_TRUE(relay
                  .Add(R"({"type":"eval","step":10,"tokens":640,)"
                       R"("val_loss":2.75,"val_recall_loss":3.5})",
                       now)
                  .ok());
  auto points = relay.PeekPoints(100);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].name(), "train_loss");
  EXPECT_EQ(points[0].value(), 2.5);
  EXPECT_EQ(points[0].step(), 10);
  EXPECT_EQ(points[0].tokens(), 640);
  EXPECT_EQ(points[0].run_id(), "run-a");
  EXPECT_EQ(points[0].wall_unix_ms(), 1000);
  EXPECT_EQ(points[1].name(), "lr");
  EXPECT_EQ(points[2].name(), "grad_norm");
  EXPECT_EQ(points[3].name(), "tokens_per_s");
  EXPECT_EQ(points[4].name(), "val_loss");
  EXPECT_EQ(points[4].value(), 2.75);
  EXPECT_EQ(points[5].name(), "val_recall_loss");
  EXPECT_EQ(relay.progress().step(), 10);
  EXPECT_EQ(relay.progress().loss(), 2.5);
  EXPECT_EQ(relay.progress().attempt(), 2);
  relay.AckPoints(4);
  EXPECT_EQ(relay.PeekPoints(100).size(), 2u);
}

// The Q-gradient hook's record: one point per head, q_grad_norm_l<k>h<h>;
// non-numbers are dropped.
TEST(RecordRelayTest, AnalysisRecordsBecomeOnePointPerHead) {
  RecordRelay relay(TrainTask());
  ASSERT_TRUE(relay
                  .Add(R"({"type":"analysis","step":8,"tokens":512,)"
                       R"("q_grad_norm":{"l1h0":0.5,"l1h1":0.25,"l3h0":null}})",
                       absl::FromUnixMillis(7))
                  .ok());
  auto points = relay.PeekPoints(100);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].name(), "q_grad_norm_l1h0");
  EXPECT_EQ(points[0].value(), 0.5);
  EXPECT_EQ(points[0].step(), 8);
  EXPECT_EQ(points[0].tokens(), 512);
  EXPECT_EQ(points[1].name(), "q_grad_norm_l1h1");
  EXPECT_EQ(points[1].value(), 0.25);
}

// Integer fields beyond int64 or given as huge floats are taken as
// missing (0), not converted undefined (found by
// tests/fuzz/fuzz_trainer_record.cc under UBSan).
TEST(RecordRelayTest, IntegersBeyondInt64AreTakenAsMissing) {
  RecordRelay relay(TrainTask());
  const absl::Time now = absl::FromUnixMillis(1000);
  ASSERT_TRUE(
      relay.Add(R"({"type":"step","step":3,"tokens":7.7e94,"loss":2.5})", now)
          .ok());
  ASSERT_TRUE(
      relay.Add(R"({"type":"step","step":18446744073709551615,"loss":2})", now)
          .ok());
  const std::vector<hlab::v1::MetricPoint> points = relay.PeekPoints(10);
  ASSERT_FALSE(points.empty());
  EXPECT_EQ(points[0].step(), 3);
  EXPECT_EQ(points[0].tokens(), 0);
}

TEST(RecordRelayTest, EvaluatorResultsKeepTheirDetailsAndAreNoPoints) {
  hlab::v1::Task task = TrainTask();
  task.set_kind(hlab::v1::TASK_KIND_EVAL);
  task.set_eval_step(77);
  RecordRelay relay(task);
  const absl::Time now = absl::FromUnixMillis(1000);
  ASSERT_TRUE(
      relay
          .Add(R"({"type":"progress","eval":"longppl","done":3,"total":8})",
               now)
          .ok());
  EXPECT_EQ(relay.eval_done(), 3);
  EXPECT_EQ(relay.eval_total(), 8);
  ASSERT_TRUE(relay
                  .Add(R"({"type":"result","metric":"log_longppl",)"
                       R"("value":1.5,"details":{"key_tokens":12}})",
                       now)
                  .ok());
  ASSERT_TRUE(relay
                  .Add(R"({"type":"result","run_id":"run-b","step":5,)"
                       R"("metric":"niah_acc","value":null})",
                       now)
                  .ok());
  EXPECT_FALSE(
      relay.Add(R"({"type":"result","value":1.0})", now).ok());  // no metric
  EXPECT_FALSE(relay.HasPending());
  ASSERT_EQ(relay.results().size(), 2u);
  const hlab::v1::MetricPoint& a = relay.results()[0];
  EXPECT_EQ(a.run_id(), "run-a");  // the task's run
  EXPECT_EQ(a.name(), "log_longppl");
  EXPECT_EQ(a.step(), 77);  // the task's eval_step
  EXPECT_EQ(a.value(), 1.5);
  EXPECT_EQ(a.details_json(), R"({"key_tokens":12})");
  const hlab::v1::MetricPoint& b = relay.results()[1];
  EXPECT_EQ(b.run_id(), "run-b");
  EXPECT_EQ(b.step(), 5);
  EXPECT_TRUE(std::isnan(b.value()));
  EXPECT_EQ(b.details_json(), "");
}

TEST(RecordRelayTest, FlushesAtIntervalOrBatchSize) {
  RecordRelay relay(TrainTask());
  const absl::Time t0 = absl::FromUnixMillis(5000);
  EXPECT_FALSE(relay.FlushDue(t0));
  ASSERT_TRUE(relay.Add(R"({"type":"step","step":1,"loss":1})", t0).ok());
  EXPECT_FALSE(relay.FlushDue(t0));
  EXPECT_TRUE(relay.FlushDue(t0 + RecordRelay::kFlushInterval));
  RecordRelay many(TrainTask());
  for (size_t i = 0; i < RecordRelay::kFlushPoints; ++i) {
    ASSERT_TRUE(many.Add(R"({"type":"step","step":1,"loss":1})", t0).ok());
  }
  EXPECT_TRUE(many.FlushDue(t0));
}

TEST(RecordRelayTest, CheckpointsAndErrors) {
  RecordRelay relay(TrainTask());
  ASSERT_TRUE(
      relay
          .Add(R"({"type":"checkpoint","step":20,"tokens":1280,)"
               R"("kind":"latest","path":"/x/step-20.ckpt","sha256":"ab"})",
               absl::Now())
          .ok());
  ASSERT_EQ(relay.checkpoints().size(), 1u);
  const auto& c = relay.checkpoints().front();
  EXPECT_EQ(c.step(), 20);
  EXPECT_EQ(c.tokens(), 1280);
  EXPECT_EQ(c.path(), "/x/step-20.ckpt");
  EXPECT_EQ(c.sha256(), "ab");
  EXPECT_EQ(c.run_id(), "run-a");
  EXPECT_EQ(c.task_id(), "t1");
  EXPECT_EQ(c.attempt(), 2);
  EXPECT_FALSE(c.branch_point());
  EXPECT_TRUE(relay.FlushDue(absl::Now()));
  ASSERT_TRUE(
      relay
          .Add(R"({"type":"error","exit_code":2,"message":"bad d_model"})",
               absl::Now())
          .ok());
  EXPECT_EQ(relay.last_error(), "bad d_model");
  EXPECT_EQ(relay.last_error_code(), 2);
  EXPECT_FALSE(relay.Add("not json", absl::Now()).ok());
  EXPECT_FALSE(relay.Add(R"({"no_type":1})", absl::Now()).ok());
}

TEST(RecordRelayTest, TrunkPointsNameEveryRunSharingTheStep) {
  hlab::v1::Task t;
  t.set_task_id("trunk");
  t.set_kind(hlab::v1::TASK_KIND_TRUNK);
  t.add_run_ids("small");
  t.add_run_ids("large");
  auto* b1 = t.add_branch_points();
  b1->set_run_id("small");
  b1->set_step(9);
  auto* b2 = t.add_branch_points();
  b2->set_run_id("large");
  b2->set_step(18);
  RecordRelay relay(t);
  ASSERT_TRUE(
      relay.Add(R"({"type":"step","step":5,"loss":3})", absl::Now()).ok());
  ASSERT_TRUE(
      relay.Add(R"({"type":"step","step":12,"loss":2})", absl::Now()).ok());
  auto points = relay.PeekPoints(100);
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].run_id(), "small");
  EXPECT_EQ(points[1].run_id(), "large");
  EXPECT_EQ(points[2].run_id(), "large");
  EXPECT_EQ(points[2].step(), 12);
  ASSERT_TRUE(
      relay
          .Add(R"({"type":"checkpoint","step":9,"kind":"branch",)"
               R"("path":"b","sha256":"cd","branch_budget_tokens":100})",
               absl::Now())
          .ok());
  ASSERT_TRUE(relay
                  .Add(R"({"type":"checkpoint","step":10,"kind":"latest",)"
                       R"("path":"l","sha256":"ef"})",
                       absl::Now())
                  .ok());
  // A kept checkpoint (evaluation.trajectory) is the trajectory's, the
  // longest run's, even at a step the smaller run shares.
  ASSERT_TRUE(relay
                  .Add(R"({"type":"checkpoint","step":8,"kind":"kept",)"
                       R"("path":"k","sha256":"01"})",
                       absl::Now())
                  .ok());
  ASSERT_EQ(relay.checkpoints().size(), 3u);
  EXPECT_TRUE(relay.checkpoints()[0].branch_point());
  EXPECT_EQ(relay.checkpoints()[0].run_id(), "small");
  EXPECT_FALSE(relay.checkpoints()[1].branch_point());
  EXPECT_EQ(relay.checkpoints()[1].run_id(), "");
  EXPECT_FALSE(relay.checkpoints()[2].branch_point());
  EXPECT_EQ(relay.checkpoints()[2].run_id(), "large");
  EXPECT_EQ(relay.checkpoints()[2].step(), 8);
}

TEST(ClassifyExitTest, MapsExitCodes) {
  EXPECT_TRUE(ClassifyExit({ExitStatus{}}, "").complete);
  TaskOutcome permanent = ClassifyExit({ExitStatus{false, 2, 0}}, "bad task");
  EXPECT_FALSE(permanent.complete);
  EXPECT_FALSE(permanent.retryable);
  EXPECT_EQ(permanent.exit_code, 2);
  EXPECT_EQ(permanent.message, "hlab-train: exit code 2: bad task");
  EXPECT_FALSE(ClassifyExit({ExitStatus{false, 3, 0}}, "").retryable);
  EXPECT_TRUE(ClassifyExit({ExitStatus{false, 75, 0}}, "").retryable);
  EXPECT_FALSE(ClassifyExit({ExitStatus{false, 75, 0}}, "").infrastructure);
  EXPECT_TRUE(ClassifyExit({ExitStatus{false, 1, 0}}, "").retryable);
  // 74: this node's disk refused a checkpoint; not the task's fault.
  TaskOutcome storage = ClassifyExit(
      {ExitStatus{false, 74, 0}},
      "cannot write checkpoint '/d/step-0000000200.ckpt.tmp': No space left "
      "on device");
  EXPECT_TRUE(storage.retryable);
  EXPECT_TRUE(storage.infrastructure);
  EXPECT_EQ(storage.exit_code, 74);
  TaskOutcome killed = ClassifyExit({ExitStatus{true, 0, SIGKILL}}, "");
  EXPECT_TRUE(killed.retryable);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
  EXPECT_EQ(killed.message, "hlab-train: killed by signal 9 (SIGKILL)");
  // A gang: any failing rank fails the task; a permanent one wins.
  TaskOutcome gang = ClassifyExit(
      {ExitStatus{}, ExitStatus{true, 0, SIGTERM}, ExitStatus{false, 2, 0}},
      "");
  EXPECT_FALSE(gang.retryable);
  EXPECT_EQ(gang.message, "hlab-train rank 2: exit code 2");
  EXPECT_TRUE(
      ClassifyExit({ExitStatus{}, ExitStatus{false, 75, 0}}, "").retryable);
}

// Whose fault: a non-zero exit or a crash is the task's; a process killed
// from outside is the infrastructure's, unless the OOM killer did it.
TEST(ClassifyExitTest, SeparatesTaskErrorsFromInfrastructure) {
  for (int code : {1, 2, 3, 75}) {
    EXPECT_FALSE(ClassifyExit({ExitStatus{false, code, 0}}, "").infrastructure)
        << code;
  }
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) {
    TaskOutcome crash = ClassifyExit({ExitStatus{true, 0, sig}}, "");
    EXPECT_FALSE(crash.infrastructure) << sig;
    EXPECT_TRUE(crash.retryable) << sig;
  }
  for (int sig : {SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE}) {
    TaskOutcome killed = ClassifyExit({ExitStatus{true, 0, sig}}, "");
    EXPECT_TRUE(killed.infrastructure) << sig;
    EXPECT_TRUE(killed.retryable) << sig;
  }
  TaskOutcome oom = ClassifyExit({ExitStatus{true, 0, SIGKILL}}, "", -1,
                                 "hlab-train", /*oom_kills=*/true);
  EXPECT_FALSE(oom.infrastructure);
  EXPECT_TRUE(oom.retryable);
  EXPECT_EQ(oom.message,
            "hlab-train: killed by signal 9 (SIGKILL) by the kernel's OOM "
            "killer");
  // Only a SIGKILL is the OOM killer's: a SIGTERM stays the outside's.
  EXPECT_TRUE(ClassifyExit({ExitStatus{true, 0, SIGTERM}}, "", -1, "hlab-train",
                           /*oom_kills=*/true)
                  .infrastructure);
  // A gang whose first failed rank was killed from outside, its peers then
  // terminated by the worker: the infrastructure's.
  EXPECT_TRUE(
      ClassifyExit({ExitStatus{true, 0, SIGTERM}, ExitStatus{true, 0, SIGKILL}},
                   "", /*first_failed=*/1)
          .infrastructure);
}

TEST(CgroupOomKillsTest, ReadsTheCountOrSaysItCannot) {
  // -1 where cgroup v2's memory.events is not readable; else a count.
  EXPECT_GE(CgroupOomKills(), -1);
}

TEST(TaskDirNameTest, KeepsSafeCharacters) {
  EXPECT_EQ(TaskDirName("abc-12_3.x"), "abc-12_3.x");
  EXPECT_EQ(TaskDirName("../etc/passwd"), ".._etc_passwd");
  EXPECT_EQ(TaskDirName(".."), "_");
}

TEST(DevicesTest, ParsesProbe) {
  auto devices = ParseProbeDevices(
      R"({"cpu":{"cores":16,"memory_bytes":1024},"cuda":[)"
      R"({"index":0,"name":"NVIDIA H200","memory_bytes":2048},)"
      R"({"index":1,"name":"NVIDIA H200","memory_bytes":2048}],)"
      R"("torch_version":"2.1","cuda_build":true})");
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[0].kind(), "cpu");
  EXPECT_EQ((*devices)[0].cores(), 16);
  EXPECT_EQ((*devices)[0].memory_bytes(), 1024);
  EXPECT_EQ((*devices)[2].kind(), "cuda");
  EXPECT_EQ((*devices)[2].index(), 1);
  EXPECT_EQ((*devices)[2].name(), "NVIDIA H200");
  EXPECT_EQ(CountGpus(*devices), 2);
  EXPECT_FALSE(ParseProbeDevices("nonsense").ok());
  EXPECT_FALSE(ParseProbeDevices(R"({"cuda":[]})").ok());
  EXPECT_FALSE(ParseProbeDevices(R"({"cpu":{"cores":2},"cuda":[{}]})").ok());
}

TEST(DevicesTest, ChildCudaVisibleDevicesMapsOrdinalsThroughTheDaemonsList) {
  using Visible = std::optional<std::string>;
  // No list of its own: ordinal i is GPU i.
  EXPECT_EQ(*ChildCudaVisibleDevices({1}, std::nullopt), "1");
  EXPECT_EQ(*ChildCudaVisibleDevices({0, 1}, std::nullopt), "0,1");
  // Slurm's indices, UUIDs and MIG instances pass through as given.
  EXPECT_EQ(*ChildCudaVisibleDevices({1}, Visible("2,3")), "3");
  EXPECT_EQ(*ChildCudaVisibleDevices({0, 1}, Visible("GPU-a, GPU-b")),
            "GPU-a,GPU-b");
  EXPECT_EQ(*ChildCudaVisibleDevices({0}, Visible("MIG-9f")), "MIG-9f");
  // No GPU for the child: none visible, whatever the daemon sees.
  EXPECT_EQ(*ChildCudaVisibleDevices({}, std::nullopt), "");
  EXPECT_EQ(*ChildCudaVisibleDevices({}, Visible("4,5")), "");
  // An ordinal outside the daemon's list is refused, naming the list.
  auto outside = ChildCudaVisibleDevices({2}, Visible("4,5"));
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(outside.status().message().find("CUDA_VISIBLE_DEVICES=\"4,5\""),
            std::string::npos)
      << outside.status();
  EXPECT_FALSE(ChildCudaVisibleDevices({0}, Visible("")).ok());
}

class TrainerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hlab_worker_proc_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Script(const std::string& body) {
    const std::string path = dir_ + "/script.sh";
    std::ofstream(path) << "#!/bin/bash\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }

  std::string dir_;
};

TEST_F(TrainerProcessTest, RelaysLinesAndExitCode) {
  TrainerLaunch launch;
  launch.argv = {Script("echo '{\"a\":1}' >&3; echo out; printf 'x\\ny' >&3; "
                        "echo \"$FOO\" >&2; exit 7"),
                 "arg"};
  launch.env = {"FOO=bar"};
  launch.log_path = dir_ + "/log";
  launch.record_pipe = true;
  auto proc = TrainerProcess::Start(launch);
  ASSERT_TRUE(proc.ok()) << proc.status();
  std::vector<std::string> lines;
  while (!(*proc)->Poll()) {
    for (auto& l : (*proc)->ReadLines(absl::Milliseconds(50)))
      lines.push_back(l);
  }
  for (auto& l : (*proc)->ReadLines(absl::ZeroDuration())) lines.push_back(l);
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"a\":1}", "x", "y"}));
  EXPECT_EQ((*proc)->exit_status()->code, 7);
  EXPECT_FALSE((*proc)->exit_status()->signaled);
  std::ifstream log(launch.log_path);
  std::string all((std::istreambuf_iterator<char>(log)), {});
  EXPECT_EQ(all, "out\nbar\n");
}

TEST_F(TrainerProcessTest, TerminateEscalatesToKill) {
  TrainerLaunch launch;
  launch.argv = {Script("trap '' TERM; touch " + dir_ +
                        "/ready; while true; do sleep 0.05; done")};
  auto proc = TrainerProcess::Start(launch);
  ASSERT_TRUE(proc.ok()) << proc.status();
  while (!fs::exists(dir_ + "/ready")) usleep(10000);
  const ExitStatus exit = (*proc)->Terminate(absl::Milliseconds(200));
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.signal, SIGKILL);
}

TEST_F(TrainerProcessTest, MissingProgramIsNotFound) {
  TrainerLaunch launch;
  launch.argv = {dir_ + "/nope"};
  EXPECT_EQ(TrainerProcess::Start(launch).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(TrainerProcessTest, RunAndCaptureReturnsStdout) {
  auto out = RunAndCapture({Script("echo hello")}, absl::Seconds(30));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "hello\n");
  EXPECT_FALSE(RunAndCapture({Script("exit 3")}, absl::Seconds(30)).ok());
}

}  // namespace
}  // namespace hlab::worker
