// Early stop (Store::StopPredictedRuns): which runs become PREDICTED, what
// happens to their tasks and shared trunk, and how `hlab resume --run`
// brings one back while a sweep's resume leaves it.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using ::testing::ElementsAre;
using testing::Ids;
using ::testing::IsEmpty;
using testing::MakeRun;
using testing::MakeSweep;
using testing::MakeTask;
using testing::T;
using testing::TempDir;

const absl::Duration kLease = absl::Seconds(30);

// The shared trunk "g.trunk" of sweep `sweep` (a task of no run).
TaskSpec Trunk(int64_t sweep) {
  TaskSpec trunk = MakeTask("g.trunk", sweep, "", {}, 0, 0, TaskKind::kTrunk);
  trunk.max_attempts = 3;
  return trunk;
}

// A sweep of runs r1 and r2, each with a TRAIN task and an EVAL task after
// it.
struct TwoRuns {
  TwoRuns() {
    auto opened = Store::Open(dir.File("hlab.db"));
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = std::move(opened).value();
    sweep_id = store->CreateSweep(MakeSweep("s"), T(0))->sweep_id;
    EXPECT_TRUE(
        store->AddRuns(sweep_id, {MakeRun("r1"), MakeRun("r2")}, T(0)).ok());
    std::vector<TaskSpec> tasks;
    for (const std::string run : {"r1", "r2"}) {
      tasks.push_back(MakeTask(run + ".train", sweep_id, run));
      tasks.push_back(MakeTask(run + ".eval", sweep_id, run, {run + ".train"},
                               0, 0, TaskKind::kEval));
    }
    EXPECT_TRUE(store->AddTasks(tasks, T(0)).ok());
  }
  TaskState StateOf(const std::string& task) {
    return store->GetTask(task)->state;
  }
  TempDir dir;
  std::unique_ptr<Store> store;
  int64_t sweep_id = 0;
};

TEST(StoreEarlyStopTest, PendingRunBecomesPredictedAndItsTasksAreNotLeased) {
  TwoRuns f;
  auto stopped = f.store->StopPredictedRuns(f.sweep_id, {"r1"},
                                            "loss interval 0.01 < 0.05", T(1));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_THAT(*stopped, ElementsAre("r1"));
  const store::Run run = *f.store->GetRun("r1");
  EXPECT_EQ(run.state, RunState::kPredicted);
  EXPECT_EQ(run.phase, RunPhase::kPredicted);
  EXPECT_EQ(f.StateOf("r1.train"), TaskState::kCancelled);
  EXPECT_EQ(f.StateOf("r1.eval"), TaskState::kCancelled);
  EXPECT_EQ(f.store->GetRun("r2")->state, RunState::kPending);
  EXPECT_THAT(Ids(*f.store->NextLeasableTasks(T(2), 10)),
              ElementsAre("r2.train"));
  EXPECT_EQ(f.store->LeaseTask("r1.train", "w1", T(2), kLease).status().code(),
            absl::StatusCode::kFailedPrecondition);
  bool announced = false;
  const std::vector<Event> events = *f.store->EventsSince(f.sweep_id, 0, 1000);
  for (const Event& e : events) {
    if (e.run_id == "r1" && e.kind == "run_state" &&
        e.message == "PREDICTED: loss interval 0.01 < 0.05") {
      announced = true;
    }
  }
  EXPECT_TRUE(announced);
  // Counted as its own state, and a cancel leaves it as it is.
  EXPECT_EQ(f.store->CountsByState()->runs["PREDICTED"], 1);
  ASSERT_TRUE(f.store->CancelRun("r1", T(3)).ok());
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kPredicted);
}

TEST(StoreEarlyStopTest, RunWhoseTrainingStartedIsNeverStopped) {
  TwoRuns f;
  auto attempt = f.store->LeaseTask("r1.train", "w1", T(1), kLease);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  // r2's lease expires: PENDING again, but it was started once.
  ASSERT_TRUE(f.store->LeaseTask("r2.train", "w2", T(1), kLease).ok());
  ASSERT_TRUE(f.store->ExpireLeases(T(100)).ok());
  ASSERT_EQ(f.StateOf("r2.train"), TaskState::kPending);
  auto stopped =
      f.store->StopPredictedRuns(f.sweep_id, {"r1", "r2"}, "", T(100));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_THAT(*stopped, IsEmpty());
  EXPECT_EQ(f.store->GetRun("r2")->state, RunState::kPending);
  EXPECT_EQ(f.StateOf("r2.eval"), TaskState::kPending);
  // r1's lease expired too (T(100)); lease it again and finish it: the
  // holder's writes are not fenced off by an early stop that never was.
  ASSERT_EQ(f.StateOf("r1.train"), TaskState::kPending);
  auto again = f.store->LeaseTask("r1.train", "w1", T(101), kLease);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(*f.store->StopPredictedRuns(f.sweep_id, {"r1"}, "", T(102)),
              IsEmpty());
  EXPECT_TRUE(f.store->CompleteTask("r1.train", *again, T(103)).ok());
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kRunning);
}

TEST(StoreEarlyStopTest, ResumeRunTrainsItAndSweepResumeLeavesIt) {
  TwoRuns f;
  ASSERT_TRUE(f.store->StopPredictedRuns(f.sweep_id, {"r1"}, "", T(1)).ok());
  auto sweep_resumed = f.store->ResumeSweep(f.sweep_id, T(2));
  ASSERT_TRUE(sweep_resumed.ok()) << sweep_resumed.status();
  EXPECT_TRUE(sweep_resumed->empty());
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kPredicted);
  EXPECT_EQ(f.StateOf("r1.train"), TaskState::kCancelled);

  auto resumed = f.store->ResumeRuns({"r1"}, T(3));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->size(), 1u);
  const store::Run run = *f.store->GetRun("r1");
  EXPECT_EQ(run.state, RunState::kPending);
  EXPECT_EQ(run.phase, RunPhase::kWaiting);
  EXPECT_EQ(f.StateOf("r1.train"), TaskState::kPending);
  EXPECT_EQ(f.StateOf("r1.eval"), TaskState::kPending);
  EXPECT_THAT(Ids(*f.store->NextLeasableTasks(T(4), 10)),
              ElementsAre("r1.train", "r2.train"));
  // Resumed by hand, it is not stopped again by the next predictions.
  EXPECT_THAT(*f.store->StopPredictedRuns(f.sweep_id, {"r1"}, "", T(4)),
              IsEmpty());
  // Trained anyway, it ends SUCCEEDED like any run.
  for (const std::string task : {"r1.train", "r1.eval"}) {
    auto attempt = f.store->LeaseTask(task, "w1", T(5), kLease);
    ASSERT_TRUE(attempt.ok()) << task << ": " << attempt.status();
    ASSERT_TRUE(f.store->CompleteTask(task, *attempt, T(6)).ok());
  }
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kSucceeded);
}

// Two runs branch from one trunk: stopping one leaves the trunk to the
// other; once both are PREDICTED the trunk, never started, is not trained.
// A sweep's resume leaves it; `hlab resume --run` reopens it.
TEST(StoreEarlyStopTest, TrunkIsNotTrainedOnceOnlyPredictedRunsNeedIt) {
  TempDir dir;
  auto store = std::move(Store::Open(dir.File("hlab.db"))).value();
  const int64_t sweep = store->CreateSweep(MakeSweep("s"), T(0))->sweep_id;
  ASSERT_TRUE(store->AddRuns(sweep, {MakeRun("r1"), MakeRun("r2")}, T(0)).ok());
  std::vector<TaskSpec> tasks = {Trunk(sweep)};
  for (const std::string run : {"r1", "r2"}) {
    tasks.push_back(MakeTask(run + ".decay", sweep, run, {"g.trunk"}, 0, 0,
                             TaskKind::kDecay));
  }
  const absl::Status added = store->AddTasks(tasks, T(0)).status();
  ASSERT_TRUE(added.ok()) << added;

  EXPECT_THAT(*store->StopPredictedRuns(sweep, {"r1"}, "", T(1)),
              ElementsAre("r1"));
  EXPECT_EQ(store->GetTask("g.trunk")->state, TaskState::kPending);
  EXPECT_EQ(store->GetTask("r2.decay")->state, TaskState::kPending);
  EXPECT_THAT(*store->StopPredictedRuns(sweep, {"r2"}, "", T(2)),
              ElementsAre("r2"));
  EXPECT_EQ(store->GetTask("g.trunk")->state, TaskState::kCancelled);
  EXPECT_THAT(*store->NextLeasableTasks(T(3), 10), IsEmpty());

  ASSERT_TRUE(store->ResumeSweep(sweep, T(4)).ok());
  EXPECT_EQ(store->GetTask("g.trunk")->state, TaskState::kCancelled);
  ASSERT_EQ(store->ResumeRuns({"r2"}, T(5))->size(), 1u);
  EXPECT_EQ(store->GetTask("g.trunk")->state, TaskState::kPending);
  EXPECT_THAT(Ids(*store->NextLeasableTasks(T(6), 10)), ElementsAre("g.trunk"));
  EXPECT_EQ(store->GetRun("r1")->state, RunState::kPredicted);
}

// A trunk in segments (schedule_policy: adaptive): r1 branches at the end
// of s1, r2 of s2, r3 of s3; each decay waits for every segment up to its
// branch point. Early stop cancels the never-started segments past the last
// one a run still needs; the runs past a training segment are on the trunk.
TEST(StoreEarlyStopTest, SegmentsOnlyPredictedRunsNeedAreNotTrained) {
  TempDir dir;
  auto store = std::move(Store::Open(dir.File("hlab.db"))).value();
  const int64_t sweep = store->CreateSweep(MakeSweep("s"), T(0))->sweep_id;
  ASSERT_TRUE(
      store->AddRuns(sweep, {MakeRun("r1"), MakeRun("r2"), MakeRun("r3")}, T(0))
          .ok());
  std::vector<TaskSpec> tasks;
  std::vector<std::string> before;
  for (const std::string k : {"1", "2", "3"}) {
    TaskSpec segment = MakeTask("s" + k, sweep, "", {}, 0, 0, TaskKind::kTrunk);
    segment.max_attempts = 3;
    if (!before.empty()) segment.depends_on = {before.back()};
    tasks.push_back(segment);
    before.push_back("s" + k);
    tasks.push_back(MakeTask("r" + k + ".decay", sweep, "r" + k, before, 0, 0,
                             TaskKind::kDecay));
  }
  const absl::Status added = store->AddTasks(tasks, T(0)).status();
  ASSERT_TRUE(added.ok()) << added;

  EXPECT_THAT(*store->StopPredictedRuns(sweep, {"r3"}, "", T(1)),
              ElementsAre("r3"));
  EXPECT_EQ(store->GetTask("s3")->state, TaskState::kCancelled);
  EXPECT_EQ(store->GetTask("s2")->state, TaskState::kPending);
  EXPECT_THAT(*store->StopPredictedRuns(sweep, {"r1"}, "", T(2)),
              ElementsAre("r1"));
  EXPECT_EQ(store->GetTask("s1")->state, TaskState::kPending);  // r2's
  auto attempt = store->LeaseTask("s1", "w1", T(3), kLease);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  EXPECT_EQ(store->GetRun("r2")->phase, RunPhase::kTrunk);
  EXPECT_THAT(*store->StopPredictedRuns(sweep, {"r2"}, "", T(4)),
              ElementsAre("r2"));
  EXPECT_EQ(store->GetTask("s2")->state, TaskState::kCancelled);
  EXPECT_EQ(store->GetTask("s1")->state, TaskState::kLeased);  // untouched
  ASSERT_EQ(store->ResumeRuns({"r3"}, T(5))->size(), 1u);  // trains it anyway
  EXPECT_EQ(store->GetTask("s3")->state, TaskState::kPending);
  EXPECT_EQ(store->GetTask("s2")->state, TaskState::kPending);
  EXPECT_EQ(store->GetRun("r3")->phase, RunPhase::kTrunk);
  EXPECT_TRUE(store->CompleteTask("s1", *attempt, T(6)).ok());
  EXPECT_EQ(store->GetRun("r3")->phase, RunPhase::kWaiting);
  EXPECT_THAT(Ids(*store->NextLeasableTasks(T(7), 10)), ElementsAre("s2"));
}

// A trunk that already trains keeps training; the stopped run only skips
// its own decay.
TEST(StoreEarlyStopTest, RunOnATrainingTrunkSkipsOnlyItsOwnDecay) {
  TempDir dir;
  auto store = std::move(Store::Open(dir.File("hlab.db"))).value();
  const int64_t sweep = store->CreateSweep(MakeSweep("s"), T(0))->sweep_id;
  ASSERT_TRUE(store->AddRuns(sweep, {MakeRun("r1")}, T(0)).ok());
  ASSERT_TRUE(store
                  ->AddTasks({Trunk(sweep),
                              MakeTask("r1.decay", sweep, "r1", {"g.trunk"}, 0,
                                       0, TaskKind::kDecay)},
                             T(0))
                  .ok());
  auto attempt = store->LeaseTask("g.trunk", "w1", T(1), kLease);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  EXPECT_THAT(*store->StopPredictedRuns(sweep, {"r1"}, "", T(2)),
              ElementsAre("r1"));
  EXPECT_EQ(store->GetTask("g.trunk")->state, TaskState::kLeased);
  EXPECT_EQ(store->GetTask("r1.decay")->state, TaskState::kCancelled);
  EXPECT_TRUE(store->CompleteTask("g.trunk", *attempt, T(3)).ok());
  EXPECT_EQ(store->GetRun("r1")->state, RunState::kPredicted);
}

// Other runs' tasks wait for r1's training (a LongPPL reference), and r3
// belongs to a second sweep: neither is stopped.
TEST(StoreEarlyStopTest, ReferenceRunAndSharedRunAreNotStopped) {
  TwoRuns f;
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r2.longppl", f.sweep_id, "r2",
                                       {"r1.train"}, 0, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  const int64_t other = f.store->CreateSweep(MakeSweep("o"), T(0))->sweep_id;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r3")}, T(0)).ok());
  ASSERT_TRUE(f.store->AddRuns(other, {MakeRun("r3")}, T(0)).ok());
  ASSERT_TRUE(
      f.store->AddTasks({MakeTask("r3.train", f.sweep_id, "r3")}, T(0)).ok());
  EXPECT_THAT(
      *f.store->StopPredictedRuns(f.sweep_id, {"r1", "r3", "r2"}, "", T(1)),
      ElementsAre("r2"));
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kPending);
  EXPECT_EQ(f.store->GetRun("r3")->state, RunState::kPending);
  EXPECT_EQ(f.store->StopPredictedRuns(9999, {"r1"}, "", T(2)).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace hlab::store
