// WorkerMetrics: the worker daemon's Prometheus metrics, hlab_worker_* in
// base units, optionally served on their own HTTP endpoint (/metrics).
//
//   hlab_worker_tasks_running                  gauge: trainer tasks alive now
//   hlab_worker_tasks_started_total            counter
//   hlab_worker_tasks_completed_total          counter: reported Complete
//   hlab_worker_tasks_failed_total{retryable}  counter: "true" | "false"
//   hlab_worker_tasks_stopped_total            counter: cancelled / lease lost
//   hlab_worker_watchdog_stops_total           counter: hung trainers the
//                                              watchdog stopped
//   hlab_worker_trainer_restarts_total         counter: tasks started again
//                                              (attempt > 1): resumes
//   hlab_worker_report_errors_total{rpc}       counter: failed RPCs (retried)
//   hlab_worker_metric_points_reported_total   counter
//   hlab_worker_coordinator_connected          gauge: 1 when the last RPC
//                                              reached the coordinator
//
// Thread-safe: prometheus-cpp metrics are atomic; the daemon updates them
// from any thread.
//
//   auto metrics = WorkerMetrics::Create("127.0.0.1:9152");  // or "" : none
//   if (!metrics.ok()) return metrics.status();               // port in use
//   (*metrics)->TaskStarted(attempt);
#ifndef HLAB_WORKER_METRICS_H_
#define HLAB_WORKER_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}

namespace hlab::worker {

class WorkerMetrics {
 public:
  // Serves /metrics on `listen` ("host:port"); empty: no endpoint (the
  // metrics are still counted, e.g. for tests). Unavailable when the port
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Create(
      const std::string& listen);
  ~WorkerMetrics();

  void TaskStarted(int64_t attempt);
  void TaskEnded();  // the trainer(s) of a task exited
  void TaskCompleted() { completed_.Increment(); }
  void TaskFailed(bool retryable) {
    (retryable ? failed_retryable_ : failed_permanent_).Increment();
  }
  void TaskStopped() { stopped_.Increment(); }
  void WatchdogStopped() { watchdog_.Increment(); }
  void ReportError(const std::string& rpc);
  void PointsReported(size_t n) { points_.Increment(static_cast<double>(n)); }
  void SetConnected(bool connected) { connected_.Set(connected ? 1 : 0); }
  double connected() const { return connected_.Value(); }

  // The registry, for tests and for an embedding exposer.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // Current values, for tests.
  double running() const { return running_.Value(); }
  double completed() const { return completed_.Value(); }
  double watchdog_stops() const { return watchdog_.Value(); }
  double failed(bool retryable) const {
    return (retryable ? failed_retryable_ : failed_permanent_).Value();
  }

 private:
  WorkerMetrics();

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Gauge& running_;
  prometheus::Counter& started_;
  prometheus::Counter& completed_;
  prometheus::Family<prometheus::Counter>& failed_family_;
  prometheus::Counter& failed_retryable_;
  prometheus::Counter& failed_permanent_;
  prometheus::Counter& stopped_;
  prometheus::Counter& watchdog_;
  prometheus::Counter& restarts_;
  prometheus::Family<prometheus::Counter>& report_errors_;
  prometheus::Counter& points_;
  prometheus::Gauge& connected_;
};

}  // namespace hlab::worker

#endif  // HLAB_WORKER_METRICS_H_
