#include "worker/metrics.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace hlab::worker {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;

}  // namespace

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      running_(BuildGauge()
                   .Name("hlab_worker_tasks_running")
                   .Help("Tasks whose trainer processes are alive")
                   .Register(*registry_)
                   .Add({})),
      started_(BuildCounter()
                   .Name("hlab_worker_tasks_started_total")
                   .Help("Tasks started (leased and spawned)")
                   .Register(*registry_)
                   .Add({})),
      completed_(BuildCounter()
                     .Name("hlab_worker_tasks_completed_total")
                     .Help("Tasks reported complete")
                     .Register(*registry_)
                     .Add({})),
      failed_family_(BuildCounter()
                         .Name("hlab_worker_tasks_failed_total")
                         .Help("Tasks reported failed, by retryability")
                         .Register(*registry_)),
      failed_retryable_(failed_family_.Add({{"retryable", "true"}})),
      failed_permanent_(failed_family_.Add({{"retryable", "false"}})),
      stopped_(BuildCounter()
                   .Name("hlab_worker_tasks_stopped_total")
                   .Help("Tasks killed because the coordinator cancelled "
                         "them or their lease was lost")
                   .Register(*registry_)
                   .Add({})),
      watchdog_(BuildCounter()
                    .Name("hlab_worker_watchdog_stops_total")
                    .Help("Hung trainers or evaluators (no record for the "
                          "stall timeout) that the watchdog stopped")
                    .Register(*registry_)
                    .Add({})),
      restarts_(BuildCounter()
                    .Name("hlab_worker_trainer_restarts_total")
                    .Help("Tasks started again (attempt > 1), resuming from "
                          "their newest checkpoint")
                    .Register(*registry_)
                    .Add({})),
      report_errors_(BuildCounter()
                         .Name("hlab_worker_report_errors_total")
                         .Help("Failed RPCs to the coordinator, by method "
                               "(each is retried)")
                         .Register(*registry_)),
      points_(BuildCounter()
                  .Name("hlab_worker_metric_points_reported_total")
                  .Help("Metric points accepted by the coordinator")
                  .Register(*registry_)
                  .Add({})),
      connected_(BuildGauge()
                     .Name("hlab_worker_coordinator_connected")
                     .Help("1 when the last RPC reached the coordinator")
                     .Register(*registry_)
                     .Add({})) {}

WorkerMetrics::~WorkerMetrics() = default;

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Create(
    const std::string& listen) {
  std::unique_ptr<WorkerMetrics> m(new WorkerMetrics());
  if (listen.empty()) return m;
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(listen);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", listen, " (", e.what(),
        "); is the port in use? use --metrics-listen HOST:PORT or none"));
  }
  m->exposer_->RegisterCollectable(m->registry_, "/metrics");
  return m;
}

void WorkerMetrics::TaskStarted(int64_t attempt) {
  started_.Increment();
  if (attempt > 1) restarts_.Increment();
  running_.Increment();
}

void WorkerMetrics::TaskEnded() { running_.Decrement(); }

void WorkerMetrics::ReportError(const std::string& rpc) {
  report_errors_.Add({{"rpc", rpc}}).Increment();
}

}  // namespace hlab::worker
