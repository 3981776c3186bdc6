// Retry budgets by fault class, end to end over the WorkerService: faults
// of the infrastructure (a trainer killed from outside, an expired lease, a
// worker that left) are retried without limit and spend no budget; task
// errors spend the sweep's retry budget, and when it is exhausted only the
// runs that depend on the failed task fail. Every task, shared trunks and
// their segments too, follows the spec's max_attempts_per_run; cancel and
// resume treat a trunk's segments as they treat a trunk.
#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "hlab/v1/worker_service.grpc.pb.h"
#include "tests/coordinator/server/coordinator_test_util.h"
#include "tests/coordinator/server/worker_service_fixture.h"

namespace hlab::coordinator {
namespace {

using nlohmann::json;
using testing::WorkerServiceTest;

// Two architectures, one scale, three budgets, shared WSD trunks: per
// architecture one TRUNK task and three DECAY tasks that depend on it.
std::string TwoTrunksYaml(int max_attempts, int max_retries) {
  return absl::StrCat(
      "name: budgets\n"
      "architectures: [full, swa-32]\n"
      "scales: [{name: S1, d_model: 32, n_layers: 2, n_heads: 4, "
      "n_kv_heads: 2}]\n"
      "budgets: {tokens_per_param: [5, 10, 20]}\n"
      "seq_len: 128\n"
      "batch_tokens: 1024\n"
      "schedule: {peak_lr: 3.0e-3, warmup_steps: 10}\n"
      "evaluation: {validation_loss: {enabled: false}}\n"
      "share_trunk: true\n"
      "retry: {max_attempts_per_run: ",
      max_attempts, ", max_retries_per_sweep: ", max_retries,
      ", backoff_base_seconds: 1, backoff_max_seconds: 1}\n");
}

class RetryBudgetTest : public WorkerServiceTest {
 protected:
  // The held attempt of `trunk` reports a branch checkpoint at `step`.
  void ReportBranch(const hlab::v1::Task& trunk, int64_t step,
                    const std::string& path) {
    grpc::ClientContext ctx;
    hlab::v1::ReportCheckpointRequest request;
    request.set_task_id(trunk.task_id());
    request.set_attempt(trunk.attempt());
    request.set_worker_id("w1");
    request.mutable_checkpoint()->set_step(step);
    request.mutable_checkpoint()->set_branch_point(true);
    request.mutable_checkpoint()->set_path(path);
    hlab::v1::ReportCheckpointResponse response;
    ASSERT_TRUE(worker_->ReportCheckpoint(&ctx, request, &response).ok());
  }

  // The trunk reports its branch checkpoints (the decays start from them).
  void ReportBranches(const hlab::v1::Task& trunk) {
    for (const auto& b : trunk.branch_points()) {
      ReportBranch(trunk, b.step(), "/ck/branch-" + b.run_id());
    }
  }

  // Ends the held attempt by infrastructure fault number `n`, cycling
  // through the three kinds a worker meets.
  void InfrastructureFault(const hlab::v1::Task& task, int n) {
    switch (n % 3) {
      case 0: {  // the trainer was killed from outside (kill -9)
        hlab::v1::FailResponse fail;
        ASSERT_TRUE(Fail(task, task.attempt(), /*retryable=*/true, &fail,
                         hlab::v1::FAULT_CLASS_INFRASTRUCTURE)
                        .ok());
        EXPECT_TRUE(fail.will_retry());
        break;
      }
      case 1:  // the worker went silent: its lease expires
        clock_.Advance(absl::Seconds(31));
        ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
        Register("w1");
        break;
      case 2: {  // the worker left holding the task
        grpc::ClientContext ctx;
        hlab::v1::DeregisterRequest request;
        request.set_worker_id("w1");
        hlab::v1::DeregisterResponse response;
        ASSERT_TRUE(worker_->Deregister(&ctx, request, &response).ok());
        EXPECT_EQ(response.requeued(), 1);
        Register("w1");
        break;
      }
    }
  }

  int64_t Count(const std::string& sql) {
    return Query(sql).rows(0).values(0).int_value();
  }
};

// The acceptance of the budget rule: 30+ infrastructure faults, trunks
// among the tasks hit, on a sweep with max_retries_per_sweep: 3, succeed;
// 4 task errors in that sweep exhaust the budget and fail only the runs
// that depend on the task that failed for good.
TEST_F(RetryBudgetTest,
       InfrastructureFaultsSpendNoBudgetTaskErrorsFailOnlyDependents) {
  hlab::v1::SubmitSweepResponse sweep =
      Submit(TwoTrunksYaml(/*max_attempts=*/5, /*max_retries=*/3));
  ASSERT_EQ(sweep.runs_size(), 6);
  Register("w1");
  // Every task follows the spec's max_attempts, the trunks too.
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE kind = 'TRUNK'"
                  " AND max_attempts = 5"),
            2);

  std::string doomed;  // the trunk whose 4th task error exhausts the budget
  std::set<std::string> doomed_runs;
  int infra = 0, task_errors = 0;
  std::map<int, int> infra_by_kind;          // hlab::v1::TaskKind -> faults
  std::map<std::string, int> infra_by_task;  // task id -> faults
  for (int i = 0; i < 500; ++i) {
    hlab::v1::LeaseResponse lease = Lease("w1");
    if (!lease.has_task()) {
      if (Count("SELECT count(*) FROM tasks WHERE state IN"
                " ('PENDING', 'LEASED')") == 0) {
        break;
      }
      clock_.Advance(absl::Seconds(2));  // past the backoff
      continue;
    }
    const hlab::v1::Task& task = lease.task();
    if (doomed.empty() && task.kind() == hlab::v1::TASK_KIND_TRUNK) {
      doomed = task.task_id();
      for (const auto& b : task.branch_points()) doomed_runs.insert(b.run_id());
    }
    const bool is_doomed = task.task_id() == doomed;
    // The doomed trunk meets infrastructure faults until the others have
    // spent the budget; every other task meets 8, before and after the
    // budget is spent, then one of them a task error, then it completes.
    if ((is_doomed && task_errors < 3) ||
        (!is_doomed && infra_by_task[task.task_id()] < 8)) {
      InfrastructureFault(task, infra);
      ++infra;
      ++infra_by_kind[task.kind()];
      ++infra_by_task[task.task_id()];
      continue;
    }
    if (task_errors < 4 && (is_doomed || task_errors < 3)) {
      hlab::v1::FailResponse fail;
      ASSERT_TRUE(Fail(task, task.attempt(), /*retryable=*/true, &fail,
                       hlab::v1::FAULT_CLASS_TASK)
                      .ok());
      ++task_errors;
      // Three errors spend the budget of 3; the fourth finds it spent.
      EXPECT_EQ(fail.will_retry(), task_errors <= 3) << task_errors;
      continue;
    }
    if (task.kind() == hlab::v1::TASK_KIND_TRUNK) ReportBranches(task);
    ASSERT_TRUE(Complete(task, task.attempt(), "w1").ok());
  }

  std::cout << "faults: " << infra << " infrastructure ("
            << infra_by_kind[hlab::v1::TASK_KIND_TRUNK] << " on trunks, "
            << infra_by_kind[hlab::v1::TASK_KIND_DECAY] << " on decays; "
            << "cycling kill -9, lease expiry, worker leaving), " << task_errors
            << " task errors\n";
  EXPECT_GE(infra, 30);
  EXPECT_EQ(task_errors, 4);
  EXPECT_GT(infra_by_kind[hlab::v1::TASK_KIND_TRUNK], 3)
      << "the trunks must be hit more often than the old fixed 3 attempts";
  EXPECT_GT(infra_by_kind[hlab::v1::TASK_KIND_DECAY], 0);
  ASSERT_EQ(doomed_runs.size(), 3u);
  for (const auto& run : sweep.runs()) {
    const store::Run stored = Run(run.run_id());
    if (doomed_runs.count(run.run_id()) > 0) {
      EXPECT_EQ(stored.state, store::RunState::kFailed) << run.run_id();
      EXPECT_TRUE(absl::StrContains(stored.failure_reason,
                                    "dependency " + doomed + " failed"))
          << stored.failure_reason;
      EXPECT_TRUE(
          absl::StrContains(stored.failure_reason, "retry limit (3) exhausted"))
          << stored.failure_reason;
    } else {
      EXPECT_EQ(stored.state, store::RunState::kSucceeded)
          << run.run_id() << ": " << stored.failure_reason;
    }
  }
  // The budget counts task errors only; infrastructure has its own count.
  EXPECT_EQ(Count("SELECT retries FROM sweeps"), 3);
  EXPECT_EQ(Count("SELECT infra_retries FROM sweeps"), infra);
  EXPECT_EQ(Count("SELECT count(*) FROM attempts"
                  " WHERE fault = 'INFRASTRUCTURE'"),
            infra);
  EXPECT_EQ(Count("SELECT count(*) FROM attempts WHERE fault = 'TASK'"), 4);
  EXPECT_EQ(Count(absl::StrCat("SELECT failures FROM tasks WHERE id = '",
                               doomed, "'")),
            1);
}

// A shared trunk trains while one of its runs still needs it: cancelling
// its runs one by one stops it only with the last, and leaves the other
// architecture's trunk alone.
TEST_F(RetryBudgetTest, ATrunkIsCancelledWithTheLastRunThatNeedsIt) {
  Submit(TwoTrunksYaml(/*max_attempts=*/2, /*max_retries=*/3));
  Register("w1");
  const hlab::v1::Task trunk = Lease("w1").task();
  ASSERT_EQ(trunk.kind(), hlab::v1::TASK_KIND_TRUNK);
  ASSERT_EQ(trunk.run_ids_size(), 3);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    hlab::v1::CancelRequest request;
    request.set_run_id(trunk.run_ids(i));
    hlab::v1::CancelResponse response;
    ASSERT_TRUE(client_->Cancel(&ctx, request, &response).ok());
    const hlab::v1::HeartbeatResponse beat =
        Heartbeat("w1", trunk, trunk.attempt());
    EXPECT_EQ(beat.stop_size(), i == 2 ? 1 : 0) << i;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE kind = 'TRUNK'"
                  " AND state = 'CANCELLED'"),
            1);
  const hlab::v1::Task other = Lease("w1").task();
  EXPECT_EQ(other.kind(), hlab::v1::TASK_KIND_TRUNK);
  EXPECT_NE(other.task_id(), trunk.task_id());
}

// A sweep of one trunk in segments (schedule_policy: adaptive): three
// budgets, so three segments, each ending at a run's branch point.
class SegmentTest : public RetryBudgetTest {
 protected:
  hlab::v1::SubmitSweepResponse SubmitSegments() {
    std::string yaml =
        testing::TinySpecYaml("segments", "[5, 10, 20]", /*max_attempts=*/2);
    yaml.replace(yaml.find("share_trunk: false"), 18, "share_trunk: true");
    hlab::v1::SubmitSweepResponse sweep =
        Submit(yaml +
               "fit: {fit_scales: [S1]}\n"
               "adaptive: {target: {scales: [S1]}}\n"
               "schedule_policy: adaptive\n");
    EXPECT_EQ(sweep.runs_size(), 3);
    EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE kind = 'TRUNK'"), 3);
    Register("w1");
    return sweep;
  }

  // Ends a segment with the branch checkpoint at its end.
  void CompleteSegment(const hlab::v1::Task& segment) {
    ReportBranch(segment, segment.end_step(), BranchPath(segment.end_step()));
    ASSERT_TRUE(Complete(segment, segment.attempt(), "w1").ok());
  }

  static std::string BranchPath(int64_t step) {
    return absl::StrCat("/ck/branch-", step);
  }

  // Leases until a segment comes, completing the decays leased on the way;
  // an empty task if none comes.
  hlab::v1::Task LeaseSegment() {
    for (int i = 0; i < 8; ++i) {
      hlab::v1::LeaseResponse lease = Lease("w1");
      if (!lease.has_task()) {
        clock_.Advance(absl::Seconds(2));  // past a retry's backoff
        continue;
      }
      if (lease.task().kind() == hlab::v1::TASK_KIND_TRUNK) {
        return lease.task();
      }
      EXPECT_TRUE(Complete(lease.task(), lease.task().attempt(), "w1").ok());
    }
    return hlab::v1::Task();
  }

  // The checkpoint the leased task's trainer starts from.
  static std::string InitFrom(const hlab::v1::Task& task) {
    return json::parse(task.task_json()).value("init_from", std::string());
  }

  // The run whose branch point is the segment's end.
  static std::string RunEndingAt(const hlab::v1::Task& segment) {
    for (const auto& b : segment.branch_points()) {
      if (b.step() == segment.end_step()) return b.run_id();
    }
    return "";
  }

  std::vector<std::string> Resume(const std::string& sweep,
                                  const std::string& run_id) {
    grpc::ClientContext ctx;
    hlab::v1::ResumeRequest request;
    if (run_id.empty()) {
      request.set_sweep(sweep);
    } else {
      request.set_run_id(run_id);
    }
    hlab::v1::ResumeResponse response;
    EXPECT_TRUE(client_->Resume(&ctx, request, &response).ok());
    std::vector<std::string> ids(response.run_ids().begin(),
                                 response.run_ids().end());
    std::sort(ids.begin(), ids.end());
    return ids;
  }
};

// A segment meets faults as a trunk does: killed from outside, it is
// retried without spending budget, from the branch checkpoint its
// predecessor saved; failing for good, it fails only the runs past its
// start (the run that branched before it keeps its decay) and the segments
// after it; `resume` puts them back, and the chain trains on from the same
// branch checkpoint to every run's end.
TEST_F(SegmentTest, ASegmentRetriesFailsForGoodAndResumesLikeATrunk) {
  const hlab::v1::SubmitSweepResponse sweep = SubmitSegments();
  const hlab::v1::Task first = LeaseSegment();
  ASSERT_EQ(first.start_step(), 0);
  const std::string shortest = RunEndingAt(first);
  ASSERT_FALSE(shortest.empty());
  CompleteSegment(first);
  const std::string branch = BranchPath(first.end_step());

  // The second segment, killed from outside, then two task errors: the
  // first is retried (1 of 2 attempts), the second fails it for good.
  const hlab::v1::Task second = LeaseSegment();
  ASSERT_EQ(second.start_step(), first.end_step());
  EXPECT_EQ(InitFrom(second), branch);
  InfrastructureFault(second, 0);
  for (int error = 1; error <= 2; ++error) {
    const hlab::v1::Task again = LeaseSegment();
    ASSERT_EQ(again.task_id(), second.task_id()) << error;
    EXPECT_EQ(InitFrom(again), branch) << error;
    hlab::v1::FailResponse fail;
    ASSERT_TRUE(Fail(again, again.attempt(), /*retryable=*/true, &fail,
                     hlab::v1::FAULT_CLASS_TASK)
                    .ok());
    EXPECT_EQ(fail.will_retry(), error == 1) << error;
  }
  EXPECT_EQ(Count(absl::StrCat("SELECT infra_failures FROM tasks WHERE id = '",
                               second.task_id(), "'")),
            1);
  // Only the runs past the failed segment's start fail; the shortest run's
  // decay still trains from the first segment's checkpoint.
  EXPECT_EQ(LeaseSegment().task_id(), "");
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE state IN"
                  " ('PENDING', 'LEASED')"),
            0);
  std::vector<std::string> failed;
  for (const auto& run : sweep.runs()) {
    const store::Run stored = Run(run.run_id());
    if (run.run_id() == shortest) {
      EXPECT_EQ(stored.state, store::RunState::kSucceeded)
          << stored.failure_reason;
      continue;
    }
    EXPECT_EQ(stored.state, store::RunState::kFailed) << run.run_id();
    failed.push_back(run.run_id());
  }
  std::sort(failed.begin(), failed.end());
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(Count("SELECT count(*) FROM tasks WHERE kind = 'TRUNK'"
                  " AND state = 'FAILED'"),
            2)
      << "the failed segment and the one after it";

  // `hlab resume SWEEP`: the two runs, and their segments, from the same
  // branch checkpoint, to the end.
  EXPECT_EQ(Resume(sweep.sweep().sweep_id(), ""), failed);
  const hlab::v1::Task retrained = LeaseSegment();
  ASSERT_EQ(retrained.task_id(), second.task_id());
  EXPECT_EQ(InitFrom(retrained), branch);
  CompleteSegment(retrained);
  const hlab::v1::Task third = LeaseSegment();
  ASSERT_EQ(third.start_step(), second.end_step());
  EXPECT_EQ(InitFrom(third), BranchPath(second.end_step()));
  CompleteSegment(third);
  EXPECT_EQ(LeaseSegment().task_id(), "");
  for (const auto& run : sweep.runs()) {
    EXPECT_EQ(Run(run.run_id()).state, store::RunState::kSucceeded)
        << run.run_id() << ": " << Run(run.run_id()).failure_reason;
  }
}

// Cancelling the longest run while the first segment trains cancels the
// last segment, which only that run needs, at once, and not the segments
// the other runs still need; `resume --run` brings the last segment back,
// from the middle segment's branch checkpoint. Cancelled again while that
// segment trains, its lease is stopped at the next heartbeat.
TEST_F(SegmentTest, CancellingARunCancelsOnlyTheSegmentsNoOtherRunNeeds) {
  const hlab::v1::SubmitSweepResponse sweep = SubmitSegments();
  const hlab::v1::Task first = LeaseSegment();
  ASSERT_EQ(first.start_step(), 0);
  std::string longest;
  int64_t last_branch = 0;
  for (const auto& b : first.branch_points()) {
    if (b.step() > last_branch) {
      last_branch = b.step();
      longest = b.run_id();
    }
  }
  auto cancel = [&] {
    grpc::ClientContext ctx;
    hlab::v1::CancelRequest request;
    request.set_run_id(longest);
    request.set_reason("not needed");
    hlab::v1::CancelResponse response;
    ASSERT_TRUE(client_->Cancel(&ctx, request, &response).ok());
    EXPECT_EQ(response.run_ids_size(), 1);
  };
  auto cancelled_segments = [&] {
    return Count(
        "SELECT count(*) FROM tasks WHERE kind = 'TRUNK'"
        " AND state = 'CANCELLED'");
  };
  cancel();
  EXPECT_EQ(cancelled_segments(), 1) << "the last segment, at once";
  // The leased first segment is not stopped: every run passes through it.
  EXPECT_EQ(Heartbeat("w1", first, first.attempt()).stop_size(), 0);
  CompleteSegment(first);
  const hlab::v1::Task second = LeaseSegment();
  ASSERT_EQ(second.start_step(), first.end_step());
  CompleteSegment(second);
  EXPECT_EQ(LeaseSegment().task_id(), "") << "the last segment trained";
  for (const auto& run : sweep.runs()) {
    EXPECT_EQ(Run(run.run_id()).state, run.run_id() == longest
                                           ? store::RunState::kCancelled
                                           : store::RunState::kSucceeded)
        << run.run_id();
  }

  EXPECT_EQ(Resume("", longest), std::vector<std::string>{longest});
  EXPECT_EQ(cancelled_segments(), 0);
  const hlab::v1::Task third = LeaseSegment();
  ASSERT_EQ(third.start_step(), second.end_step());
  EXPECT_EQ(third.end_step(), last_branch);
  EXPECT_EQ(InitFrom(third), BranchPath(second.end_step()));
  cancel();
  const hlab::v1::HeartbeatResponse stopped =
      Heartbeat("w1", third, third.attempt());
  ASSERT_EQ(stopped.stop_size(), 1);
  EXPECT_EQ(stopped.stop(0).task_id(), third.task_id());

  EXPECT_EQ(Resume("", longest), std::vector<std::string>{longest});
  const hlab::v1::Task again = LeaseSegment();
  ASSERT_EQ(again.task_id(), third.task_id());
  EXPECT_GT(again.attempt(), third.attempt());
  EXPECT_EQ(InitFrom(again), BranchPath(second.end_step()));
  CompleteSegment(again);
  EXPECT_EQ(LeaseSegment().task_id(), "");
  EXPECT_EQ(Run(longest).state, store::RunState::kSucceeded);
}

// A worker older than fault classes sends no fault: its failures count as
// task errors, as every failure did before.
TEST_F(RetryBudgetTest, AFailureWithoutAFaultClassIsATaskError) {
  Submit(testing::TinySpecYaml("old-worker", "[5]", /*max_attempts=*/1));
  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());
  hlab::v1::FailResponse fail;
  ASSERT_TRUE(Fail(lease.task(), 1, /*retryable=*/true, &fail).ok());
  EXPECT_FALSE(fail.will_retry());  // 1 of 1 attempts
  EXPECT_EQ(Count("SELECT count(*) FROM attempts WHERE fault = 'TASK'"), 1);
}

// An infrastructure fault is retried even when the task's own attempts
// are down to one and the sweep has no retry budget at all.
TEST_F(RetryBudgetTest, InfrastructureFaultsRetryBeyondEveryLimit) {
  std::string yaml = testing::TinySpecYaml("infra", "[5]", /*max_attempts=*/1);
  yaml.replace(yaml.find("max_attempts_per_run: 1"), 23,
               "max_attempts_per_run: 1, max_retries_per_sweep: 0");
  Submit(yaml);
  Register("w1");
  for (int n = 0; n < 9; ++n) {
    hlab::v1::LeaseResponse lease = Lease("w1");
    ASSERT_TRUE(lease.has_task()) << n;
    EXPECT_EQ(lease.task().attempt(), n + 1);
    InfrastructureFault(lease.task(), n);
    clock_.Advance(absl::Seconds(2));
  }
  hlab::v1::LeaseResponse last = Lease("w1");
  ASSERT_TRUE(last.has_task());
  ASSERT_TRUE(Complete(last.task(), last.task().attempt(), "w1").ok());
  EXPECT_EQ(Run(last.task().run_ids(0)).state, store::RunState::kSucceeded);
  EXPECT_EQ(Count("SELECT infra_failures FROM tasks"), 9);
  EXPECT_EQ(Count("SELECT failures FROM tasks"), 0);
}

}  // namespace
}  // namespace hlab::coordinator
