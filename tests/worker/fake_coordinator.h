// FakeCoordinator: an in-process WorkerService for the worker tests. It
// hands out scripted tasks, answers heartbeats with scripted stop lists, and
// records every request it receives (with the authorization header).
// FakeServer serves one on 127.0.0.1 (port 0, or a given port to simulate a
// restart).
//
// Thread-safe: gRPC threads call the handlers; tests read with WaitFor().
//
//   FakeServer server(std::make_unique<FakeCoordinator>());
//   server.fake().AddTask(task);
//   ASSERT_TRUE(server.fake().WaitFor([](const FakeState& s) {
//     return !s.completes.empty(); }));
#ifndef HLAB_TESTS_WORKER_FAKE_COORDINATOR_H_
#define HLAB_TESTS_WORKER_FAKE_COORDINATOR_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "hlab/v1/worker_service.grpc.pb.h"

namespace hlab::worker::testing {

struct FakeState {
  std::vector<hlab::v1::RegisterRequest> registers;
  std::vector<hlab::v1::HeartbeatRequest> heartbeats;
  std::vector<hlab::v1::LeaseRequest> leases;
  std::vector<hlab::v1::MetricPoint> points;
  std::vector<hlab::v1::ReportCheckpointRequest> checkpoints;
  std::vector<hlab::v1::CompleteRequest> completes;
  std::vector<hlab::v1::FailRequest> fails;
  std::vector<hlab::v1::DeregisterRequest> deregisters;
  std::vector<std::string> authorization;    // one per request
  std::deque<hlab::v1::Task> queue;          // tasks to hand out
  std::vector<hlab::v1::TaskProgress> stop;  // answered to every heartbeat
  int handed_out = 0;
  int refused = 0;           // reports refused by RefuseWrites
  int leases_in_flight = 0;  // Lease calls being answered now

  // Points of `name`, in arrival order.
  std::vector<hlab::v1::MetricPoint> Points(const std::string& name) const;
  bool Failed(const std::string& task_id) const;
  bool Completed(const std::string& task_id) const;
};

class FakeCoordinator final : public hlab::v1::WorkerService::Service {
 public:
  void AddTask(const hlab::v1::Task& task);
  // Every later heartbeat answer tells the worker to stop (task, attempt).
  void StopTask(const std::string& task_id, int64_t attempt);
  // Refuse reports of this task with FAILED_PRECONDITION (a stale attempt).
  void FenceTask(const std::string& task_id);

  // Refuse the next `n` ReportMetrics and ReportCheckpoint calls as a
  // coordinator that cannot write its database does (UNAVAILABLE,
  // kStoreNotWritable).
  void RefuseWrites(int n);

  // Waits until `pred` holds (true), or `timeout` passes (false).
  bool WaitFor(const std::function<bool(const FakeState&)>& pred,
               absl::Duration timeout = absl::Seconds(60));
  FakeState Snapshot();

  grpc::Status Register(grpc::ServerContext* context,
                        const hlab::v1::RegisterRequest* request,
                        hlab::v1::RegisterResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const hlab::v1::HeartbeatRequest* request,
                         hlab::v1::HeartbeatResponse* response) override;
  grpc::Status Lease(grpc::ServerContext* context,
                     const hlab::v1::LeaseRequest* request,
                     hlab::v1::LeaseResponse* response) override;
  grpc::Status ReportMetrics(
      grpc::ServerContext* context,
      const hlab::v1::ReportMetricsRequest* request,
      hlab::v1::ReportMetricsResponse* response) override;
  grpc::Status ReportCheckpoint(
      grpc::ServerContext* context,
      const hlab::v1::ReportCheckpointRequest* request,
      hlab::v1::ReportCheckpointResponse* response) override;
  grpc::Status Complete(grpc::ServerContext* context,
                        const hlab::v1::CompleteRequest* request,
                        hlab::v1::CompleteResponse* response) override;
  grpc::Status Fail(grpc::ServerContext* context,
                    const hlab::v1::FailRequest* request,
                    hlab::v1::FailResponse* response) override;
  grpc::Status Deregister(grpc::ServerContext* context,
                          const hlab::v1::DeregisterRequest* request,
                          hlab::v1::DeregisterResponse* response) override;

 private:
  void NoteAuth(grpc::ServerContext* context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsFenced(const std::string& task_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  FakeState state_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> fenced_ ABSL_GUARDED_BY(mu_);
  int refuse_writes_ ABSL_GUARDED_BY(mu_) = 0;
  // Counts one refusal if RefuseWrites has some left: its status, else OK.
  grpc::Status Refusal() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

class FakeServer {
 public:
  // Serves `fake` on 127.0.0.1:`port` (0: any free port), plaintext or
  // with `credentials` (e.g. TLS).
  explicit FakeServer(std::unique_ptr<FakeCoordinator> fake, int port = 0,
                      std::shared_ptr<grpc::ServerCredentials> credentials =
                          grpc::InsecureServerCredentials());
  ~FakeServer();

  FakeCoordinator& fake() { return *fake_; }
  int port() const { return port_; }
  std::string address() const;
  void Shutdown();

 private:
  std::unique_ptr<FakeCoordinator> fake_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace hlab::worker::testing

#endif  // HLAB_TESTS_WORKER_FAKE_COORDINATOR_H_
