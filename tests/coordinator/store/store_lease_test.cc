// Sweeps, runs, tasks: idempotence, ordering, leases with fencing, expiry,
// retries, cancel and resume.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using ::testing::ElementsAre;
using testing::Fixture;
using testing::Ids;
using testing::MakeRun;
using testing::MakeSweep;
using testing::MakeTask;
using testing::T;
using testing::TempDir;

const absl::Duration kLease = absl::Seconds(30);

TEST(StoreSweepTest, CreateSweepIsIdempotentBySpecHash) {
  Fixture f;
  auto again = f.store->CreateSweep(MakeSweep("s"), T(5));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->sweep_id, f.sweep_id);
  auto other = f.store->CreateSweep(MakeSweep("other"), T(5));
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->created);
  EXPECT_NE(other->sweep_id, f.sweep_id);
  auto sweeps = f.store->ListSweeps();
  ASSERT_TRUE(sweeps.ok());
  EXPECT_EQ(sweeps->size(), 2u);
  EXPECT_EQ(f.store->CreateSweep(SweepSpec{}, T(0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoreSweepTest, AddRunsDeduplicatesAcrossSweeps) {
  Fixture f;
  auto second = f.store->CreateSweep(MakeSweep("second"), T(1));
  ASSERT_TRUE(second.ok());
  auto added =
      f.store->AddRuns(second->sweep_id, {MakeRun("r1"), MakeRun("r2")}, T(1));
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->added, 1);
  EXPECT_EQ(added->existing, 1);
  RunFilter all;
  EXPECT_EQ(f.store->ListRuns(all)->size(), 2u);
  RunFilter in_second;
  in_second.sweep_id = second->sweep_id;
  EXPECT_EQ(f.store->ListRuns(in_second)->size(), 2u);
  RunFilter in_first;
  in_first.sweep_id = f.sweep_id;
  auto first_runs = f.store->ListRuns(in_first);
  ASSERT_EQ(first_runs->size(), 1u);
  EXPECT_EQ((*first_runs)[0].spec.id, "r1");
  // Re-adding is a no-op.
  auto again = f.store->AddRuns(second->sweep_id, {MakeRun("r2")}, T(2));
  EXPECT_EQ(again->added, 0);
  EXPECT_EQ(f.store->AddRuns(999, {MakeRun("r3")}, T(2)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(StoreTaskTest, AddTasksRejectsUnknownDependencyAndRun) {
  Fixture f;
  auto bad_dep = f.store->AddTasks(
      {MakeTask("r1.eval", f.sweep_id, "r1", {"nope"})}, T(0));
  EXPECT_EQ(bad_dep.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_run = f.store->AddTasks({MakeTask("x", f.sweep_id, "nope")}, T(0));
  EXPECT_EQ(bad_run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.store->GetTask("r1.eval").status().code(),
            absl::StatusCode::kNotFound);
  // Re-adding an existing task is a no-op.
  auto again =
      f.store->AddTasks({MakeTask("r1.train", f.sweep_id, "r1")}, T(0));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
}

TEST(StoreTaskTest, LeasableOrderIsPriorityThenCost) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(
      f.store
          ->AddTasks({MakeTask("cheap-low", f.sweep_id, "r2", {}, 0, 1),
                      MakeTask("dear-high", f.sweep_id, "r2", {}, 5, 9),
                      MakeTask("cheap-high", f.sweep_id, "r2", {}, 5, 2),
                      MakeTask("dear-low", f.sweep_id, "r2", {}, 0, 8)},
                     T(0))
          .ok());
  auto next = f.store->NextLeasableTasks(T(1), 10);
  ASSERT_TRUE(next.ok()) << next.status();
  // r1.train: priority 0, cost 0.
  EXPECT_THAT(Ids(*next), ElementsAre("cheap-high", "dear-high", "r1.train",
                                      "cheap-low", "dear-low"));
  EXPECT_EQ(f.store->NextLeasableTasks(T(1), 2)->size(), 2u);
}

TEST(StoreTaskTest, DependenciesGateLeasing) {
  Fixture f;
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r1.eval", f.sweep_id, "r1",
                                       {"r1.train"}, 10, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  EXPECT_THAT(Ids(*f.store->NextLeasableTasks(T(1), 10)),
              ElementsAre("r1.train"));
  EXPECT_EQ(f.store->LeaseTask("r1.eval", "w1", T(1), kLease).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto attempt = f.store->LeaseTask("r1.train", "w1", T(1), kLease);
  ASSERT_TRUE(attempt.ok());
  EXPECT_TRUE(f.store->NextLeasableTasks(T(2), 10)->empty());
  ASSERT_TRUE(f.store->CompleteTask("r1.train", *attempt, T(3)).ok());
  EXPECT_THAT(Ids(*f.store->NextLeasableTasks(T(3), 10)),
              ElementsAre("r1.eval"));
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kRunning);
  auto eval_attempt = f.store->LeaseTask("r1.eval", "w2", T(4), kLease);
  ASSERT_TRUE(eval_attempt.ok());
  ASSERT_TRUE(f.store->CompleteTask("r1.eval", *eval_attempt, T(5)).ok());
  // The run succeeds once all of its tasks (training and eval) succeeded.
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kSucceeded);
}

TEST(StoreLeaseTest, HeartbeatAndExtendExtendsOnlyTheHolder) {
  Fixture f;
  WorkerInfo w1;
  w1.id = "w1";
  w1.devices = "[]";
  w1.capacity = 1;
  ASSERT_TRUE(f.store->RegisterWorker(w1, T(0)).ok());
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  std::vector<absl::Status> extended;
  ASSERT_TRUE(f.store
                  ->HeartbeatAndExtend(
                      "w1", {{"r1.train", 1}, {"r1.train", 0}, {"nope", 1}},
                      T(20), kLease, &extended)
                  .ok());
  ASSERT_EQ(extended.size(), 3u);
  EXPECT_TRUE(extended[0].ok()) << extended[0];
  EXPECT_EQ(extended[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(extended[2].code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(f.store->GetTask("r1.train")->lease_expiry, T(50));
  // An unknown worker extends nothing, not even a lease it names.
  EXPECT_EQ(f.store
                ->HeartbeatAndExtend("w2", {{"r1.train", 1}}, T(25), kLease,
                                     &extended)
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(f.store->GetTask("r1.train")->lease_expiry, T(50));
  // A registered worker that does not hold the lease is refused it.
  WorkerInfo w2 = w1;
  w2.id = "w2";
  ASSERT_TRUE(f.store->RegisterWorker(w2, T(26)).ok());
  ASSERT_TRUE(f.store
                  ->HeartbeatAndExtend("w2", {{"r1.train", 1}}, T(26), kLease,
                                       &extended)
                  .ok());
  ASSERT_EQ(extended.size(), 1u);
  EXPECT_EQ(extended[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.store->GetTask("r1.train")->lease_expiry, T(50));
}

TEST(StoreLeaseTest, LeaseExtendCompleteWithFencing) {
  Fixture f;
  auto attempt = f.store->LeaseTask("r1.train", "w1", T(0), kLease);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  EXPECT_EQ(*attempt, 1);
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kRunning);
  // Leasing again is refused.
  EXPECT_EQ(f.store->LeaseTask("r1.train", "w2", T(1), kLease).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(f.store->ExtendLease("r1.train", 1, "w1", T(20), kLease).ok());
  EXPECT_EQ(f.store->GetTask("r1.train")->lease_expiry, T(50));
  // Another worker, or a stale attempt, cannot extend.
  EXPECT_EQ(f.store->ExtendLease("r1.train", 1, "w2", T(21), kLease).code(),
            absl::StatusCode::kFailedPrecondition);
  const Task before = *f.store->GetTask("r1.train");
  absl::Status stale = f.store->CompleteTask("r1.train", 7, T(22));
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(stale.message(), "stale attempt 7"));
  const Task after = *f.store->GetTask("r1.train");
  EXPECT_EQ(after.state, before.state);
  EXPECT_EQ(after.attempt, before.attempt);
  EXPECT_EQ(after.lease_expiry, before.lease_expiry);
  EXPECT_EQ(after.updated_at, before.updated_at);
  ASSERT_TRUE(f.store->CompleteTask("r1.train", 1, T(23)).ok());
  EXPECT_EQ(f.store->GetTask("r1.train")->state, TaskState::kSucceeded);
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kSucceeded);
  // Completing twice is refused (no longer LEASED).
  EXPECT_EQ(f.store->CompleteTask("r1.train", 1, T(24)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.store->CompleteTask("nope", 1, T(24)).code(),
            absl::StatusCode::kNotFound);
}

TEST(StoreLeaseTest, ExpiryRequeuesWithNextAttemptAndFencesOldHolder) {
  Fixture f;
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w1", T(0), kLease), 1);
  EXPECT_TRUE(f.store->ExpireLeases(T(29))->empty());
  auto expired = f.store->ExpireLeases(T(30));
  ASSERT_TRUE(expired.ok()) << expired.status();
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ((*expired)[0].task_id, "r1.train");
  EXPECT_EQ((*expired)[0].attempt, 1);
  EXPECT_EQ((*expired)[0].worker_id, "w1");
  EXPECT_TRUE((*expired)[0].requeued);
  Task task = *f.store->GetTask("r1.train");
  EXPECT_EQ(task.state, TaskState::kPending);
  // An expiry is an infrastructure fault: no task error counted.
  EXPECT_EQ(task.failures, 0);
  EXPECT_EQ(task.infra_failures, 1);
  // The old holder is fenced off.
  EXPECT_EQ(f.store->ExtendLease("r1.train", 1, "w1", T(31), kLease).code(),
            absl::StatusCode::kFailedPrecondition);
  auto next = f.store->LeaseTask("r1.train", "w2", T(31), kLease);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 2);
  MetricPoint point;
  point.name = "train_loss";
  EXPECT_EQ(f.store->RecordMetrics("r1.train", 1, {point}, T(1)).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(f.store->ReadMetrics("r1", "train_loss")->empty());
  EXPECT_TRUE(f.store->RecordMetrics("r1.train", 2, {point}, T(1)).ok());
  EXPECT_EQ(f.store->GetRun("r1")->retries, 0);
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->retries, 0);
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->infra_retries, 1);
}

// Expiries (infrastructure faults) never use up the budgets, however many:
// here 5 on a task with 2 attempts in a sweep with no retries at all. A task
// error then finds the sweep's budget of 0 and fails the task.
TEST(StoreLeaseTest, RepeatedExpiryNeverExhaustsTheBudgets) {
  Fixture f(/*max_attempts=*/2, /*sweep_retries=*/0);
  for (int attempt = 1; attempt <= 5; ++attempt) {
    const absl::Time at = T(100 * attempt);
    ASSERT_EQ(*f.store->LeaseTask("r1.train", "w" + std::to_string(attempt), at,
                                  kLease),
              attempt);
    auto expired = f.store->ExpireLeases(at + absl::Seconds(30));
    ASSERT_TRUE(expired.ok()) << expired.status();
    ASSERT_EQ(expired->size(), 1u);
    EXPECT_TRUE((*expired)[0].requeued) << attempt;
  }
  Task task = *f.store->GetTask("r1.train");
  EXPECT_EQ(task.state, TaskState::kPending);
  EXPECT_EQ(task.failures, 0);
  EXPECT_EQ(task.infra_failures, 5);
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kPending);
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->retries, 0);
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->infra_retries, 5);
  // The attempts table keeps the history, each with its fault class.
  auto engine = QueryEngine::Open(f.store->path());
  ASSERT_TRUE(engine.ok());
  auto attempts = (*engine)->Run(
      "SELECT attempt, worker_id, outcome, fault FROM attempts"
      " ORDER BY attempt",
      {});
  ASSERT_TRUE(attempts.ok()) << attempts.status();
  ASSERT_EQ(attempts->rows.size(), 5u);
  EXPECT_EQ(std::get<std::string>(attempts->rows[0][2]), "EXPIRED");
  EXPECT_EQ(std::get<std::string>(attempts->rows[0][3]), "INFRASTRUCTURE");
  EXPECT_EQ(std::get<std::string>(attempts->rows[4][1]), "w5");
  // A task error spends the budget, which is 0.
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w6", T(1000), kLease), 6);
  EXPECT_EQ(*f.store->FailTask("r1.train", 6, {"oom", FaultClass::kTask, true},
                               T(1001), absl::ZeroDuration()),
            TaskState::kFailed);
  store::Run run = *f.store->GetRun("r1");
  EXPECT_EQ(run.state, RunState::kFailed);
  EXPECT_TRUE(
      absl::StrContains(run.failure_reason, "retry limit (0) exhausted"))
      << run.failure_reason;
}

// Infrastructure faults reported by a worker (a trainer killed from
// outside) are retried past the task's max_attempts; task errors count.
TEST(StoreRetryTest, InfrastructureFaultsRetryPastMaxAttempts) {
  Fixture f(/*max_attempts=*/2);
  int attempt = 0;
  for (int i = 0; i < 4; ++i) {
    attempt = *f.store->LeaseTask("r1.train", "w1", T(10 * i), kLease);
    EXPECT_EQ(*f.store->FailTask(
                  "r1.train", attempt,
                  {"killed by signal 9", FaultClass::kInfrastructure, true},
                  T(10 * i + 1), absl::ZeroDuration()),
              TaskState::kPending);
  }
  attempt = *f.store->LeaseTask("r1.train", "w1", T(100), kLease);
  EXPECT_EQ(*f.store->FailTask("r1.train", attempt,
                               {"exit 75", FaultClass::kTask, true}, T(101),
                               absl::ZeroDuration()),
            TaskState::kPending);
  attempt = *f.store->LeaseTask("r1.train", "w1", T(110), kLease);
  EXPECT_EQ(*f.store->FailTask("r1.train", attempt,
                               {"exit 75", FaultClass::kTask, true}, T(111),
                               absl::ZeroDuration()),
            TaskState::kFailed);
  const Task task = *f.store->GetTask("r1.train");
  EXPECT_EQ(task.failures, 2);
  EXPECT_EQ(task.infra_failures, 4);
  EXPECT_TRUE(absl::StrContains(task.failure_reason, "failed 2 of 2 attempts"))
      << task.failure_reason;
  EXPECT_EQ(f.store->GetRun("r1")->retries, 1);
  // Resume starts both counts afresh.
  ASSERT_EQ(f.store->ResumeRuns({"r1"}, T(200))->size(), 1u);
  EXPECT_EQ(f.store->GetTask("r1.train")->infra_failures, 0);
}

// A dependent's reason names the dependency it waited on, that
// dependency's run when another run's, and the dependency's own reason.
TEST(StoreRetryTest, DependentsOfAnotherRunNameIt) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r2.eval", f.sweep_id, "r2",
                                       {"r1.train"}, 0, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  ASSERT_EQ(*f.store->FailTask("r1.train", 1,
                               {"bad config", FaultClass::kTask, false}, T(1),
                               absl::ZeroDuration()),
            TaskState::kFailed);
  const store::Run r2 = *f.store->GetRun("r2");
  EXPECT_EQ(r2.state, RunState::kFailed);
  EXPECT_TRUE(absl::StrContains(
      r2.failure_reason,
      "dependency r1.train of run r1 failed: task r1.train attempt 1 failed "
      "(not retryable): bad config"))
      << r2.failure_reason;
}

TEST(StoreLeaseTest, ExtendAfterExpiryIsRefused) {
  Fixture f;
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  EXPECT_EQ(f.store->ExtendLease("r1.train", 1, "w1", T(30), kLease).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StoreRetryTest, RetryExhaustionFailsTaskAndRunWithReason) {
  Fixture f(/*max_attempts=*/2);
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w1", T(0), kLease), 1);
  auto first =
      f.store->FailTask("r1.train", 1, {"CUDA error", FaultClass::kTask, true},
                        T(1), absl::Seconds(10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, TaskState::kPending);
  // Backing off: not leasable before T(11).
  EXPECT_TRUE(f.store->NextLeasableTasks(T(5), 10)->empty());
  EXPECT_EQ(f.store->LeaseTask("r1.train", "w1", T(5), kLease).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.store->NextLeasableTasks(T(11), 10)->size(), 1u);
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w1", T(11), kLease), 2);
  // A stale FailTask changes nothing.
  EXPECT_EQ(f.store
                ->FailTask("r1.train", 1, {"late", FaultClass::kTask, true},
                           T(12), absl::ZeroDuration())
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.store->GetTask("r1.train")->state, TaskState::kLeased);
  auto second = f.store->FailTask("r1.train", 2,
                                  {"CUDA error again", FaultClass::kTask, true},
                                  T(13), absl::Seconds(10));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, TaskState::kFailed);
  Task task = *f.store->GetTask("r1.train");
  EXPECT_EQ(task.state, TaskState::kFailed);
  EXPECT_TRUE(absl::StrContains(task.failure_reason, "failed 2 of 2 attempts"))
      << task.failure_reason;
  store::Run run = *f.store->GetRun("r1");
  EXPECT_EQ(run.state, RunState::kFailed);
  EXPECT_TRUE(absl::StrContains(run.failure_reason, "CUDA error again"))
      << run.failure_reason;
}

TEST(StoreRetryTest, NonRetryableFailureFailsDependentsToo) {
  Fixture f;
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r1.eval", f.sweep_id, "r1",
                                       {"r1.train"}, 0, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  auto state =
      f.store->FailTask("r1.train", 1, {"bad config", FaultClass::kTask, false},
                        T(1), absl::ZeroDuration());
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, TaskState::kFailed);
  Task eval = *f.store->GetTask("r1.eval");
  EXPECT_EQ(eval.state, TaskState::kFailed);
  EXPECT_TRUE(absl::StrContains(eval.failure_reason, "dependency r1.train"));
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kFailed);
}

TEST(StoreRetryTest, SweepRetryLimitIsShared) {
  Fixture f(/*max_attempts=*/10, /*sweep_retries=*/1);
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  EXPECT_EQ(*f.store->FailTask("r1.train", 1, {"oom", FaultClass::kTask, true},
                               T(1), absl::ZeroDuration()),
            TaskState::kPending);
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(2), kLease).ok());
  EXPECT_EQ(*f.store->FailTask("r1.train", 2, {"oom", FaultClass::kTask, true},
                               T(3), absl::ZeroDuration()),
            TaskState::kFailed);
  EXPECT_TRUE(absl::StrContains(f.store->GetRun("r1")->failure_reason,
                                "retry limit (1) exhausted"));
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->retries, 1);
}

// An on-demand task (`hlab eval`) of a finished run: its failure is its
// own. The run stays SUCCEEDED throughout, its and the sweep's retry counts
// stay 0 (the sweep's one retry would otherwise fail it at once), and
// ReopenOnDemandTask runs it again; a planned task is not reopened by it.
TEST(StoreRetryTest, OnDemandTaskFailsWithoutItsRun) {
  Fixture f(/*max_attempts=*/2, /*sweep_retries=*/0);
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  ASSERT_TRUE(f.store->CompleteTask("r1.train", 1, T(1)).ok());
  ASSERT_EQ(f.store->GetRun("r1")->state, RunState::kSucceeded);
  TaskSpec eval =
      MakeTask("r1.eval", f.sweep_id, "r1", {}, 0, 0, TaskKind::kEval);
  eval.on_demand = true;
  ASSERT_TRUE(f.store->AddTasks({eval}, T(2)).ok());
  EXPECT_TRUE(f.store->GetTask("r1.eval")->spec.on_demand);
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kSucceeded);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    ASSERT_EQ(*f.store->LeaseTask("r1.eval", "w1", T(3), kLease), attempt);
    EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kSucceeded);
    EXPECT_EQ(
        *f.store->FailTask("r1.eval", attempt, {"oom", FaultClass::kTask, true},
                           T(3), absl::ZeroDuration()),
        attempt == 1 ? TaskState::kPending : TaskState::kFailed);
  }
  EXPECT_TRUE(absl::StrContains(f.store->GetTask("r1.eval")->failure_reason,
                                "failed 2 of 2 attempts"));
  const store::Run run = *f.store->GetRun("r1");
  EXPECT_EQ(run.state, RunState::kSucceeded);
  EXPECT_EQ(run.failure_reason, "");
  EXPECT_EQ(run.retries, 0);
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->retries, 0);

  EXPECT_EQ(f.store->ReopenOnDemandTask("r1.train", T(4)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.store->ReopenOnDemandTask("nope", T(4)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*f.store->ReopenOnDemandTask("r1.eval", T(4)), true);
  EXPECT_EQ(f.store->GetTask("r1.eval")->state, TaskState::kPending);
  EXPECT_EQ(*f.store->ReopenOnDemandTask("r1.eval", T(4)), false);
  ASSERT_EQ(*f.store->LeaseTask("r1.eval", "w1", T(5), kLease), 3);
  ASSERT_TRUE(f.store->CompleteTask("r1.eval", 3, T(6)).ok());
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kSucceeded);
}

TEST(StoreResumeTest, ResumeMakesFailedRunPendingAndKeepsFencing) {
  Fixture f(/*max_attempts=*/1);
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  ASSERT_EQ(*f.store->FailTask("r1.train", 1, {"boom", FaultClass::kTask, true},
                               T(1), absl::ZeroDuration()),
            TaskState::kFailed);
  auto resumed = f.store->ResumeRuns({"r1"}, T(2));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(*resumed, ElementsAre("r1"));
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kPending);
  Task task = *f.store->GetTask("r1.train");
  EXPECT_EQ(task.state, TaskState::kPending);
  EXPECT_EQ(task.failures, 0);
  // Attempt numbers keep counting.
  EXPECT_EQ(*f.store->LeaseTask("r1.train", "w1", T(3), kLease), 2);
  EXPECT_EQ(f.store->ResumeRuns({"r1"}, T(4))->size(),
            0u);  // not failed: no-op
  EXPECT_EQ(f.store->ResumeRuns({"nope"}, T(4)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(StoreTrunkTest, SharedTrunkGatesDecaysAndResumesWithTheirRuns) {
  Fixture f;
  ASSERT_TRUE(
      f.store->AddRuns(f.sweep_id, {MakeRun("rA"), MakeRun("rB")}, T(0)).ok());
  TaskSpec trunk =
      MakeTask("trunk", f.sweep_id, "", {}, 0, 0, TaskKind::kTrunk);
  trunk.trunk_group = "g";
  TaskSpec decay_a =
      MakeTask("rA.decay", f.sweep_id, "rA", {"trunk"}, 0, 0, TaskKind::kDecay);
  TaskSpec decay_b =
      MakeTask("rB.decay", f.sweep_id, "rB", {"trunk"}, 0, 0, TaskKind::kDecay);
  decay_a.trunk_group = decay_b.trunk_group = "g";
  // A trunk has no run to take max_attempts from: it must give its own.
  absl::StatusOr<int> refused = f.store->AddTasks({trunk}, T(0));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "retry.max_attempts_per_run"))
      << refused.status();
  trunk.max_attempts = 7;
  ASSERT_TRUE(f.store->AddTasks({trunk, decay_a, decay_b}, T(0)).ok());
  EXPECT_EQ(f.store->GetTask("trunk")->spec.max_attempts, 7);
  ASSERT_EQ(*f.store->LeaseTask("trunk", "w1", T(1), kLease), 1);
  EXPECT_EQ(f.store->GetRun("rA")->state, RunState::kPending);  // own tasks
  ASSERT_EQ(
      *f.store->FailTask("trunk", 1, {"NaN loss", FaultClass::kTask, false},
                         T(2), absl::ZeroDuration()),
      TaskState::kFailed);
  EXPECT_EQ(f.store->GetTask("rA.decay")->state, TaskState::kFailed);
  EXPECT_EQ(f.store->GetRun("rA")->state, RunState::kFailed);
  EXPECT_EQ(f.store->GetRun("rB")->state, RunState::kFailed);
  EXPECT_TRUE(absl::StrContains(f.store->GetRun("rB")->failure_reason,
                                "dependency trunk failed"));
  // Resuming rA reopens its decay and the trunk it needs; rB stays failed.
  ASSERT_EQ(f.store->ResumeRuns({"rA"}, T(3))->size(), 1u);
  EXPECT_EQ(f.store->GetTask("trunk")->state, TaskState::kPending);
  EXPECT_EQ(f.store->GetTask("rA.decay")->state, TaskState::kPending);
  EXPECT_EQ(f.store->GetRun("rB")->state, RunState::kFailed);
  EXPECT_THAT(Ids(*f.store->NextLeasableTasks(T(4), 10)),
              ElementsAre("r1.train", "trunk"));
  ASSERT_EQ(*f.store->LeaseTask("trunk", "w1", T(4), kLease), 2);
  ASSERT_TRUE(f.store->CompleteTask("trunk", 2, T(5)).ok());
  EXPECT_THAT(Ids(*f.store->NextLeasableTasks(T(5), 10)),
              ElementsAre("r1.train", "rA.decay"));
}

TEST(StoreCancelTest, CancelSweepSparesRunsOfOtherActiveSweeps) {
  Fixture f;
  auto other = f.store->CreateSweep(MakeSweep("other"), T(0));
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("shared")}, T(0)).ok());
  ASSERT_TRUE(
      f.store->AddRuns(other->sweep_id, {MakeRun("shared")}, T(0)).ok());
  ASSERT_TRUE(
      f.store->AddTasks({MakeTask("shared.train", f.sweep_id, "shared")}, T(0))
          .ok());
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(1), kLease).ok());
  auto cancelled = f.store->CancelSweep(f.sweep_id, T(2));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  ASSERT_EQ(cancelled->size(), 1u);
  EXPECT_EQ((*cancelled)[0].task_id, "r1.train");
  EXPECT_EQ((*cancelled)[0].worker_id, "w1");
  EXPECT_EQ(f.store->GetRun("r1")->state, RunState::kCancelled);
  EXPECT_EQ(f.store->GetRun("shared")->state, RunState::kPending);
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->state, SweepState::kCancelled);
  // The cancelled lease is fenced.
  EXPECT_EQ(f.store->CompleteTask("r1.train", 1, T(3)).code(),
            absl::StatusCode::kFailedPrecondition);
  auto resumed = f.store->ResumeSweep(f.sweep_id, T(4));
  ASSERT_TRUE(resumed.ok());
  EXPECT_THAT(*resumed, ElementsAre("r1"));
  EXPECT_EQ(f.store->GetSweep(f.sweep_id)->state, SweepState::kActive);
  EXPECT_EQ(f.store->GetTask("r1.train")->state, TaskState::kPending);
}

TEST(StoreStateTest, CountsAndLoadState) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(
      f.store->AddTasks({MakeTask("r2.train", f.sweep_id, "r2")}, T(0)).ok());
  ASSERT_TRUE(f.store->LeaseTask("r2.train", "w9", T(0), kLease).ok());
  auto counts = f.store->CountsByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->runs.at("PENDING"), 1);
  EXPECT_EQ(counts->runs.at("RUNNING"), 1);
  EXPECT_EQ(counts->runs.at("FAILED"), 0);
  EXPECT_EQ(counts->tasks.at("LEASED"), 1);
  EXPECT_EQ(counts->tasks.at("PENDING"), 1);
  auto state = f.store->LoadState();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->leased.size(), 1u);
  EXPECT_EQ(state->leased[0].spec.id, "r2.train");
  EXPECT_EQ(state->leased[0].attempt, 1);
  EXPECT_EQ(state->leased[0].lease_worker, "w9");
  EXPECT_EQ(state->leased[0].lease_expiry, T(30));
  EXPECT_THAT(Ids(state->pending), ElementsAre("r1.train"));
  EXPECT_GT(state->last_event_seq, 0);
}

TEST(StoreTaskTest, ListTasksFilters) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r2.train", f.sweep_id, "r2"),
                              MakeTask("r2.eval", f.sweep_id, "r2",
                                       {"r2.train"}, 0, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  ASSERT_TRUE(f.store->LeaseTask("r2.train", "w7", T(0), kLease).ok());
  TaskFilter by_run;
  by_run.run_id = "r2";
  EXPECT_THAT(Ids(*f.store->ListTasks(by_run)),
              ElementsAre("r2.eval", "r2.train"));
  auto eval = f.store->GetTask("r2.eval");
  ASSERT_TRUE(eval.ok());
  EXPECT_THAT(eval->spec.depends_on, ElementsAre("r2.train"));
  EXPECT_EQ(eval->spec.kind, TaskKind::kEval);
  TaskFilter pending;
  pending.state = TaskState::kPending;
  pending.sweep_id = f.sweep_id;
  EXPECT_THAT(Ids(*f.store->ListTasks(pending)),
              ElementsAre("r1.train", "r2.eval"));
  TaskFilter by_worker;
  by_worker.lease_worker = "w7";
  EXPECT_THAT(Ids(*f.store->ListTasks(by_worker)), ElementsAre("r2.train"));
  RunFilter runs;
  runs.state = RunState::kRunning;
  runs.arch = "swa";
  auto running = f.store->ListRuns(runs);
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].spec.id, "r2");
  runs.scale = "nope";
  EXPECT_TRUE(f.store->ListRuns(runs)->empty());
}

// ---- What a completion made leasable (the lease queue's additions)

TEST(StoreLeasableTest, CompletionsListTheirDependentsOtherChangesDoNot) {
  Fixture f;
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r1.eval", f.sweep_id, "r1",
                                       {"r1.train"}, 0, 0, TaskKind::kEval),
                              MakeTask("r1.probe", f.sweep_id, "r1",
                                       {"r1.train"}, 0, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  const int64_t before = f.store->leasable_generation();
  // Leasing moves nothing.
  auto attempt = f.store->LeaseTask("r1.train", "w1", T(1), kLease);
  ASSERT_TRUE(attempt.ok());
  EXPECT_EQ(f.store->leasable_generation(), before);
  ASSERT_TRUE(f.store->CompleteTask("r1.train", *attempt, T(2)).ok());
  Store::LeasableChanges changes = f.store->LeasableChangesSince(before);
  EXPECT_EQ(changes.generation, before + 1);
  EXPECT_EQ(changes.generation, f.store->leasable_generation());
  ASSERT_TRUE(changes.dependents.has_value());
  EXPECT_THAT(*changes.dependents,
              ::testing::UnorderedElementsAre("r1.eval", "r1.probe"));
  // Nothing since: an empty list, not a reload.
  changes = f.store->LeasableChangesSince(before + 1);
  ASSERT_TRUE(changes.dependents.has_value());
  EXPECT_TRUE(changes.dependents->empty());
  // Tasks added: only a whole read sees them, from either generation.
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(3)).ok());
  ASSERT_TRUE(
      f.store->AddTasks({MakeTask("r2.train", f.sweep_id, "r2")}, T(3)).ok());
  EXPECT_FALSE(f.store->LeasableChangesSince(before).dependents.has_value());
  EXPECT_FALSE(
      f.store->LeasableChangesSince(before + 1).dependents.has_value());
  EXPECT_TRUE(f.store->LeasableChangesSince(f.store->leasable_generation())
                  .dependents.has_value());
}

TEST(StoreLeasableTest, ChangesOlderThanTheOnesKeptNeedAWholeRead) {
  Fixture f;
  const int64_t before = f.store->leasable_generation();
  std::vector<TaskSpec> chain;
  std::string previous = "r1.train";
  for (int64_t i = 0; i <= Store::kLeasableChangesKept; ++i) {
    const std::string id = "r1.step" + std::to_string(i);
    chain.push_back(MakeTask(id, f.sweep_id, "r1", {previous}));
    previous = id;
  }
  ASSERT_TRUE(f.store->AddTasks(chain, T(0)).ok());
  const int64_t added = f.store->leasable_generation();
  std::string task = "r1.train";
  for (int64_t i = 0; i < Store::kLeasableChangesKept; ++i) {
    auto attempt = f.store->LeaseTask(task, "w1", T(1), kLease);
    ASSERT_TRUE(attempt.ok()) << attempt.status();
    ASSERT_TRUE(f.store->CompleteTask(task, *attempt, T(1)).ok());
    task = "r1.step" + std::to_string(i);
  }
  // The last kLeasableChangesKept moves were completions.
  Store::LeasableChanges changes = f.store->LeasableChangesSince(added);
  ASSERT_TRUE(changes.dependents.has_value());
  EXPECT_EQ(changes.dependents->size(),
            static_cast<size_t>(Store::kLeasableChangesKept));
  EXPECT_EQ(changes.dependents->front(), "r1.step0");
  EXPECT_FALSE(f.store->LeasableChangesSince(before).dependents.has_value());
}

TEST(StoreLeasableTest, UnblockedTasksAreTheLeasableOnesInLeaseOrder) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(
      f.store
          ->AddTasks(
              {MakeTask("r2.train", f.sweep_id, "r2"),
               MakeTask("both", f.sweep_id, "r2", {"r1.train", "r2.train"}),
               MakeTask("cheap", f.sweep_id, "r1", {"r1.train"}, 0, 1),
               MakeTask("dear", f.sweep_id, "r1", {"r1.train"}, 0, 7),
               MakeTask("urgent", f.sweep_id, "r1", {"r1.train"}, 3, 9),
               MakeTask("later", f.sweep_id, "r1", {"r1.train"}, 0, 2)},
              T(0))
          .ok());
  ASSERT_TRUE(testing::SetNotBefore(*f.store, "later", T(60)).ok());
  // "dear" sorts by an adaptive order key before "cheap".
  TaskOrder order;
  order.task_id = "dear";
  order.key = 0.5;
  order.rank = 1;
  ASSERT_EQ(*f.store->SetTaskOrder(f.sweep_id, {order}), 1);
  auto attempt = f.store->LeaseTask("r1.train", "w1", T(1), kLease);
  ASSERT_TRUE(attempt.ok());
  ASSERT_TRUE(f.store->CompleteTask("r1.train", *attempt, T(2)).ok());
  auto unblocked = f.store->UnblockedTasks(
      {"cheap", "both", "dear", "later", "urgent", "cheap", "unknown"});
  ASSERT_TRUE(unblocked.ok()) << unblocked.status();
  // "both" still waits for r2.train; "later" is listed with its backoff.
  EXPECT_THAT(Ids(*unblocked), ElementsAre("urgent", "dear", "cheap", "later"));
  EXPECT_EQ(unblocked->back().not_before, T(60));
  // The same order as a whole read (which leaves the backoff out; r2.train
  // costs nothing).
  EXPECT_THAT(Ids(*f.store->NextLeasableTasks(T(2), 10)),
              ElementsAre("urgent", "r2.train", "dear", "cheap"));
}

TEST(StoreLeasableTest, RequeuesMoveTheGenerationFailuresForGoodDoNot) {
  Fixture f(/*max_attempts=*/1);
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r1.eval", f.sweep_id, "r1",
                                       {"r1.train"}, 0, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  WorkerInfo worker;
  worker.id = "w1";
  ASSERT_TRUE(f.store->RegisterWorker(worker, T(0)).ok());
  // A worker that leaves requeues its lease: the generation moves.
  int64_t generation = f.store->leasable_generation();
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(1), kLease).ok());
  auto requeued = f.store->DeregisterWorker("w1", T(2), absl::ZeroDuration());
  ASSERT_TRUE(requeued.ok()) << requeued.status();
  ASSERT_EQ(requeued->size(), 1u);
  EXPECT_GT(f.store->leasable_generation(), generation);
  EXPECT_FALSE(
      f.store->LeasableChangesSince(generation).dependents.has_value());
  // A retryable failure within its attempts requeues it: it moves.
  generation = f.store->leasable_generation();
  auto attempt = f.store->LeaseTask("r1.train", "w2", T(3), kLease);
  ASSERT_TRUE(attempt.ok());
  auto state = f.store->FailTask("r1.train", *attempt,
                                 {"oom", FaultClass::kInfrastructure, true},
                                 T(4), absl::ZeroDuration());
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(*state, TaskState::kPending);
  EXPECT_GT(f.store->leasable_generation(), generation);
  // A failure for good fails its dependents with it: nothing became
  // leasable, the generation stays.
  generation = f.store->leasable_generation();
  attempt = f.store->LeaseTask("r1.train", "w2", T(5), kLease);
  ASSERT_TRUE(attempt.ok());
  state = f.store->FailTask("r1.train", *attempt,
                            {"bad config", FaultClass::kTask, false}, T(6),
                            absl::ZeroDuration());
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(*state, TaskState::kFailed);
  EXPECT_EQ(f.store->GetTask("r1.eval")->state, TaskState::kFailed);
  EXPECT_EQ(f.store->leasable_generation(), generation);
  EXPECT_TRUE(f.store->NextLeasableTasks(T(6), 10)->empty());
}

}  // namespace
}  // namespace hlab::store
