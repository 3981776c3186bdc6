#include "coordinator/planning/sweep_catalog.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/planning/proto_mapping.h"
#include "coordinator/sweep/spec_parser.h"

namespace hlab::coordinator {

absl::StatusOr<std::shared_ptr<const sweep::SweepPlan>> SweepCatalog::Plan(
    int64_t sweep_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = plans_.find(sweep_id);
    if (it != plans_.end()) return it->second;
  }
  HLAB_ASSIGN_OR_RETURN(store::Sweep stored, store_->GetSweep(sweep_id));
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      sweep::ParseSweepSpec(stored.spec.spec, sweep::SpecFormat::kJson);
  absl::StatusOr<sweep::SweepPlan> plan =
      spec.ok() ? sweep::PlanSweep(*spec)
                : absl::StatusOr<sweep::SweepPlan>(spec.status());
  if (!plan.ok()) {
    return absl::DataLossError(
        absl::StrCat("stored spec of sweep ", sweep_id,
                     " does not plan: ", plan.status().message()));
  }
  auto shared = std::make_shared<const sweep::SweepPlan>(std::move(*plan));
  Remember(sweep_id, shared);
  return shared;
}

void SweepCatalog::Remember(int64_t sweep_id,
                            std::shared_ptr<const sweep::SweepPlan> plan) {
  absl::MutexLock lock(&mu_);
  plans_[sweep_id] = std::move(plan);
}

absl::StatusOr<store::Sweep> SweepCatalog::Resolve(absl::string_view ref) {
  if (ref.empty()) return absl::InvalidArgumentError("sweep: required");
  absl::StatusOr<int64_t> id = ParseSweepId(ref);
  if (id.ok()) {
    absl::StatusOr<store::Sweep> sweep = store_->GetSweep(*id);
    if (sweep.ok() || sweep.status().code() != absl::StatusCode::kNotFound) {
      return sweep;
    }
  }
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Sweep> sweeps, store_->ListSweeps());
  for (auto it = sweeps.rbegin(); it != sweeps.rend(); ++it) {
    if (it->spec.name == ref) return *it;
  }
  return absl::NotFoundError(absl::StrCat("sweep: no sweep '", ref, "'"));
}

absl::StatusOr<hlab::v1::Sweep> SweepCatalog::SweepProto(
    const store::Sweep& sweep) {
  HLAB_ASSIGN_OR_RETURN(std::shared_ptr<const sweep::SweepPlan> plan,
                        Plan(sweep.id));
  store::RunFilter filter;
  filter.sweep_id = sweep.id;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> runs, store_->ListRuns(filter));
  hlab::v1::Sweep out;
  out.set_sweep_id(SweepIdString(sweep.id));
  out.set_name(sweep.spec.name);
  *out.mutable_spec() = plan->spec;
  out.set_spec_hash(sweep.spec.spec_hash);
  out.set_runs_total(static_cast<int64_t>(runs.size()));
  absl::Time updated = sweep.created_at;
  for (const store::Run& run : runs) {
    updated = std::max(updated, run.updated_at);
    switch (run.phase) {
      case store::RunPhase::kWaiting:
        out.set_runs_waiting(out.runs_waiting() + 1);
        break;
      case store::RunPhase::kTrunk:
        out.set_runs_on_trunk(out.runs_on_trunk() + 1);
        break;
      case store::RunPhase::kTraining:
        out.set_runs_training(out.runs_training() + 1);
        break;
      case store::RunPhase::kDecaying:
        out.set_runs_decaying(out.runs_decaying() + 1);
        break;
      case store::RunPhase::kEvaluating:
        out.set_runs_evaluating(out.runs_evaluating() + 1);
        break;
      default:  // an end state, counted by state below
        break;
    }
    switch (run.state) {
      case store::RunState::kPending:
        out.set_runs_pending(out.runs_pending() + 1);
        break;
      case store::RunState::kRunning:
        out.set_runs_running(out.runs_running() + 1);
        break;
      case store::RunState::kSucceeded:
        out.set_runs_succeeded(out.runs_succeeded() + 1);
        break;
      case store::RunState::kFailed:
        out.set_runs_failed(out.runs_failed() + 1);
        break;
      case store::RunState::kCancelled:
        out.set_runs_cancelled(out.runs_cancelled() + 1);
        break;
      case store::RunState::kPredicted:
        out.set_runs_stopped(out.runs_stopped() + 1);
        break;
    }
  }
  out.set_flops_planned(plan->spec.share_trunk() ? plan->flops_shared
                                                 : plan->flops_unshared);
  // Done: the planned FLOPs of this sweep's succeeded tasks (a task shared
  // with another sweep counts here too), comparable with flops_planned.
  std::map<std::string, double> task_flops;
  for (const auto& t : plan->tasks) task_flops[t.task_id()] = t.flops();
  store::TaskFilter succeeded;
  succeeded.state = store::TaskState::kSucceeded;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Task> done,
                        store_->ListTasks(succeeded));
  for (const store::Task& t : done) {
    auto it = task_flops.find(t.spec.id);
    if (it != task_flops.end())
      out.set_flops_done(out.flops_done() + it->second);
  }
  if (sweep.state == store::SweepState::kCancelled) {
    out.set_state(hlab::v1::SWEEP_STATE_CANCELLED);
  } else if (out.runs_pending() + out.runs_running() > 0) {
    out.set_state(hlab::v1::SWEEP_STATE_RUNNING);
  } else if (out.runs_succeeded() + out.runs_stopped() == out.runs_total()) {
    // Early stop (docs/sweeps.md): a PREDICTED run ended as the spec asked.
    out.set_state(hlab::v1::SWEEP_STATE_SUCCEEDED);
  } else {
    out.set_state(hlab::v1::SWEEP_STATE_INCOMPLETE);
  }
  out.set_created_unix_ms(store::ToMillis(sweep.created_at));
  out.set_updated_unix_ms(store::ToMillis(updated));
  HLAB_ASSIGN_OR_RETURN(std::optional<store::PredictionGeneration> predicted,
                        store_->LatestPredictions(sweep.id));
  if (predicted) {
    std::set<std::string> unfinished;
    for (const store::Run& run : runs) {
      if (run.state == store::RunState::kPending ||
          run.state == store::RunState::kRunning) {
        unfinished.insert(run.spec.id);
      }
    }
    std::set<std::string> covered;
    for (const store::Prediction& p : predicted->predictions) {
      if (unfinished.count(p.run_id) > 0) covered.insert(p.run_id);
    }
    out.set_prediction_generation(predicted->generation);
    out.set_runs_predicted(static_cast<int64_t>(covered.size()));
  }
  return out;
}

namespace {

// The newest prediction of each (run, sweep, target): the live
// predictions of unfinished runs, and the last ones made before a run
// finished.
constexpr char kNewestPredictionsSql[] = R"sql(
SELECT p.run_id, p.sweep_id, p.generation, p.target, p.predicted, p.lower,
  p.upper, p.method, p.n_points
FROM (SELECT run_id, sweep_id, target, max(generation) AS generation
      FROM predictions GROUP BY run_id, sweep_id, target) n
  JOIN predictions p ON p.run_id = n.run_id AND p.sweep_id = n.sweep_id
    AND p.generation = n.generation AND p.target = n.target
ORDER BY p.run_id, p.sweep_id, p.target
)sql";

absl::StatusOr<std::map<std::string, std::vector<hlab::v1::RunPrediction>>>
ReadNewestPredictions(store::QueryEngine& query) {
  store::QueryOptions options;
  options.max_rows = 1000000;
  HLAB_ASSIGN_OR_RETURN(store::QueryResult result,
                        query.Run(kNewestPredictionsSql, options));
  auto number = [](const store::Value& v) -> std::optional<double> {
    if (const double* d = std::get_if<double>(&v)) return *d;
    if (const int64_t* i = std::get_if<int64_t>(&v)) {
      return static_cast<double>(*i);
    }
    return std::nullopt;
  };
  std::map<std::string, std::vector<hlab::v1::RunPrediction>> out;
  for (const auto& row : result.rows) {
    hlab::v1::RunPrediction p;
    const std::optional<double> sweep_id = number(row[1]);
    const std::optional<double> predicted = number(row[4]);
    if (!sweep_id || !predicted) continue;
    p.set_sweep_id(SweepIdString(static_cast<int64_t>(*sweep_id)));
    p.set_generation(static_cast<int64_t>(number(row[2]).value_or(0)));
    p.set_target(store::ValueToString(row[3]));
    p.set_predicted(*predicted);
    if (std::optional<double> lower = number(row[5])) p.set_lower(*lower);
    if (std::optional<double> upper = number(row[6])) p.set_upper(*upper);
    p.set_method(store::ValueToString(row[7]));
    p.set_n_points(static_cast<int64_t>(number(row[8]).value_or(0)));
    out[store::ValueToString(row[0])].push_back(std::move(p));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<hlab::v1::Run>> SweepCatalog::RunProtos(
    const std::vector<store::Run>& runs) {
  // Planned figures and memberships from every sweep's plan.
  std::map<std::string, hlab::v1::Run> planned;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Sweep> sweeps, store_->ListSweeps());
  for (const store::Sweep& s : sweeps) {
    absl::StatusOr<std::shared_ptr<const sweep::SweepPlan>> plan = Plan(s.id);
    if (!plan.ok()) continue;
    for (const hlab::v1::Run& r : (*plan)->runs) {
      auto [it, added] = planned.emplace(r.run_id(), r);
      it->second.add_sweep_ids(SweepIdString(s.id));
    }
  }
  // Final validation losses and log(LongPPL)s, one query over run_summary;
  // the training progress is the run's own (store::Run::progress).
  std::map<std::string, double> val_losses, log_longppls;
  std::map<std::string, std::vector<hlab::v1::RunPrediction>> predictions;
  // The adaptive order of each run's pending TRAIN or DECAY task.
  struct Order {
    int64_t rank = 0;
    std::optional<double> score;
    std::string reason;
  };
  std::map<std::string, Order> orders;
  if (query_ != nullptr && !runs.empty()) {
    HLAB_ASSIGN_OR_RETURN(predictions, ReadNewestPredictions(*query_));
    {
      store::QueryOptions options;
      options.max_rows = 1000000;
      HLAB_ASSIGN_OR_RETURN(
          store::QueryResult ranked,
          query_->Run("SELECT run_id, order_rank, order_score, order_reason "
                      "FROM tasks WHERE state = 'PENDING' AND on_demand = 0 "
                      "AND kind IN ('TRAIN', 'DECAY') AND order_rank IS NOT "
                      "NULL",
                      options));
      for (const auto& row : ranked.rows) {
        const auto* id = std::get_if<std::string>(&row[0]);
        const auto* rank = std::get_if<int64_t>(&row[1]);
        if (id == nullptr || rank == nullptr) continue;
        Order& o = orders[*id];
        o.rank = *rank;
        if (const auto* v = std::get_if<double>(&row[2])) o.score = *v;
        o.reason = store::ValueToString(row[3]);
      }
    }
    store::QueryOptions options;
    options.max_rows = 1000000;
    HLAB_ASSIGN_OR_RETURN(
        store::QueryResult result,
        query_->Run("SELECT run_id, final_val_loss, final_log_longppl FROM "
                    "run_summary WHERE final_val_loss IS NOT NULL OR "
                    "final_log_longppl IS NOT NULL",
                    options));
    for (const auto& row : result.rows) {
      const auto* id = std::get_if<std::string>(&row[0]);
      if (id == nullptr) continue;
      if (const auto* v = std::get_if<double>(&row[1])) val_losses[*id] = *v;
      if (const auto* v = std::get_if<double>(&row[2])) log_longppls[*id] = *v;
    }
  }
  std::vector<hlab::v1::Run> out;
  out.reserve(runs.size());
  for (const store::Run& run : runs) {
    hlab::v1::Run proto;
    auto it = planned.find(run.spec.id);
    if (it != planned.end()) proto = it->second;
    proto.set_run_id(run.spec.id);
    proto.set_architecture(run.spec.arch);
    proto.set_scale(run.spec.scale);
    proto.set_seed(run.spec.seed);
    proto.set_non_embedding_params(run.spec.n_params);
    proto.set_tokens(run.spec.budget_tokens);
    proto.set_config_json(run.spec.config);
    proto.set_state(ToProto(run.state));
    proto.set_error(run.failure_reason);
    proto.set_created_unix_ms(store::ToMillis(run.created_at));
    proto.set_updated_unix_ms(store::ToMillis(run.updated_at));
    proto.set_phase(ToProto(run.phase));
    proto.set_tokens_done(run.progress.tokens);
    proto.set_steps_done(run.progress.step);
    if (run.progress.loss && std::isfinite(*run.progress.loss)) {
      proto.set_final_loss(*run.progress.loss);
    }
    auto v = val_losses.find(run.spec.id);
    if (v != val_losses.end() && std::isfinite(v->second)) {
      proto.set_final_val_loss(v->second);
    }
    auto l = log_longppls.find(run.spec.id);
    if (l != log_longppls.end() && std::isfinite(l->second)) {
      proto.set_final_log_longppl(l->second);
    }
    if (auto o = orders.find(run.spec.id); o != orders.end()) {
      proto.set_order_rank(o->second.rank);
      if (o->second.score && std::isfinite(*o->second.score)) {
        proto.set_order_score(*o->second.score);
      }
      proto.set_order_reason(o->second.reason);
    }
    auto predicted = predictions.find(run.spec.id);
    if (predicted != predictions.end()) {
      for (const hlab::v1::RunPrediction& p : predicted->second) {
        *proto.add_predictions() = p;
      }
    }
    out.push_back(std::move(proto));
  }
  return out;
}

absl::StatusOr<bool> SweepCatalog::Finished(int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(store::Sweep sweep, store_->GetSweep(sweep_id));
  if (sweep.state == store::SweepState::kCancelled) return true;
  store::RunFilter filter;
  filter.sweep_id = sweep_id;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> runs, store_->ListRuns(filter));
  for (const store::Run& run : runs) {
    if (run.state == store::RunState::kPending ||
        run.state == store::RunState::kRunning) {
      return false;
    }
  }
  return true;
}

absl::Duration SweepCatalog::Backoff(int64_t sweep_id, int failures) {
  double base = 10, max = 600;
  absl::StatusOr<std::shared_ptr<const sweep::SweepPlan>> plan = Plan(sweep_id);
  if (plan.ok()) {
    base = (*plan)->spec.retry().backoff_base_seconds();
    max = (*plan)->spec.retry().backoff_max_seconds();
  }
  const double seconds =
      std::min(base * std::pow(2.0, std::max(0, failures - 1)), max);
  return absl::Seconds(seconds);
}

}  // namespace hlab::coordinator
