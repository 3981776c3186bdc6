#include "coordinator/server/metrics.h"

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hlab::coordinator {

CoordinatorMetrics::CoordinatorMetrics()
    : registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  runs_family_ = &BuildGauge()
                      .Name("hlab_runs")
                      .Help("Runs per state")
                      .Register(*registry_);
  tasks_family_ = &BuildGauge()
                       .Name("hlab_tasks")
                       .Help("Tasks per state")
                       .Register(*registry_);
  workers_ = &BuildGauge()
                  .Name("hlab_workers_connected")
                  .Help("Workers that are up (heartbeating)")
                  .Register(*registry_)
                  .Add({});
  workers_draining_ =
      &BuildGauge()
           .Name("hlab_workers_draining")
           .Help("Workers up but drained (hlab drain): leased nothing new")
           .Register(*registry_)
           .Add({});
  lease_expirations_ = &BuildCounter()
                            .Name("hlab_lease_expirations_total")
                            .Help("Task leases that expired without heartbeat")
                            .Register(*registry_)
                            .Add({});
  retries_ = &BuildCounter()
                  .Name("hlab_retries_total")
                  .Help("Task attempts requeued after a failure or expiry")
                  .Register(*registry_)
                  .Add({});
  infra_retries_ =
      &BuildCounter()
           .Name("hlab_infra_retries_total")
           .Help(
               "Task attempts requeued after an infrastructure fault (lease"
               " expired, worker gone, trainer killed from outside); these"
               " spend no retry budget")
           .Register(*registry_)
           .Add({});
  metric_points_ = &BuildCounter()
                        .Name("hlab_metric_points_ingested_total")
                        .Help("Metric points received from workers")
                        .Register(*registry_)
                        .Add({});
  commit_latency_ =
      &BuildHistogram()
           .Name("hlab_db_commit_latency_seconds")
           .Help("Wall time of one store commit (group of writes)")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{
                        0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
                        0.5, 1, 2, 5});
  store_write_failures_ =
      &BuildCounter()
           .Name("hlab_store_write_failures_total")
           .Help(
               "Store transactions refused by the storage (disk full, "
               "read-only, I/O error); the writes got UNAVAILABLE")
           .Register(*registry_)
           .Add({});
  store_writable_ =
      &BuildGauge()
           .Name("hlab_store_writable")
           .Help(
               "1 while the store's database can be written; 0 from a write "
               "refused by the storage until a write succeeds again")
           .Register(*registry_)
           .Add({});
  store_writable_->Set(1);
  run_tps_family_ = &BuildGauge()
                         .Name("hlab_run_tokens_per_second")
                         .Help("Training throughput of an active run")
                         .Register(*registry_);
  run_loss_family_ = &BuildGauge()
                          .Name("hlab_run_loss")
                          .Help("Latest training loss of an active run")
                          .Register(*registry_);
  run_progress_family_ =
      &BuildGauge()
           .Name("hlab_run_progress_ratio")
           .Help(
               "Tokens of its own budget trained / budget of an active run "
               "(on a shared trunk: up to its branch point)")
           .Register(*registry_);
  tokens_trained_ =
      &BuildCounter()
           .Name("hlab_tokens_trained_total")
           .Help(
               "Training progress in tokens, each task's position counted "
               "once")
           .Register(*registry_)
           .Add({});
  rpcs_family_ = &BuildCounter()
                      .Name("hlab_grpc_server_handled_total")
                      .Help("gRPC calls finished, by method and status code")
                      .Register(*registry_);
  sweep_runs_family_ = &BuildGauge()
                            .Name("hlab_sweep_runs")
                            .Help("Runs per state of an unfinished sweep")
                            .Register(*registry_);
  sweep_phases_family_ =
      &BuildGauge()
           .Name("hlab_sweep_run_phases")
           .Help(
               "Pending and running runs of an unfinished sweep by phase: "
               "WAITING, TRUNK (its shared trunk trains), TRAINING, DECAYING, "
               "EVALUATING")
           .Register(*registry_);
  sweep_tokens_family_ =
      &BuildGauge()
           .Name("hlab_sweep_tokens_trained")
           .Help("Tokens trained so far by the runs of an unfinished sweep")
           .Register(*registry_);
  sweep_budget_family_ =
      &BuildGauge()
           .Name("hlab_sweep_tokens_budget")
           .Help("Tokens planned for the runs of an unfinished sweep")
           .Register(*registry_);
  predicted_family_ =
      &BuildGauge()
           .Name("hlab_run_predicted_target")
           .Help(
               "Live prediction of a pending or running run's final target "
               "(loss, longppl = log LongPPL) by its sweep's newest law: "
               "bound mid, and lo and hi of the 95% interval; never a "
               "measurement")
           .Register(*registry_);
  generation_family_ =
      &BuildGauge()
           .Name("hlab_sweep_prediction_generation")
           .Help(
               "Newest generation (refit) of an unfinished sweep's live "
               "predictions")
           .Register(*registry_);
}

void CoordinatorMetrics::ObserveTaskTokens(const std::string& task_id,
                                           int64_t low, int64_t high) {
  if (low <= 0 || high < low) return;
  absl::MutexLock lock(&mu_);
  auto [it, is_new] = task_tokens_.emplace(task_id, std::make_pair(low, high));
  auto& [seen_low, seen_high] = it->second;
  const int64_t before = is_new ? 0 : seen_high - seen_low;
  seen_low = std::min(seen_low, low);
  seen_high = std::max(seen_high, high);
  const int64_t after = seen_high - seen_low;
  if (after > before) {
    tokens_trained_->Increment(static_cast<double>(after - before));
  }
}

void CoordinatorMetrics::RpcHandled(const std::string& method,
                                    const std::string& code) {
  absl::MutexLock lock(&mu_);
  auto key = std::make_pair(method, code);
  auto it = rpcs_.find(key);
  if (it == rpcs_.end()) {
    it = rpcs_
             .emplace(key,
                      &rpcs_family_->Add({{"method", method}, {"code", code}}))
             .first;
  }
  it->second->Increment();
}

namespace {

// Sets the series of `labels` in `family` (adding it if new) and marks it
// kept; series of `series` not kept are removed by DropUnkept.
void SetSeries(prometheus::Family<prometheus::Gauge>* family,
               std::map<prometheus::Labels, prometheus::Gauge*>* series,
               std::set<prometheus::Labels>* kept,
               const prometheus::Labels& labels, double value) {
  auto it = series->find(labels);
  if (it == series->end()) {
    it = series->emplace(labels, &family->Add(labels)).first;
  }
  it->second->Set(value);
  kept->insert(labels);
}

void DropUnkept(prometheus::Family<prometheus::Gauge>* family,
                std::map<prometheus::Labels, prometheus::Gauge*>* series,
                const std::set<prometheus::Labels>& kept) {
  for (auto it = series->begin(); it != series->end();) {
    if (kept.count(it->first) != 0) {
      ++it;
      continue;
    }
    family->Remove(it->second);
    it = series->erase(it);
  }
}

}  // namespace

void CoordinatorMetrics::SetSweepProgress(
    const std::vector<SweepProgress>& sweeps) {
  absl::MutexLock lock(&mu_);
  std::set<prometheus::Labels> kept;
  for (const SweepProgress& sweep : sweeps) {
    const prometheus::Labels labels{{"sweep_id", absl::StrCat(sweep.sweep_id)},
                                    {"sweep", sweep.name}};
    for (const char* state : {"PENDING", "RUNNING", "SUCCEEDED", "FAILED",
                              "CANCELLED", "PREDICTED"}) {
      prometheus::Labels with_state = labels;
      with_state["state"] = state;
      auto found = sweep.runs_by_state.find(state);
      SetSeries(sweep_runs_family_, &sweep_runs_, &kept, with_state,
                found == sweep.runs_by_state.end()
                    ? 0.0
                    : static_cast<double>(found->second));
    }
    for (const char* phase :
         {"WAITING", "TRUNK", "TRAINING", "DECAYING", "EVALUATING"}) {
      prometheus::Labels with_phase = labels;
      with_phase["phase"] = phase;
      auto found = sweep.runs_by_phase.find(phase);
      SetSeries(sweep_phases_family_, &sweep_phases_, &kept, with_phase,
                found == sweep.runs_by_phase.end()
                    ? 0.0
                    : static_cast<double>(found->second));
    }
    SetSeries(sweep_tokens_family_, &sweep_tokens_, &kept, labels,
              static_cast<double>(sweep.tokens_trained));
    SetSeries(sweep_budget_family_, &sweep_budget_, &kept, labels,
              static_cast<double>(sweep.tokens_budget));
  }
  DropUnkept(sweep_runs_family_, &sweep_runs_, kept);
  DropUnkept(sweep_phases_family_, &sweep_phases_, kept);
  DropUnkept(sweep_tokens_family_, &sweep_tokens_, kept);
  DropUnkept(sweep_budget_family_, &sweep_budget_, kept);
}

void CoordinatorMetrics::SetRunPredictions(
    const std::vector<RunPrediction>& predictions) {
  absl::MutexLock lock(&mu_);
  std::set<prometheus::Labels> kept, kept_generations;
  for (const RunPrediction& p : predictions) {
    const prometheus::Labels sweep{{"sweep_id", absl::StrCat(p.sweep_id)},
                                   {"sweep", p.sweep}};
    SetSeries(generation_family_, &generations_, &kept_generations, sweep,
              static_cast<double>(p.generation));
    prometheus::Labels labels = sweep;
    labels["run"] = p.run_id;
    labels["target"] = p.target;
    for (const auto& [bound, value] :
         {std::make_pair("mid", std::optional<double>(p.predicted)),
          std::make_pair("lo", p.lower), std::make_pair("hi", p.upper)}) {
      if (!value) continue;
      labels["bound"] = bound;
      SetSeries(predicted_family_, &predicted_, &kept, labels, *value);
    }
  }
  DropUnkept(predicted_family_, &predicted_, kept);
  DropUnkept(generation_family_, &generations_, kept_generations);
}

CoordinatorMetrics::~CoordinatorMetrics() { exposer_.reset(); }

absl::Status CoordinatorMetrics::Serve(const std::string& address) {
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", address, ": ", e.what(),
        " (address in use? pass --metrics-listen HOST:PORT or none)"));
  }
  exposer_->RegisterCollectable(registry_, "/metrics");
  return absl::OkStatus();
}

int CoordinatorMetrics::port() const {
  if (!exposer_) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports[0];
}

void CoordinatorMetrics::SetStateCounts(
    const std::map<std::string, int64_t>& runs,
    const std::map<std::string, int64_t>& tasks) {
  absl::MutexLock lock(&mu_);
  for (auto [family, counts, prefix] :
       {std::make_tuple(runs_family_, &runs, "run:"),
        std::make_tuple(tasks_family_, &tasks, "task:")}) {
    for (const auto& [state, n] : *counts) {
      const std::string key = absl::StrCat(prefix, state);
      auto it = state_gauges_.find(key);
      if (it == state_gauges_.end()) {
        it = state_gauges_.emplace(key, &family->Add({{"state", state}})).first;
      }
      it->second->Set(static_cast<double>(n));
    }
  }
}

void CoordinatorMetrics::SetRunProgress(const std::string& run_id,
                                        double tokens_per_second, double loss,
                                        double progress_ratio) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) {
    const prometheus::Labels labels{{"run", run_id}};
    RunSeries series{&run_tps_family_->Add(labels),
                     &run_loss_family_->Add(labels),
                     &run_progress_family_->Add(labels)};
    it = runs_.emplace(run_id, series).first;
  }
  if (tokens_per_second >= 0)
    it->second.tokens_per_second->Set(tokens_per_second);
  if (loss >= 0) it->second.loss->Set(loss);
  if (progress_ratio >= 0) it->second.progress->Set(progress_ratio);
}

void CoordinatorMetrics::RemoveRunLocked(const std::string& run_id) {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  run_tps_family_->Remove(it->second.tokens_per_second);
  run_loss_family_->Remove(it->second.loss);
  run_progress_family_->Remove(it->second.progress);
  runs_.erase(it);
}

void CoordinatorMetrics::RemoveRun(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  RemoveRunLocked(run_id);
}

void CoordinatorMetrics::RetainRuns(const std::set<std::string>& active) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> gone;
  for (const auto& [run, series] : runs_) {
    if (active.count(run) == 0) gone.push_back(run);
  }
  for (const std::string& run : gone) RemoveRunLocked(run);
}

}  // namespace hlab::coordinator
