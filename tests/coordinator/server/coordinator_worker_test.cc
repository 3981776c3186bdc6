// WorkerService against an in-process coordinator with an injected clock:
// register -> lease -> heartbeat -> metrics (replayed) -> checkpoint ->
// complete; fencing of stale attempts; lease expiry; permanent and
// retryable failures; a restart on the same database.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "coordinator/server/coordinator.h"
#include "coordinator/server/handler_pool.h"
#include "hlab/v1/client_service.grpc.pb.h"
#include "hlab/v1/worker_service.grpc.pb.h"
#include "tests/coordinator/server/coordinator_test_util.h"
#include "tests/coordinator/server/worker_service_fixture.h"

namespace hlab::coordinator {
namespace {

using testing::FakeClock;
using testing::TempDir;

using testing::WorkerServiceTest;

// A heartbeat is answered from its commit, not on the worker API's handler
// pool: with every pool thread busy (at 2,000 workers, all of them waited
// for commits) it is still answered, and its lease extended.
TEST_F(WorkerServiceTest, HeartbeatsAreAnsweredWhileEveryHandlerThreadIsBusy) {
  Submit(testing::TinySpecYaml("one"));
  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());

  // Shared: the blockers still queued run after this test's body.
  auto release = std::make_shared<absl::Notification>();
  HandlerPool* pool = coordinator_->context()->worker_handlers;
  ASSERT_NE(pool, nullptr);
  for (int i = 0; i < 64; ++i) {  // more than the pool has threads
    pool->Run([release] { release->WaitForNotification(); });
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  hlab::v1::HeartbeatRequest request;
  request.set_worker_id("w1");
  hlab::v1::TaskProgress* p = request.add_tasks();
  p->set_task_id(lease.task().task_id());
  p->set_attempt(1);
  hlab::v1::HeartbeatResponse response;
  const grpc::Status status = worker_->Heartbeat(&ctx, request, &response);
  const int64_t still_queued = pool->queued();  // blockers not yet started
  release->Notify();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stop_size(), 0);
  EXPECT_GT(still_queued, 0);
}

TEST_F(WorkerServiceTest, TrainsARunFromLeaseToCompletion) {
  hlab::v1::SubmitSweepResponse sweep = Submit(testing::TinySpecYaml("one"));
  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());
  const hlab::v1::Task& task = lease.task();
  EXPECT_EQ(task.kind(), hlab::v1::TASK_KIND_TRAIN);
  EXPECT_EQ(task.attempt(), 1);
  EXPECT_EQ(task.run_ids(0), sweep.runs(0).run_id());
  EXPECT_NE(task.task_json().find("\"budget_tokens\""), std::string::npos);
  ASSERT_EQ(lease.device_indices_size(), 1);
  EXPECT_FALSE(Lease("w1").has_task());  // nothing else to do

  EXPECT_EQ(Heartbeat("w1", task, 1).stop_size(), 0);

  hlab::v1::ReportMetricsResponse metrics;
  ASSERT_TRUE(ReportMetrics(task, 1, "w1", &metrics).ok());
  EXPECT_EQ(metrics.accepted(), 3);
  ASSERT_TRUE(ReportMetrics(task, 1, "w1", &metrics).ok());  // replay
  EXPECT_EQ(metrics.accepted(), 0);
  hlab::v1::QueryResponse count = Query("SELECT count(*) FROM metrics");
  EXPECT_EQ(count.rows(0).values(0).int_value(), 3);

  {
    grpc::ClientContext ctx;
    hlab::v1::ReportCheckpointRequest request;
    request.set_task_id(task.task_id());
    request.set_attempt(1);
    request.set_worker_id("w1");
    request.mutable_checkpoint()->set_step(3);
    request.mutable_checkpoint()->set_path("/tmp/step-3.ckpt");
    request.mutable_checkpoint()->set_sha256("ab");
    hlab::v1::ReportCheckpointResponse response;
    ASSERT_TRUE(worker_->ReportCheckpoint(&ctx, request, &response).ok());
  }
  ASSERT_TRUE(Complete(task, 1, "w1").ok());
  EXPECT_EQ(Run(task.run_ids(0)).state, store::RunState::kSucceeded);
  hlab::v1::QueryResponse summary =
      Query("SELECT final_train_loss, last_step FROM run_summary");
  ASSERT_EQ(summary.rows_size(), 1);
  EXPECT_DOUBLE_EQ(summary.rows(0).values(0).double_value(), 3.0);
  EXPECT_EQ(summary.rows(0).values(1).int_value(), 3);

  grpc::ClientContext ctx;
  hlab::v1::GetSweepRequest request;
  request.set_sweep("one");
  hlab::v1::GetSweepResponse response;
  ASSERT_TRUE(client_->GetSweep(&ctx, request, &response).ok());
  EXPECT_EQ(response.sweep().state(), hlab::v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_GT(response.sweep().flops_planned(), 0);
  EXPECT_DOUBLE_EQ(response.sweep().flops_done(),
                   response.sweep().flops_planned());

  grpc::ClientContext runs_ctx;
  hlab::v1::ListRunsRequest runs_request;
  hlab::v1::ListRunsResponse runs;
  ASSERT_TRUE(client_->ListRuns(&runs_ctx, runs_request, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 1);
  EXPECT_DOUBLE_EQ(runs.runs(0).final_loss(), 3.0);
}

// ReportMetrics is answered from the store's commit (no gRPC thread waits):
// concurrent calls share group commits, yet each OK is durable when it
// arrives, accepted counts only new points, and points without a run go to
// the task's run.
TEST_F(WorkerServiceTest, ConcurrentReportMetricsAreDurableWhenAnswered) {
  Submit(testing::TinySpecYaml("many"));
  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());
  const hlab::v1::Task& task = lease.task();
  constexpr int kThreads = 8, kCalls = 10, kBatch = 50;
  auto batch = [&](int64_t first_step) {
    hlab::v1::ReportMetricsRequest request;
    request.set_task_id(task.task_id());
    request.set_attempt(1);
    request.set_worker_id("w1");
    for (int i = 0; i < kBatch; ++i) {
      hlab::v1::MetricPoint* p = request.add_points();
      p->set_name("train_loss");  // no run_id: the task's run
      p->set_step(first_step + i);
      p->set_value(1.0);
    }
    return request;
  };
  std::vector<int64_t> accepted(kThreads, 0);
  std::vector<int> not_durable(kThreads, 0), failed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int c = 0; c < kCalls; ++c) {
        // Threads t and t ^ 1 send the same steps: one of each pair is a
        // replay, in whichever order the writer takes them.
        const int64_t first = ((t / 2) * kCalls + c) * kBatch;
        grpc::ClientContext ctx;
        hlab::v1::ReportMetricsResponse response;
        if (!worker_->ReportMetrics(&ctx, batch(first), &response).ok()) {
          ++failed[t];
          continue;
        }
        accepted[t] += response.accepted();
        const std::string count_sql = absl::StrCat(
            "SELECT count(*) FROM metrics WHERE run_id = '", task.run_ids(0),
            "' AND step BETWEEN ", first, " AND ", first + kBatch - 1);
        if (Query(count_sql).rows(0).values(0).int_value() != kBatch) {
          ++not_durable[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failed[t], 0) << "thread " << t;
    EXPECT_EQ(not_durable[t], 0) << "thread " << t;
    total += accepted[t];
  }
  const int64_t unique = int64_t{kThreads / 2} * kCalls * kBatch;
  EXPECT_EQ(total, unique);
  EXPECT_EQ(Query("SELECT count(*) FROM metrics").rows(0).values(0).int_value(),
            unique);

  // Names are stored as the trainer's records call them: '/' becomes '_'.
  hlab::v1::ReportMetricsRequest named = batch(1'000'000);
  named.mutable_points()->DeleteSubrange(1, kBatch - 1);
  named.mutable_points(0)->set_name("niah_acc/single");
  grpc::ClientContext named_ctx;
  hlab::v1::ReportMetricsResponse named_response;
  ASSERT_TRUE(worker_->ReportMetrics(&named_ctx, named, &named_response).ok());
  EXPECT_EQ(named_response.accepted(), 1);
  EXPECT_EQ(Query("SELECT name FROM metrics WHERE step = 1000000")
                .rows(0)
                .values(0)
                .text_value(),
            "niah_acc_single");

  // Refused before the store: too many points, an unknown task.
  hlab::v1::ReportMetricsRequest big = batch(0);
  for (int i = 0; i < 1000; ++i) *big.add_points() = big.points(0);
  grpc::ClientContext big_ctx;
  hlab::v1::ReportMetricsResponse response;
  EXPECT_EQ(worker_->ReportMetrics(&big_ctx, big, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  hlab::v1::ReportMetricsRequest unknown = batch(0);
  unknown.set_task_id("no-such-task");
  grpc::ClientContext unknown_ctx;
  EXPECT_EQ(
      worker_->ReportMetrics(&unknown_ctx, unknown, &response).error_code(),
      grpc::StatusCode::NOT_FOUND);
}

TEST_F(WorkerServiceTest, UnregisteredWorkerIsNotFound) {
  Submit(testing::TinySpecYaml("nf"));
  grpc::ClientContext ctx;
  hlab::v1::LeaseRequest request;
  request.set_worker_id("ghost");
  *request.add_free_devices() = testing::Cpu();
  hlab::v1::LeaseResponse response;
  EXPECT_EQ(worker_->Lease(&ctx, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(WorkerServiceTest, ExpiredLeaseIsRequeuedAndTheOldAttemptFenced) {
  Submit(testing::TinySpecYaml("exp"));
  Register("w1");
  hlab::v1::LeaseResponse first = Lease("w1");
  ASSERT_TRUE(first.has_task());
  clock_.Advance(absl::Seconds(31));
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  EXPECT_FALSE(Lease("w1").has_task());  // backing off
  clock_.Advance(absl::Seconds(2));
  Register("w2");
  hlab::v1::LeaseResponse second = Lease("w2");
  ASSERT_TRUE(second.has_task());
  EXPECT_EQ(second.task().task_id(), first.task().task_id());
  EXPECT_EQ(second.task().attempt(), 2);

  // The zombie of attempt 1 is told to stop and cannot write.
  hlab::v1::HeartbeatResponse hb = Heartbeat("w1", first.task(), 1);
  ASSERT_EQ(hb.stop_size(), 1);
  EXPECT_EQ(hb.stop(0).task_id(), first.task().task_id());
  hlab::v1::ReportMetricsResponse metrics;
  EXPECT_EQ(ReportMetrics(first.task(), 1, "w1", &metrics).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Complete(first.task(), 1, "w1").error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  hlab::v1::FailResponse fail;
  EXPECT_EQ(Fail(first.task(), 1, true, &fail).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Query("SELECT count(*) FROM metrics").rows(0).values(0).int_value(),
            0);
  // The current attempt from another worker is refused too.
  EXPECT_EQ(ReportMetrics(second.task(), 2, "w1", &metrics).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // The current attempt carries on.
  EXPECT_EQ(Heartbeat("w2", second.task(), 2).stop_size(), 0);
  EXPECT_TRUE(Complete(second.task(), 2, "w2").ok());
}

TEST_F(WorkerServiceTest, PermanentFailureFailsTheRunOthersGoOn) {
  Submit(testing::TinySpecYaml("perm", "[5, 10]"));
  Register("w1");
  hlab::v1::LeaseResponse a = Lease("w1");
  hlab::v1::LeaseResponse b = Lease("w1");
  ASSERT_TRUE(a.has_task() && b.has_task());
  hlab::v1::FailResponse fail;
  ASSERT_TRUE(Fail(a.task(), 1, /*retryable=*/false, &fail).ok());
  EXPECT_FALSE(fail.will_retry());
  store::Run failed = Run(a.task().run_ids(0));
  EXPECT_EQ(failed.state, store::RunState::kFailed);
  EXPECT_NE(failed.failure_reason.find("boom"), std::string::npos)
      << failed.failure_reason;
  clock_.Advance(absl::Minutes(10));
  EXPECT_FALSE(Lease("w1").has_task());  // no retry
  EXPECT_TRUE(Complete(b.task(), 1, "w1").ok());
  EXPECT_EQ(Run(b.task().run_ids(0)).state, store::RunState::kSucceeded);
}

TEST_F(WorkerServiceTest, CpuRanksTaskLeasesOnlyToAWorkerWithThatManySlots) {
  Submit(testing::TinySpecYaml("ranks") +
         "resources: [{scale: S1, cpu_threads: 1, cpu_ranks: 2}]\n");
  Register("w1");
  auto lease = [&](int free_slots) {
    grpc::ClientContext ctx;
    hlab::v1::LeaseRequest request;
    request.set_worker_id("w1");
    *request.add_free_devices() = testing::Cpu();
    request.set_free_slots(free_slots);
    hlab::v1::LeaseResponse response;
    EXPECT_TRUE(worker_->Lease(&ctx, request, &response).ok());
    return response;
  };
  EXPECT_FALSE(lease(1).has_task());
  EXPECT_FALSE(Lease("w1").has_task());  // a worker that sends no slots: 1
  const hlab::v1::LeaseResponse leased = lease(2);
  ASSERT_TRUE(leased.has_task());
  EXPECT_EQ(leased.task().resources().cpu_ranks(), 2);
  // Each rank takes one of the step's two micro-batches.
  const nlohmann::json task = nlohmann::json::parse(leased.task().task_json());
  EXPECT_EQ(task["batch_tokens"], 1024);
  EXPECT_EQ(task["micro_batch_tokens"], 512);
  EXPECT_EQ(task["threads"], 1);
}

TEST_F(WorkerServiceTest, DeregisterMarksTheWorkerLostAndRequeuesOnlyItsTasks) {
  Submit(testing::TinySpecYaml("leave", "[5, 10]"));
  Register("w1");
  Register("w2");
  const hlab::v1::LeaseResponse a = Lease("w1");
  const hlab::v1::LeaseResponse b = Lease("w2");
  ASSERT_TRUE(a.has_task() && b.has_task());
  grpc::ClientContext ctx;
  hlab::v1::DeregisterRequest request;
  request.set_worker_id("w1");
  hlab::v1::DeregisterResponse response;
  ASSERT_TRUE(worker_->Deregister(&ctx, request, &response).ok());
  EXPECT_EQ(response.requeued(), 1);
  EXPECT_EQ(Query("SELECT state FROM workers WHERE id = 'w1'")
                .rows(0)
                .values(0)
                .text_value(),
            "LOST");
  EXPECT_EQ(Query("SELECT state FROM workers WHERE id = 'w2'")
                .rows(0)
                .values(0)
                .text_value(),
            "UP");
  EXPECT_EQ(
      Query("SELECT state FROM tasks WHERE id = '" + a.task().task_id() + "'")
          .rows(0)
          .values(0)
          .text_value(),
      "PENDING");
  EXPECT_EQ(Query("SELECT count(*) FROM events WHERE kind = 'worker_left'"
                  " AND message = 'w1'")
                .rows(0)
                .values(0)
                .int_value(),
            1);
  // w1's old attempt is fenced; w2's lease is untouched.
  EXPECT_FALSE(Complete(a.task(), 1, "w1").ok());
  EXPECT_TRUE(Complete(b.task(), 1, "w2").ok());
  clock_.Advance(absl::Seconds(2));  // the requeue's backoff
  const hlab::v1::LeaseResponse again = Lease("w2");
  ASSERT_TRUE(again.has_task());
  EXPECT_EQ(again.task().task_id(), a.task().task_id());
  EXPECT_EQ(again.task().attempt(), 2);

  grpc::ClientContext unknown_ctx;
  request.set_worker_id("nobody");
  EXPECT_EQ(worker_->Deregister(&unknown_ctx, request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// `hlab drain`: the drained worker runs its task to the end and is leased
// nothing new (another worker takes the work), its heartbeats say so, and
// it takes tasks again once undrained.
TEST_F(WorkerServiceTest, DrainedWorkerFinishesItsTaskAndIsLeasedNothingNew) {
  Submit(testing::TinySpecYaml("drain", "[5, 10, 20]"));
  Register("w1");
  Register("w2");
  const hlab::v1::LeaseResponse a = Lease("w1");
  ASSERT_TRUE(a.has_task());

  auto drain = [&](const std::string& id, bool undrain,
                   hlab::v1::DrainWorkerResponse* response) {
    grpc::ClientContext ctx;
    hlab::v1::DrainWorkerRequest request;
    request.set_worker_id(id);
    request.set_undrain(undrain);
    return client_->DrainWorker(&ctx, request, response);
  };
  hlab::v1::DrainWorkerResponse drained;
  ASSERT_TRUE(drain("w1", false, &drained).ok());
  EXPECT_EQ(drained.worker().state(), hlab::v1::WORKER_STATE_DRAINING);
  EXPECT_EQ(drained.worker().version(), "hlab test");
  ASSERT_EQ(drained.worker().task_ids_size(), 1);
  EXPECT_EQ(drained.worker().task_ids(0), a.task().task_id());

  const hlab::v1::HeartbeatResponse beat = Heartbeat("w1", a.task(), 1);
  EXPECT_TRUE(beat.draining());
  EXPECT_EQ(beat.stop_size(), 0);
  EXPECT_FALSE(Lease("w1").has_task());
  EXPECT_TRUE(Lease("w2").has_task());
  EXPECT_TRUE(Complete(a.task(), 1, "w1").ok());
  EXPECT_FALSE(Lease("w1").has_task());
  {
    grpc::ClientContext ctx;
    hlab::v1::ListWorkersRequest request;
    hlab::v1::ListWorkersResponse response;
    ASSERT_TRUE(client_->ListWorkers(&ctx, request, &response).ok());
    ASSERT_EQ(response.workers_size(), 2);
    EXPECT_EQ(response.workers(0).state(), hlab::v1::WORKER_STATE_DRAINING);
    EXPECT_EQ(response.workers(0).task_ids_size(), 0);
    EXPECT_EQ(response.workers(1).state(), hlab::v1::WORKER_STATE_ALIVE);
  }

  hlab::v1::DrainWorkerResponse undrained;
  ASSERT_TRUE(drain("w1", true, &undrained).ok());
  EXPECT_EQ(undrained.worker().state(), hlab::v1::WORKER_STATE_ALIVE);
  EXPECT_TRUE(Lease("w1").has_task());

  hlab::v1::DrainWorkerResponse unused;
  EXPECT_EQ(drain("nobody", false, &unused).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(drain("", false, &unused).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(WorkerServiceTest, RetryableFailureIsRetriedUntilTheLimit) {
  Submit(testing::TinySpecYaml("retry", "[5]", /*max_attempts=*/2));
  Register("w1");
  hlab::v1::LeaseResponse first = Lease("w1");
  ASSERT_TRUE(first.has_task());
  hlab::v1::FailResponse fail;
  ASSERT_TRUE(Fail(first.task(), 1, /*retryable=*/true, &fail).ok());
  EXPECT_TRUE(fail.will_retry());
  EXPECT_FALSE(Lease("w1").has_task());  // backoff of 1 s
  clock_.Advance(absl::Seconds(2));
  hlab::v1::LeaseResponse second = Lease("w1");
  ASSERT_TRUE(second.has_task());
  EXPECT_EQ(second.task().attempt(), 2);
  ASSERT_TRUE(Fail(second.task(), 2, /*retryable=*/true, &fail).ok());
  EXPECT_FALSE(fail.will_retry());  // 2 of 2 attempts
  EXPECT_EQ(Run(first.task().run_ids(0)).state, store::RunState::kFailed);
}

TEST_F(WorkerServiceTest, RestartKeepsSweepsLeasesAndAttempts) {
  hlab::v1::SubmitSweepResponse sweep =
      Submit(testing::TinySpecYaml("restart", "[5, 10]"));
  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());
  hlab::v1::ReportMetricsResponse metrics;
  ASSERT_TRUE(ReportMetrics(lease.task(), 1, "w1", &metrics).ok());

  Restart();
  clock_.Advance(absl::Seconds(10));  // the lease is still valid
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());

  grpc::ClientContext ctx;
  hlab::v1::GetSweepRequest request;
  request.set_sweep("restart");
  hlab::v1::GetSweepResponse got;
  ASSERT_TRUE(client_->GetSweep(&ctx, request, &got).ok());
  EXPECT_EQ(got.sweep().sweep_id(), sweep.sweep().sweep_id());
  EXPECT_EQ(got.sweep().runs_total(), 2);
  EXPECT_EQ(got.sweep().runs_running(), 1);
  // The worker carries on with its lease and attempt.
  EXPECT_EQ(Heartbeat("w1", lease.task(), 1).stop_size(), 0);
  ASSERT_TRUE(ReportMetrics(lease.task(), 1, "w1", &metrics).ok());
  EXPECT_EQ(Query("SELECT count(*) FROM metrics").rows(0).values(0).int_value(),
            3);
  ASSERT_TRUE(Complete(lease.task(), 1, "w1").ok());
  // The other task is still there to lease.
  hlab::v1::LeaseResponse next = Lease("w1");
  ASSERT_TRUE(next.has_task());
  EXPECT_NE(next.task().task_id(), lease.task().task_id());
  // Resubmitting after the restart changes nothing.
  hlab::v1::SubmitSweepResponse again =
      Submit(testing::TinySpecYaml("restart", "[5, 10]"));
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.sweep().sweep_id(), sweep.sweep().sweep_id());
}

TEST_F(WorkerServiceTest, CancelledTaskIsStoppedAtTheNextHeartbeat) {
  Submit(testing::TinySpecYaml("cancel"));
  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());
  grpc::ClientContext ctx;
  hlab::v1::CancelRequest request;
  request.set_sweep("cancel");
  hlab::v1::CancelResponse response;
  ASSERT_TRUE(client_->Cancel(&ctx, request, &response).ok());
  hlab::v1::HeartbeatResponse hb = Heartbeat("w1", lease.task(), 1);
  ASSERT_EQ(hb.stop_size(), 1);
  EXPECT_EQ(hb.stop(0).task_id(), lease.task().task_id());
}

TEST_F(WorkerServiceTest, LeaseWaitsForWorkSubmittedMeanwhile) {
  Register("w1");
  hlab::v1::LeaseResponse response;
  grpc::Status status;
  std::thread poll([&] {
    grpc::ClientContext ctx;
    hlab::v1::LeaseRequest request;
    request.set_worker_id("w1");
    *request.add_free_devices() = testing::Cpu();
    request.set_wait_ms(60000);  // capped by the server (5 s)
    status = worker_->Lease(&ctx, request, &response);
  });
  Submit(testing::TinySpecYaml("later"));
  poll.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(response.has_task());
}

TEST_F(WorkerServiceTest, GpuTasksGoOnlyToWorkersWithGpus) {
  std::string yaml = testing::TinySpecYaml("gpu");
  yaml += "resources: [{scale: S1, gpus: 1, gpu_memory_bytes: 1000}]\n";
  Submit(yaml);
  Register("w1");
  EXPECT_FALSE(Lease("w1").has_task());  // a CPU slot only
  grpc::ClientContext ctx;
  hlab::v1::LeaseRequest request;
  request.set_worker_id("w1");
  hlab::v1::Device small, big;
  small.set_kind("cuda");
  small.set_index(0);
  small.set_memory_bytes(10);
  big.set_kind("cuda");
  big.set_index(1);
  big.set_memory_bytes(4000);
  *request.add_free_devices() = small;
  *request.add_free_devices() = big;
  hlab::v1::LeaseResponse response;
  ASSERT_TRUE(worker_->Lease(&ctx, request, &response).ok());
  ASSERT_TRUE(response.has_task());
  ASSERT_EQ(response.device_indices_size(), 1);
  EXPECT_EQ(response.device_indices(0), 1);
}

TEST_F(WorkerServiceTest, DecaysStartFromTheTrunksBranchCheckpoints) {
  std::string yaml = testing::TinySpecYaml("wsd", "[5, 10]");
  yaml.replace(yaml.find("share_trunk: false"), 18, "share_trunk: true");
  Submit(yaml);
  Register("w1");
  hlab::v1::LeaseResponse trunk = Lease("w1");
  ASSERT_TRUE(trunk.has_task());
  ASSERT_EQ(trunk.task().kind(), hlab::v1::TASK_KIND_TRUNK);
  ASSERT_EQ(trunk.task().branch_points_size(), 2);
  nlohmann::json trainer = nlohmann::json::parse(trunk.task().task_json());
  EXPECT_EQ(trainer["branch_budgets_tokens"].size(), 2u);
  // The worker reports each branch checkpoint; the coordinator matches it
  // to its run by step.
  for (const auto& b : trunk.task().branch_points()) {
    grpc::ClientContext ctx;
    hlab::v1::ReportCheckpointRequest request;
    request.set_task_id(trunk.task().task_id());
    request.set_attempt(1);
    request.mutable_checkpoint()->set_step(b.step());
    request.mutable_checkpoint()->set_branch_point(true);
    request.mutable_checkpoint()->set_path("/ck/branch-" + b.run_id());
    hlab::v1::ReportCheckpointResponse response;
    ASSERT_TRUE(worker_->ReportCheckpoint(&ctx, request, &response).ok());
  }
  EXPECT_FALSE(Lease("w1").has_task());  // decays wait for the trunk
  {
    // Trunk points without a run: step 1 belongs to both runs, the last
    // step only to the larger budget's run.
    grpc::ClientContext ctx;
    hlab::v1::ReportMetricsRequest request;
    request.set_task_id(trunk.task().task_id());
    request.set_attempt(1);
    for (int64_t step : {int64_t{1}, trunk.task().end_step()}) {
      hlab::v1::MetricPoint* p = request.add_points();
      p->set_name("train/loss");
      p->set_step(step);
      p->set_value(5);
    }
    hlab::v1::ReportMetricsResponse response;
    ASSERT_TRUE(worker_->ReportMetrics(&ctx, request, &response).ok());
    EXPECT_EQ(response.accepted(), 3);
    EXPECT_EQ(Query("SELECT count(*) FROM metrics WHERE name = 'train_loss'")
                  .rows(0)
                  .values(0)
                  .int_value(),
              3);
  }
  ASSERT_TRUE(Complete(trunk.task(), 1, "w1").ok());
  for (int i = 0; i < 2; ++i) {
    hlab::v1::LeaseResponse decay = Lease("w1");
    ASSERT_TRUE(decay.has_task());
    ASSERT_EQ(decay.task().kind(), hlab::v1::TASK_KIND_DECAY);
    nlohmann::json t = nlohmann::json::parse(decay.task().task_json());
    EXPECT_EQ(t["init_from"], "/ck/branch-" + decay.task().run_ids(0));
    EXPECT_EQ(t["budget_tokens"],
              Run(decay.task().run_ids(0)).spec.budget_tokens);
  }
}

TEST_F(WorkerServiceTest, DecayWithoutBranchCheckpointFailsVisibly) {
  std::string yaml = testing::TinySpecYaml("nobranch", "[5, 10]");
  yaml.replace(yaml.find("share_trunk: false"), 18, "share_trunk: true");
  Submit(yaml);
  Register("w1");
  hlab::v1::LeaseResponse trunk = Lease("w1");
  ASSERT_TRUE(trunk.has_task());
  ASSERT_TRUE(Complete(trunk.task(), 1, "w1").ok());  // no checkpoints
  EXPECT_FALSE(Lease("w1").has_task());
  for (const auto& b : trunk.task().branch_points()) {
    store::Run run = Run(b.run_id());
    EXPECT_EQ(run.state, store::RunState::kFailed);
    EXPECT_NE(run.failure_reason.find("branch checkpoint"), std::string::npos)
        << run.failure_reason;
  }
}

TEST_F(WorkerServiceTest, WatchFollowsASweepUntilItFinishes) {
  Submit(testing::TinySpecYaml("live"));
  grpc::ClientContext watch_ctx;
  hlab::v1::WatchSweepRequest watch;
  watch.set_sweep("live");
  watch.set_until_done(true);
  auto reader = client_->WatchSweep(&watch_ctx, watch);
  hlab::v1::Event event;
  ASSERT_TRUE(reader->Read(&event));  // submitted; the stream stays open
  EXPECT_EQ(event.kind(), hlab::v1::SWEEP_SUBMITTED);

  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());
  ASSERT_TRUE(Complete(lease.task(), 1, "w1").ok());

  std::vector<hlab::v1::RunState> states;
  while (reader->Read(&event)) {
    if (event.kind() == hlab::v1::RUN_STATE_CHANGED) {
      states.push_back(event.run_state());
    }
  }
  EXPECT_TRUE(reader->Finish().ok());  // ended by itself: sweep finished
  ASSERT_FALSE(states.empty());
  EXPECT_EQ(states.back(), hlab::v1::RUN_STATE_SUCCEEDED);
}

TEST_F(WorkerServiceTest, RunsFinishedInAnotherSweepAreReused) {
  hlab::v1::SubmitSweepResponse first = Submit(testing::TinySpecYaml("first"));
  Register("w1");
  hlab::v1::LeaseResponse lease = Lease("w1");
  ASSERT_TRUE(lease.has_task());
  ASSERT_TRUE(Complete(lease.task(), 1, "w1").ok());
  // Same run (the name is not part of a run id) plus a new budget.
  hlab::v1::SubmitSweepResponse second =
      Submit(testing::TinySpecYaml("second", "[5, 10]"));
  EXPECT_TRUE(second.created());
  ASSERT_EQ(second.reused_run_ids_size(), 1);
  EXPECT_EQ(second.reused_run_ids(0), first.runs(0).run_id());
  EXPECT_EQ(second.sweep().runs_succeeded(), 1);
  hlab::v1::LeaseResponse next = Lease("w1");
  ASSERT_TRUE(next.has_task());
  EXPECT_NE(next.task().run_ids(0), first.runs(0).run_id());
  EXPECT_FALSE(Lease("w1").has_task());
}

}  // namespace
}  // namespace hlab::coordinator
