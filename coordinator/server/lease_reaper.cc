#include "coordinator/server/lease_reaper.h"

#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/planning/proto_mapping.h"

namespace hlab::coordinator {

void LeaseReaper::Start() {
  thread_.Start(interval_, [this] {
    absl::Status status = Tick();
    if (!status.ok()) {
      HLAB_LOG(WARNING) << "housekeeping: " << status;
    }
  });
}

void LeaseReaper::Stop() { thread_.Stop(); }

absl::Status LeaseReaper::Tick() {
  absl::MutexLock tick_lock(&tick_mu_);
  store::Store& store = *context_->store;
  const absl::Time now = context_->clock();
  absl::Status first;
  auto note = [&first](const absl::Status& s) {
    if (first.ok() && !s.ok()) first = s;
  };

  const int64_t storage_failures = store.writer_stats().storage_failures;
  if (storage_failures != storage_failures_seen_) {
    if (now >= expiry_paused_until_) {
      HLAB_LOG(WARNING) << "housekeeping: the store refuses writes; no lease "
                           "expires and no worker is marked lost until a "
                           "lease time after the last refusal";
    }
    storage_failures_seen_ = storage_failures;
    expiry_paused_until_ = now + context_->lease;
  }
  if (now >= expiry_paused_until_) note(ExpireAndMarkLost(now));

  if (context_->metrics != nullptr) {
    absl::StatusOr<store::StateCounts> counts = store.CountsByState();
    note(counts.status());
    if (counts.ok()) {
      context_->metrics->SetStateCounts(counts->runs, counts->tasks);
    }
    absl::StatusOr<std::vector<store::WorkerInfo>> workers =
        store.ListWorkers();
    note(workers.status());
    if (workers.ok()) {
      int64_t up = 0, draining = 0;
      for (const auto& w : *workers) {
        up += w.state == store::WorkerState::kUp;
        draining += w.state == store::WorkerState::kUp && w.draining;
      }
      context_->metrics->SetWorkersConnected(up, draining);
    }
    note(RefreshRunGauges());
    if (context_->query != nullptr) {
      note(RefreshSweepGauges());
      note(RefreshPredictionGauges());
    }
  }
  return first;
}

absl::Status LeaseReaper::ExpireAndMarkLost(absl::Time now) {
  store::Store& store = *context_->store;
  absl::Status first;
  auto note = [&first](const absl::Status& s) {
    if (first.ok() && !s.ok()) first = s;
  };
  absl::StatusOr<std::vector<store::ExpiredLease>> expired =
      store.ExpireLeases(now, context_->expiry_backoff);
  note(expired.status());
  if (expired.ok()) {
    for (const store::ExpiredLease& e : *expired) {
      HLAB_LOG(WARNING) << "lease of " << e.task_id << " attempt " << e.attempt
                        << " (worker " << e.worker_id << ") expired; "
                        << (e.requeued ? "requeued" : "out of attempts");
      if (context_->metrics == nullptr) continue;
      context_->metrics->lease_expirations().Increment();
      if (e.requeued) context_->metrics->CountRetry(/*infrastructure=*/true);
    }
  }

  absl::StatusOr<std::vector<std::string>> lost =
      store.MarkLostWorkers(now, context_->lease);
  note(lost.status());
  if (lost.ok()) {
    for (const std::string& id : *lost) {
      HLAB_LOG(WARNING) << "worker " << id << " lost (no heartbeat for "
                        << context_->lease << ")";
      store::Event event;
      event.kind = "worker_lost";
      event.message = id;
      event.time = now;
      note(store.AppendEvent(event).status());
    }
  }
  return first;
}

// The per-run series: the runs with a phase of their own (on a trunk,
// training, decaying, evaluating), with the store's progress of each, the
// figures `hlab watch` and `hlab status` show; the others' are dropped.
absl::Status LeaseReaper::RefreshRunGauges() {
  store::RunFilter filter;
  filter.phases = {store::RunPhase::kTrunk, store::RunPhase::kTraining,
                   store::RunPhase::kDecaying, store::RunPhase::kEvaluating};
  absl::StatusOr<std::vector<store::Run>> runs =
      context_->store->ListRuns(filter);
  if (!runs.ok()) return runs.status();
  std::set<std::string> active;
  for (const store::Run& run : *runs) {
    active.insert(run.spec.id);
    const double budget = static_cast<double>(run.spec.budget_tokens);
    context_->metrics->SetRunProgress(
        run.spec.id, -1, run.progress.loss.value_or(-1),
        budget > 0 ? static_cast<double>(run.progress.tokens) / budget : -1);
  }
  context_->metrics->RetainRuns(active);
  return absl::OkStatus();
}

// Runs per state and phase, tokens trained (each run's own progress, as
// the store keeps it) and tokens planned, per sweep that still has a
// pending or running run.
constexpr char kSweepProgressSql[] = R"sql(
SELECT s.id, s.name, r.state, r.phase, count(*), sum(r.tokens_done),
  sum(r.budget_tokens)
FROM sweeps s JOIN sweep_runs sr ON sr.sweep_id = s.id
  JOIN runs r ON r.id = sr.run_id
WHERE s.id IN (SELECT sr2.sweep_id FROM sweep_runs sr2
  JOIN runs r2 ON r2.id = sr2.run_id
  WHERE r2.state IN ('PENDING', 'RUNNING'))
GROUP BY s.id, r.state, r.phase ORDER BY s.id
)sql";

absl::Status LeaseReaper::RefreshSweepGauges() {
  store::QueryOptions options;
  options.time_limit = absl::Seconds(2);
  options.max_rows = 100000;
  absl::StatusOr<store::QueryResult> result =
      context_->query->Run(kSweepProgressSql, options);
  if (!result.ok()) return result.status();
  auto integer = [](const store::Value& v) -> int64_t {
    if (const int64_t* i = std::get_if<int64_t>(&v)) return *i;
    if (const double* d = std::get_if<double>(&v)) {
      return static_cast<int64_t>(*d);
    }
    return 0;
  };
  std::vector<CoordinatorMetrics::SweepProgress> sweeps;
  for (const std::vector<store::Value>& row : result->rows) {
    const int64_t id = integer(row[0]);
    if (sweeps.empty() || sweeps.back().sweep_id != id) {
      sweeps.emplace_back();
      sweeps.back().sweep_id = id;
      sweeps.back().name = store::ValueToString(row[1]);
    }
    CoordinatorMetrics::SweepProgress& sweep = sweeps.back();
    sweep.runs_by_state[store::ValueToString(row[2])] += integer(row[4]);
    sweep.runs_by_phase[store::ValueToString(row[3])] += integer(row[4]);
    sweep.tokens_trained += integer(row[5]);
    sweep.tokens_budget += integer(row[6]);
  }
  context_->metrics->SetSweepProgress(sweeps);
  return absl::OkStatus();
}

// The live predictions of pending and running runs, from each sweep's
// newest generation (docs/coordinator.md, "Live predictions").
constexpr char kPredictionsSql[] = R"sql(
SELECT p.sweep_id, s.name, p.generation, p.run_id, p.target, p.predicted,
  p.lower, p.upper
FROM predictions p JOIN runs r ON r.id = p.run_id
  JOIN sweeps s ON s.id = p.sweep_id
WHERE r.state IN ('PENDING', 'RUNNING')
  AND p.generation = (SELECT max(g.generation) FROM prediction_generations g
    WHERE g.sweep_id = p.sweep_id)
ORDER BY p.sweep_id, p.run_id, p.target
)sql";

absl::Status LeaseReaper::RefreshPredictionGauges() {
  store::QueryOptions options;
  options.time_limit = absl::Seconds(2);
  options.max_rows = 100000;
  absl::StatusOr<store::QueryResult> result =
      context_->query->Run(kPredictionsSql, options);
  if (!result.ok()) return result.status();
  auto number = [](const store::Value& v) -> std::optional<double> {
    if (const double* d = std::get_if<double>(&v)) return *d;
    if (const int64_t* i = std::get_if<int64_t>(&v)) {
      return static_cast<double>(*i);
    }
    return std::nullopt;
  };
  std::vector<CoordinatorMetrics::RunPrediction> predictions;
  for (const std::vector<store::Value>& row : result->rows) {
    CoordinatorMetrics::RunPrediction p;
    p.sweep_id = static_cast<int64_t>(number(row[0]).value_or(0));
    p.sweep = store::ValueToString(row[1]);
    p.generation = static_cast<int64_t>(number(row[2]).value_or(0));
    p.run_id = store::ValueToString(row[3]);
    p.target = store::ValueToString(row[4]);
    const std::optional<double> predicted = number(row[5]);
    if (!predicted) continue;
    p.predicted = *predicted;
    p.lower = number(row[6]);
    p.upper = number(row[7]);
    predictions.push_back(std::move(p));
  }
  context_->metrics->SetRunPredictions(predictions);
  return absl::OkStatus();
}

}  // namespace hlab::coordinator
