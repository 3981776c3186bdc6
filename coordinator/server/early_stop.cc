#include "coordinator/server/early_stop.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/store/store.h"

namespace hlab::coordinator {

std::vector<StopCandidate> StopCandidates(
    const hlab::v1::SweepSpec& spec,
    const store::PredictionGeneration& generation) {
  std::vector<StopCandidate> out;
  if (!spec.adaptive().has_stop_when()) return out;
  const double below = spec.adaptive().stop_when().interval_below();
  const std::string target =
      spec.fit().targets().empty() ? "loss" : spec.fit().targets(0);
  std::set<std::string> seen;
  for (const store::Prediction& p : generation.predictions) {
    if (p.target != target || !p.lower || !p.upper) continue;
    const double width = *p.upper - *p.lower;
    if (!(width < below) || !seen.insert(p.run_id).second) continue;
    out.push_back({p.run_id, absl::StrFormat(
                                 "%s %.4g [%.4g, %.4g]: interval %.3g < %.3g, "
                                 "generation %d",
                                 target, p.predicted, *p.lower, *p.upper, width,
                                 below, generation.generation)});
  }
  return out;
}

std::vector<StopCandidate> KeepFitScalesMeasured(
    const hlab::v1::SweepSpec& spec, const std::vector<store::Run>& runs,
    const std::vector<StopCandidate>& candidates) {
  const std::set<std::string> fit_scales(spec.fit().fit_scales().begin(),
                                         spec.fit().fit_scales().end());
  std::set<std::string> candidate_ids;
  for (const StopCandidate& c : candidates) candidate_ids.insert(c.run_id);
  using Cell = std::pair<std::string, std::string>;  // architecture, scale
  std::set<Cell> covered;
  std::map<Cell, const store::Run*> cheapest;  // its cheapest candidate
  for (const store::Run& run : runs) {
    const Cell cell{run.spec.arch, run.spec.scale};
    if (fit_scales.count(run.spec.scale) == 0) continue;
    const bool candidate = candidate_ids.count(run.spec.id) > 0;
    if (run.state == store::RunState::kSucceeded ||
        run.state == store::RunState::kRunning ||
        (run.state == store::RunState::kPending && !candidate)) {
      covered.insert(cell);
    }
    if (!candidate) continue;
    const store::Run*& best = cheapest[cell];
    if (best == nullptr ||
        std::make_pair(run.spec.budget_tokens, run.spec.id) <
            std::make_pair(best->spec.budget_tokens, best->spec.id)) {
      best = &run;
    }
  }
  std::set<std::string> kept;
  for (const auto& [cell, run] : cheapest) {
    if (covered.count(cell) == 0) kept.insert(run->spec.id);
  }
  std::vector<StopCandidate> out;
  for (const StopCandidate& c : candidates) {
    if (kept.count(c.run_id) == 0) out.push_back(c);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> StopRunsPredictedWell(
    ServiceContext& context, int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(std::shared_ptr<const sweep::SweepPlan> plan,
                        context.catalog->Plan(sweep_id));
  if (!plan->spec.adaptive().has_stop_when()) {
    return std::vector<std::string>{};
  }
  HLAB_ASSIGN_OR_RETURN(std::optional<store::PredictionGeneration> newest,
                        context.store->LatestPredictions(sweep_id));
  if (!newest) return std::vector<std::string>{};
  std::vector<StopCandidate> candidates = StopCandidates(plan->spec, *newest);
  if (candidates.empty()) return std::vector<std::string>{};
  store::RunFilter filter;
  filter.sweep_id = sweep_id;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> runs,
                        context.store->ListRuns(filter));
  std::vector<std::string> stopped;
  // One write per run: each gets its own reason in its event.
  for (const StopCandidate& c :
       KeepFitScalesMeasured(plan->spec, runs, candidates)) {
    HLAB_ASSIGN_OR_RETURN(std::vector<std::string> done,
                          context.store->StopPredictedRuns(
                              sweep_id, {c.run_id}, c.reason, context.clock()));
    if (done.empty()) continue;
    HLAB_LOG(INFO) << "sweep " << sweep_id << ": run " << c.run_id
                   << " PREDICTED (early stop): " << c.reason;
    stopped.push_back(c.run_id);
  }
  return stopped;
}

}  // namespace hlab::coordinator
