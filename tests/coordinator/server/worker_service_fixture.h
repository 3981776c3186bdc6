// The fixture of the WorkerService tests: an in-process coordinator with an
// injected clock, the generated stubs as a client and a worker, and one-call
// helpers for each RPC a worker makes.
#ifndef HLAB_TESTS_COORDINATOR_SERVER_WORKER_SERVICE_FIXTURE_H_
#define HLAB_TESTS_COORDINATOR_SERVER_WORKER_SERVICE_FIXTURE_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "coordinator/server/coordinator.h"
#include "hlab/v1/client_service.grpc.pb.h"
#include "hlab/v1/worker_service.grpc.pb.h"
#include "tests/coordinator/server/coordinator_test_util.h"

namespace hlab::coordinator::testing {

class WorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  void Start() {
    coordinator_ = StartOrDie(TestOptions(dir_.File("hlab.db"), &clock_));
    ASSERT_NE(coordinator_, nullptr);
    auto channel = Connect(*coordinator_);
    client_ = hlab::v1::ClientService::NewStub(channel);
    worker_ = hlab::v1::WorkerService::NewStub(channel);
  }

  void Restart() {
    client_.reset();
    worker_.reset();
    coordinator_.reset();
    Start();
  }

  hlab::v1::SubmitSweepResponse Submit(const std::string& yaml) {
    grpc::ClientContext ctx;
    hlab::v1::SubmitSweepRequest request;
    *request.mutable_spec() = Spec(yaml);
    hlab::v1::SubmitSweepResponse response;
    grpc::Status status = client_->SubmitSweep(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  void Register(const std::string& id) {
    grpc::ClientContext ctx;
    hlab::v1::RegisterRequest request;
    request.set_worker_id(id);
    request.set_hostname("test-host");
    request.set_version("hlab test");
    *request.add_devices() = Cpu();
    hlab::v1::RegisterResponse response;
    request.set_capacity(2);
    ASSERT_TRUE(worker_->Register(&ctx, request, &response).ok());
    EXPECT_EQ(response.worker_id(), id);
    EXPECT_EQ(Query("SELECT capacity FROM workers WHERE id = '" + id + "'")
                  .rows(0)
                  .values(0)
                  .int_value(),
              2);
    EXPECT_EQ(response.lease_ms(), 30000);
    EXPECT_EQ(response.heartbeat_interval_ms(), 5000);
  }

  // One lease attempt with no waiting.
  hlab::v1::LeaseResponse Lease(const std::string& worker_id) {
    grpc::ClientContext ctx;
    hlab::v1::LeaseRequest request;
    request.set_worker_id(worker_id);
    *request.add_free_devices() = Cpu();
    request.set_wait_ms(0);
    hlab::v1::LeaseResponse response;
    grpc::Status status = worker_->Lease(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  hlab::v1::HeartbeatResponse Heartbeat(const std::string& worker_id,
                                        const hlab::v1::Task& task,
                                        int64_t attempt) {
    grpc::ClientContext ctx;
    hlab::v1::HeartbeatRequest request;
    request.set_worker_id(worker_id);
    hlab::v1::TaskProgress* p = request.add_tasks();
    p->set_task_id(task.task_id());
    p->set_attempt(attempt);
    p->set_step(3);
    p->set_tokens(3072);
    p->set_loss(4.5);
    p->set_tokens_per_s(1000);
    hlab::v1::HeartbeatResponse response;
    EXPECT_TRUE(worker_->Heartbeat(&ctx, request, &response).ok());
    return response;
  }

  grpc::Status ReportMetrics(const hlab::v1::Task& task, int64_t attempt,
                             const std::string& worker_id,
                             hlab::v1::ReportMetricsResponse* response) {
    grpc::ClientContext ctx;
    hlab::v1::ReportMetricsRequest request;
    request.set_task_id(task.task_id());
    request.set_attempt(attempt);
    request.set_worker_id(worker_id);
    for (int step = 1; step <= 3; ++step) {
      hlab::v1::MetricPoint* p = request.add_points();
      p->set_run_id(task.run_ids(0));
      p->set_name("train_loss");
      p->set_step(step);
      p->set_tokens(step * 1024);
      p->set_value(6.0 - step);
    }
    return worker_->ReportMetrics(&ctx, request, response);
  }

  grpc::Status Complete(const hlab::v1::Task& task, int64_t attempt,
                        const std::string& worker_id) {
    grpc::ClientContext ctx;
    hlab::v1::CompleteRequest request;
    request.set_task_id(task.task_id());
    request.set_attempt(attempt);
    request.set_worker_id(worker_id);
    hlab::v1::CompleteResponse response;
    return worker_->Complete(&ctx, request, &response);
  }

  // `fault` UNSPECIFIED is what a worker older than fault classes sends.
  grpc::Status Fail(
      const hlab::v1::Task& task, int64_t attempt, bool retryable,
      hlab::v1::FailResponse* response,
      hlab::v1::FaultClass fault = hlab::v1::FAULT_CLASS_UNSPECIFIED) {
    grpc::ClientContext ctx;
    hlab::v1::FailRequest request;
    request.set_task_id(task.task_id());
    request.set_attempt(attempt);
    request.set_error("boom");
    request.set_exit_code(retryable ? 75 : 2);
    request.set_retryable(retryable);
    request.set_fault(fault);
    return worker_->Fail(&ctx, request, response);
  }

  hlab::v1::QueryResponse Query(const std::string& sql) {
    grpc::ClientContext ctx;
    hlab::v1::QueryRequest request;
    request.set_sql(sql);
    hlab::v1::QueryResponse response;
    grpc::Status status = client_->Query(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  store::Run Run(const std::string& id) {
    auto run = coordinator_->store()->GetRun(id);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : store::Run();
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<hlab::v1::ClientService::Stub> client_;
  std::unique_ptr<hlab::v1::WorkerService::Stub> worker_;
};

}  // namespace hlab::coordinator::testing

#endif  // HLAB_TESTS_COORDINATOR_SERVER_WORKER_SERVICE_FIXTURE_H_
