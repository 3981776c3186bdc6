// SimulatedFleet: many simulated workers (no training) driving a real
// coordinator over gRPC, for hlab-bench-coordinator.
//
// Each simulated worker registers with one CPU device, then loops: Lease
// (long poll) until it holds a task, ReportMetrics a batch of points every
// `metrics_every`, Complete after `task_time`, Lease again; independently it
// heartbeats every `heartbeat` with its task's progress. The workers are
// state machines: one driver thread decides what each worker sends next and
// gRPC's callback API (a few channels, one stub each) carries the calls, so
// hundreds of workers fit on two cores. Every call's latency (send to
// response) is recorded; Lease only when the response carries a task.
//
// FloodMetrics then measures the coordinator's ingest capacity: batches of
// points against the tasks the workers still hold, `in_flight` calls at a
// time, as fast as the coordinator answers.
//
// Thread-safety: Register, Run, FloodMetrics and the accessors from one
// thread, one at a time.
//
//   SimulatedFleet fleet(coordinator->address(), FleetOptions{});
//   HLAB_RETURN_IF_ERROR(fleet.Register());
//   fleet.Run(absl::Seconds(30));
//   FleetStats stats = fleet.stats();
#ifndef HLAB_BENCH_COORDINATOR_FLEET_H_
#define HLAB_BENCH_COORDINATOR_FLEET_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hlab/v1/worker_service.grpc.pb.h"

namespace hlab::bench {

struct FleetOptions {
  int workers = 500;
  int channels = 8;  // HTTP/2 connections shared by the workers
  absl::Duration heartbeat = absl::Seconds(1);
  absl::Duration metrics_every = absl::Seconds(1);
  int batch = 100;  // points per ReportMetrics
  absl::Duration task_time = absl::Seconds(10);
  // Each task lasts task_time x U[1 - spread, 1 + spread] (0: exactly), so
  // that completions, and the leases after them, spread out over time.
  double task_time_spread = 0;
  int lease_wait_ms = 5000;
  // Calls that start within this long of Run's start (the workers' staggered
  // first leases) are counted apart, in FleetStats' startup_* figures.
  absl::Duration warmup = absl::ZeroDuration();
};

struct FleetStats {
  // Latencies of calls started after the warmup.
  std::vector<double> lease_seconds;  // leases that returned a task
  std::vector<double> heartbeat_seconds;
  std::vector<double> metrics_seconds;
  // The same, of calls started within the warmup.
  std::vector<double> startup_lease_seconds;
  std::vector<double> startup_heartbeat_seconds;
  std::vector<double> startup_metrics_seconds;
  // Heartbeats answered later than the heartbeat interval (the next one was
  // due before this one's answer came), over the whole run.
  int64_t heartbeats_late = 0;
  // Heartbeats the workers should have sent in the run: one per interval
  // from each worker's first action to the run's end.
  int64_t heartbeats_due = 0;
  int64_t empty_leases = 0;  // long polls that ended without a task
  int64_t completed = 0;
  int64_t points_sent = 0;
  int64_t points_accepted = 0;
  // Tasks a heartbeat told a worker to stop while it held them and was
  // not completing them: leases lost (the coordinator let them expire).
  int64_t stops = 0;
  int64_t errors = 0;
  std::string first_error;
  double seconds = 0;  // length of the run
};

struct FloodResult {
  int64_t points_sent = 0;
  int64_t points_accepted = 0;
  int64_t batches = 0;
  int tasks = 0;  // held tasks the points went to
  double seconds = 0;
  std::vector<double> call_seconds;
  std::vector<std::string> run_ids;  // one per task
};

class SimulatedFleet {
 public:
  SimulatedFleet(const std::string& target, FleetOptions options);
  ~SimulatedFleet();

  // Registers every worker (synchronously). The first error as returned.
  absl::Status Register();

  // Drives the workers for `duration`, then waits for calls in flight
  // (long polls end within lease_wait_ms). Workers keep the tasks they hold.
  void Run(absl::Duration duration);

  // `points` metric points in batches of options.batch against the tasks
  // the workers hold, `in_flight` calls at a time. FailedPrecondition when
  // no worker holds a task.
  absl::StatusOr<FloodResult> FloodMetrics(int64_t points, int in_flight);

  FleetStats stats();

 private:
  struct Worker;
  template <typename Request, typename Response>
  struct Call;

  void Tick(Worker& worker, absl::Time now);
  void SendLease(Worker& worker);
  void SendHeartbeat(Worker& worker);
  void SendMetrics(Worker& worker);
  void SendComplete(Worker& worker);
  void SendFloodBatch(int64_t batch);
  void NoteError(const grpc::Status& status);
  void WaitIdle();

  FleetOptions options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<hlab::v1::WorkerService::Stub>> stubs_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<int64_t> in_flight_{0};
  // Calls started before this count as start-up (set by Run).
  std::chrono::steady_clock::time_point measure_from_;

  // FloodMetrics state: set before the first batch, read by callbacks.
  struct FloodTask {
    std::string task_id, run_id, worker_id;
    int64_t attempt = 0;
    int64_t first_step = 0;
    hlab::v1::WorkerService::Stub* stub = nullptr;
  };
  std::vector<FloodTask> flood_tasks_;
  std::atomic<int64_t> flood_next_{0};
  int64_t flood_batches_ = 0;

  absl::Mutex mu_;
  FleetStats stats_ ABSL_GUARDED_BY(mu_);
  FloodResult flood_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hlab::bench

#endif  // HLAB_BENCH_COORDINATOR_FLEET_H_
