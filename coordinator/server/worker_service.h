// WorkerServiceImpl: the worker API of hlab-coordinator (what hlab-worker
// calls; proto/hlab/v1/worker_service.proto, docs/coordinator.md).
//
//   Register         a worker, its devices and capacity (tasks at once)
//   Heartbeat        extends the leases of its tasks; answers the tasks it
//                    must stop (cancelled, or its lease moved on)
//   Lease            long poll (up to ServiceContext::max_lease_wait) for
//                    the first leasable task (priority, then cheapest) that
//                    fits the free devices, claimed from the in-memory
//                    LeaseQueue (lease_queue.h) and leased in the store;
//                    returns it with its attempt and its task file
//                    (trainer_task.h: hlab-train's for TRAIN/TRUNK/DECAY,
//                    hlab-eval's for EVAL), built once the lease is won;
//                    a task whose file cannot be built (e.g. an EVAL whose
//                    LongPPL reference run has not finished) fails for good
//   ReportMetrics    batched points, fenced; keyed (run, name, step), so a
//                    replay adds nothing (accepted counts new points); a
//                    TRUNK's points without a run go to every run whose
//                    branch point is at or after their step
//   ReportCheckpoint fenced; a TRUNK's branch checkpoints feed its DECAYs
//   Complete, Fail   fenced; Fail retries with the sweep's backoff. An
//                    EVAL's Complete carries its results (MetricPoint with
//                    details_json), stored in the evals table
//   Deregister       a worker leaving cleanly: LOST at once; tasks still
//                    leased to it (only to it) are requeued
// A stale attempt is FAILED_PRECONDITION and changes nothing; an unknown
// worker is NOT_FOUND (it registers again). Every RPC needs the worker role.
//
// Thread-safety: thread-safe. No handler blocks a gRPC thread: the Lease
// long poll waits on a grpc::Alarm between tries, ReportMetrics and
// Heartbeat are answered after the store writer's commit (no thread waits
// for it: a fleet's heartbeats would otherwise hold every pool thread),
// and the others (and each Lease try) run on the worker API's HandlerPool
// (ServiceContext::worker_handlers).
//
//   WorkerServiceImpl service(&context);
//   builder.RegisterService(&service);
#ifndef HLAB_COORDINATOR_SERVER_WORKER_SERVICE_H_
#define HLAB_COORDINATOR_SERVER_WORKER_SERVICE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/server/context.h"
#include "coordinator/server/lease_queue.h"
#include "coordinator/server/task_spec_cache.h"
#include "hlab/v1/worker_service.grpc.pb.h"

namespace hlab::coordinator {

// The lease holder of tasks the coordinator fails itself (a task whose task
// file cannot be built).
inline constexpr char kCoordinatorHolder[] = "coordinator";

class WorkerServiceImpl final
    : public hlab::v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(ServiceContext* context)
      : context_(context),
        lease_queue_(context->store),
        task_specs_(context->store) {}

  grpc::ServerUnaryReactor* Register(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::RegisterRequest* request,
      hlab::v1::RegisterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::HeartbeatRequest* request,
      hlab::v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* ctx,
                                  const hlab::v1::LeaseRequest* request,
                                  hlab::v1::LeaseResponse* response) override;
  grpc::ServerUnaryReactor* ReportMetrics(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::ReportMetricsRequest* request,
      hlab::v1::ReportMetricsResponse* response) override;
  grpc::ServerUnaryReactor* ReportCheckpoint(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::ReportCheckpointRequest* request,
      hlab::v1::ReportCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* Complete(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::CompleteRequest* request,
      hlab::v1::CompleteResponse* response) override;
  grpc::ServerUnaryReactor* Fail(grpc::CallbackServerContext* ctx,
                                 const hlab::v1::FailRequest* request,
                                 hlab::v1::FailResponse* response) override;
  grpc::ServerUnaryReactor* Deregister(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::DeregisterRequest* request,
      hlab::v1::DeregisterResponse* response) override;

  // One attempt at leasing (no waiting): OK with response->has_task() false
  // when nothing fits now. With `touch_worker` (the first try of a call)
  // it also records the worker as alive: NotFound if it is unregistered.
  absl::Status TryLease(const hlab::v1::LeaseRequest& request,
                        hlab::v1::LeaseResponse* response, bool touch_worker);

 private:
  absl::Status DoRegister(const hlab::v1::RegisterRequest& request,
                          hlab::v1::RegisterResponse* response);
  // Answers a heartbeat without a thread waiting for its commit: the
  // extension joins the store writer's queue, and once it is committed the
  // rest (the response's stops, the progress gauges) runs on the writer's
  // completer thread, or on the worker API's pool when a task's spec must
  // be read from the store first; then `finish` is called.
  void StartHeartbeat(const hlab::v1::HeartbeatRequest& request,
                      hlab::v1::HeartbeatResponse* response,
                      std::function<void(const absl::Status&)> finish);
  // Fills the response's stops and notes progress, given the store's
  // answer for each of the request's tasks. Without `read_store`, a task
  // whose spec is not cached gets no progress this time.
  void AnswerHeartbeat(const hlab::v1::HeartbeatRequest& request,
                       const std::vector<absl::Status>& extended,
                       bool read_store, hlab::v1::HeartbeatResponse* response);
  // Whether AnswerHeartbeat needs no read of the store.
  bool HeartbeatSpecsCached(const hlab::v1::HeartbeatRequest& request,
                            const std::vector<absl::Status>& extended) const;
  // The points of a ReportMetrics request as the store takes them (a
  // trunk's points go to each run they belong to; a point of another task
  // that names no run is the task's run, set in `run_id` if given).
  // InvalidArgument for a batch of more than 1000 points, NotFound for an
  // unknown task.
  absl::StatusOr<std::vector<store::MetricPoint>> PointsToStore(
      const hlab::v1::ReportMetricsRequest& request, std::string* run_id);
  // Maps the request, queues its points on the store's writer and returns;
  // `finish` runs with the call's status once they are committed (on the
  // writer's completer thread), or at once if the request is refused
  // before that.
  void StartReportMetrics(const hlab::v1::ReportMetricsRequest& request,
                          hlab::v1::ReportMetricsResponse* response,
                          std::function<void(const absl::Status&)> finish);
  absl::Status DoReportCheckpoint(
      const hlab::v1::ReportCheckpointRequest& request);
  absl::Status DoComplete(const hlab::v1::CompleteRequest& request);
  absl::Status DoFail(const hlab::v1::FailRequest& request,
                      hlab::v1::FailResponse* response);
  absl::Status DoDeregister(const hlab::v1::DeregisterRequest& request,
                            hlab::v1::DeregisterResponse* response);

  // Fails a task just leased (at `attempt`) whose task file cannot be
  // built, for good.
  absl::Status FailUnbuildable(const store::Task& task, int attempt,
                               const absl::Status& why, absl::Time now);
  // The task, checked to be leased by `worker_id` (when given) at
  // `attempt`: FailedPrecondition otherwise.
  absl::StatusOr<store::Task> HeldTask(const std::string& task_id,
                                       int64_t attempt,
                                       const std::string& worker_id);
  // Drops the per-run metric series of the task's runs that are finished.
  void ForgetFinishedRuns(const store::Task& task);

  ServiceContext* const context_;
  // Lease claims candidates here instead of querying the store each time.
  LeaseQueue lease_queue_;
  // ReportMetrics reads a task's kind and run here, not from the store.
  TaskSpecCache task_specs_;
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_WORKER_SERVICE_H_
