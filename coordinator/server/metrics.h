// CoordinatorMetrics: the coordinator's Prometheus metrics (names hlab_*,
// base units), served by a prometheus-cpp Exposer on its own port.
//
//   hlab_runs{state}                      gauge, runs per state
//   hlab_tasks{state}                     gauge, tasks per state
//   hlab_workers_connected                gauge, workers UP
//   hlab_workers_draining                 gauge, of those the drained ones
//                                         (`hlab drain`)
//   hlab_lease_expirations_total          counter
//   hlab_retries_total                    counter, requeued failures+expiries
//   hlab_infra_retries_total              counter, of those the requeues
//                                         after infrastructure faults
//   hlab_metric_points_ingested_total     counter, points received
//   hlab_db_commit_latency_seconds        histogram, store commits
//   hlab_store_write_failures_total       counter, store transactions the
//                                         storage refused (disk full,
//                                         read-only, I/O error)
//   hlab_store_writable                   gauge, 1 while the database can be
//                                         written, 0 from such a refusal
//                                         until a write succeeds again
//   hlab_run_tokens_per_second{run}       gauge, active runs only
//   hlab_run_loss{run}                    gauge, active runs only
//   hlab_run_progress_ratio{run}          gauge, tokens of its own budget
//                                         done / budget
//   hlab_tokens_trained_total             counter, training progress in
//                                         tokens (each task's span once)
//   hlab_sweep_runs{sweep_id,sweep,state} gauge, runs of unfinished sweeps
//   hlab_sweep_run_phases{sweep_id,sweep,phase}  gauge, their pending and
//                                         running runs by phase
//   hlab_sweep_tokens_trained{sweep_id,sweep}  gauge, tokens trained so far
//   hlab_sweep_tokens_budget{sweep_id,sweep}   gauge, tokens planned
//   hlab_run_predicted_target{sweep_id,sweep,run,target,bound}  gauge,
//                                         live predictions of pending and
//                                         running runs (bound: mid, lo, hi)
//   hlab_sweep_prediction_generation{sweep_id,sweep}  gauge, the newest
//                                         generation of those
//   hlab_grpc_server_handled_total{method,code} counter, finished RPCs
// A run is active while it has a phase of its own: its shared trunk trains,
// or its TRAIN, DECAY or EVAL task runs (store RunPhase). Per-run series
// are removed when the run stops being active, per-sweep
// series when the sweep has no pending or running run left; a run's
// predicted series when it ends (so their number is bounded by the
// unfinished runs: at most 3 per run and target).
//
// Thread-safety: thread-safe (prometheus-cpp metrics are atomic; the per-run
// series map is under a mutex).
//
//   CoordinatorMetrics metrics;
//   metrics.lease_expirations().Increment();
//   HLAB_RETURN_IF_ERROR(metrics.Serve("127.0.0.1:0"));
//   int port = metrics.port();
#ifndef HLAB_COORDINATOR_SERVER_METRICS_H_
#define HLAB_COORDINATOR_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace hlab::coordinator {

class CoordinatorMetrics {
 public:
  CoordinatorMetrics();
  ~CoordinatorMetrics();
  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // Starts serving /metrics on `address` ("host:port", port 0 picks one).
  // Unavailable with a one-line reason if it cannot listen.
  absl::Status Serve(const std::string& address);
  // The port served on (0 before Serve).
  int port() const;

  // Sets hlab_runs / hlab_tasks from store::StateCounts maps.
  void SetStateCounts(const std::map<std::string, int64_t>& runs,
                      const std::map<std::string, int64_t>& tasks);
  void SetWorkersConnected(int64_t up, int64_t draining) {
    workers_->Set(static_cast<double>(up));
    workers_draining_->Set(static_cast<double>(draining));
  }
  prometheus::Counter& lease_expirations() { return *lease_expirations_; }
  prometheus::Counter& retries() { return *retries_; }
  prometheus::Counter& infra_retries() { return *infra_retries_; }
  // One requeued attempt: hlab_retries_total, and hlab_infra_retries_total
  // too for an infrastructure fault.
  void CountRetry(bool infrastructure) {
    retries_->Increment();
    if (infrastructure) infra_retries_->Increment();
  }
  prometheus::Counter& metric_points() { return *metric_points_; }
  void ObserveCommit(double seconds) { commit_latency_->Observe(seconds); }
  // The store's writer refused a transaction for the storage (false:
  // hlab_store_write_failures_total + 1, hlab_store_writable 0) or wrote
  // again after that (true: hlab_store_writable 1). WriterOptions::on_storage.
  void ObserveStoreWritable(bool writable) {
    if (!writable) store_write_failures_->Increment();
    store_writable_->Set(writable ? 1 : 0);
  }
  double store_write_failures() const { return store_write_failures_->Value(); }
  double store_writable() const { return store_writable_->Value(); }

  // Training progress of a task: it was seen at token positions `low` to
  // `high` (a heartbeat: one position; a metric report: its first and last
  // point). hlab_tokens_trained_total counts the span of positions seen
  // per task, so it grows as the task trains, a retry that goes over the
  // same tokens again adds nothing, and a DECAY task that starts at its
  // branch point (0.9 D) adds only what it trains itself. A task's first
  // step before its first report is not counted.
  void ObserveTaskTokens(const std::string& task_id, int64_t low, int64_t high);
  double tokens_trained() const { return tokens_trained_->Value(); }

  // One finished RPC (the gRPC interceptor of grpc_metrics.h calls it).
  // `method` is the full name ("/hlab.v1.WorkerService/Heartbeat"), `code`
  // the status code's name ("OK", "UNAVAILABLE").
  void RpcHandled(const std::string& method, const std::string& code);

  struct SweepProgress {
    int64_t sweep_id = 0;
    std::string name;
    std::map<std::string, int64_t> runs_by_state;
    // "WAITING", "TRUNK", "TRAINING", "DECAYING", "EVALUATING" (end
    // phases are not shown: runs_by_state has them).
    std::map<std::string, int64_t> runs_by_phase;
    int64_t tokens_trained = 0;
    int64_t tokens_budget = 0;
  };
  // Replaces the per-sweep series with `sweeps` (the unfinished sweeps).
  void SetSweepProgress(const std::vector<SweepProgress>& sweeps);

  // One live prediction (docs/coordinator.md, "Live predictions").
  struct RunPrediction {
    int64_t sweep_id = 0;
    std::string sweep;
    int64_t generation = 0;
    std::string run_id;
    std::string target;  // "loss", "longppl"
    double predicted = 0;
    std::optional<double> lower, upper;  // absent: open side, no series
  };
  // Replaces the predicted series with `predictions` (those of pending and
  // running runs, from each sweep's newest generation).
  void SetRunPredictions(const std::vector<RunPrediction>& predictions);

  // Progress of an active run; a value < 0 leaves that series unchanged.
  void SetRunProgress(const std::string& run_id, double tokens_per_second,
                      double loss, double progress_ratio);
  // Drops the series of every run not in `active`.
  void RetainRuns(const std::set<std::string>& active);
  void RemoveRun(const std::string& run_id);

  std::shared_ptr<prometheus::Registry> registry() { return registry_; }

 private:
  struct RunSeries {
    prometheus::Gauge* tokens_per_second;
    prometheus::Gauge* loss;
    prometheus::Gauge* progress;
  };
  void RemoveRunLocked(const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* runs_family_;
  prometheus::Family<prometheus::Gauge>* tasks_family_;
  prometheus::Gauge* workers_;
  prometheus::Gauge* workers_draining_;
  prometheus::Counter* lease_expirations_;
  prometheus::Counter* retries_;
  prometheus::Counter* infra_retries_;
  prometheus::Counter* metric_points_;
  prometheus::Histogram* commit_latency_;
  prometheus::Counter* store_write_failures_;
  prometheus::Gauge* store_writable_;
  prometheus::Family<prometheus::Gauge>* run_tps_family_;
  prometheus::Family<prometheus::Gauge>* run_loss_family_;
  prometheus::Family<prometheus::Gauge>* run_progress_family_;
  prometheus::Counter* tokens_trained_;
  prometheus::Family<prometheus::Counter>* rpcs_family_;
  prometheus::Family<prometheus::Gauge>* sweep_runs_family_;
  prometheus::Family<prometheus::Gauge>* sweep_phases_family_;
  prometheus::Family<prometheus::Gauge>* sweep_tokens_family_;
  prometheus::Family<prometheus::Gauge>* sweep_budget_family_;
  prometheus::Family<prometheus::Gauge>* predicted_family_;
  prometheus::Family<prometheus::Gauge>* generation_family_;
  std::unique_ptr<prometheus::Exposer> exposer_;

  absl::Mutex mu_;
  // Lowest and highest token position seen per task.
  std::map<std::string, std::pair<int64_t, int64_t>> task_tokens_
      ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, prometheus::Counter*> rpcs_
      ABSL_GUARDED_BY(mu_);
  // Per-sweep series by their labels (sweep_id, sweep[, state]).
  std::map<prometheus::Labels, prometheus::Gauge*> sweep_runs_
      ABSL_GUARDED_BY(mu_);
  std::map<prometheus::Labels, prometheus::Gauge*> sweep_phases_
      ABSL_GUARDED_BY(mu_);
  std::map<prometheus::Labels, prometheus::Gauge*> sweep_tokens_
      ABSL_GUARDED_BY(mu_);
  std::map<prometheus::Labels, prometheus::Gauge*> sweep_budget_
      ABSL_GUARDED_BY(mu_);
  std::map<prometheus::Labels, prometheus::Gauge*> predicted_
      ABSL_GUARDED_BY(mu_);
  std::map<prometheus::Labels, prometheus::Gauge*> generations_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, prometheus::Gauge*> state_gauges_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, RunSeries> runs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_METRICS_H_
