#include "coordinator/server/early_stop.h"

#include <memory>
#include <optional>
#include <set>

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
  std::vector<std::string> stopped;
  // One write per run: each gets its own reason in its event.
  for (const StopCandidate& c : StopCandidates(plan->spec, *newest)) {
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
