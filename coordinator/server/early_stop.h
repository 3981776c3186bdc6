// Early stop (docs/sweeps.md, "Early stop"): after each generation of live
// predictions, the pending runs of a sweep with `adaptive.stop_when` whose
// newest prediction is already narrow enough are not trained; they become
// PREDICTED (Store::StopPredictedRuns).
//
// The rule, exactly: the prediction of a run's final value of the sweep's
// first fit target (fit.targets[0] after the defaults: "loss" unless the
// spec lists others) in the sweep's newest prediction generation, with
// both interval ends (profile or bootstrap 95%), upper - lower <
// stop_when.interval_below, in the target's units. Which of those runs
// qualify (PENDING, no TRAIN or DECAY task of its own ever leased, in no
// other sweep, no other run's task waiting for it) the store decides in
// the same transaction that stops them.
//
// Thread-safety: thread-safe (the store serialises the writes); the fit
// thread (fit_scheduler.h) calls it after recording a generation, and on
// each sweep's stored generation once after a start.
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<std::string> stopped,
//                         StopRunsPredictedWell(*context, sweep_id));
#ifndef HLAB_COORDINATOR_SERVER_EARLY_STOP_H_
#define HLAB_COORDINATOR_SERVER_EARLY_STOP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/server/context.h"
#include "coordinator/store/types.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::coordinator {

// The predictions of `generation` that meet the spec's stop_when, each
// with the reason stored in its "run_state" event ("loss 2.31 [2.30, 2.32]:
// interval 0.02 < 0.05, generation 4"); empty when the spec has no
// stop_when. Pure.
struct StopCandidate {
  std::string run_id;
  std::string reason;
};
std::vector<StopCandidate> StopCandidates(
    const hlab::v1::SweepSpec& spec,
    const store::PredictionGeneration& generation);

// The candidates whose stop keeps every (architecture, fit scale) cell of
// `runs` (the sweep's runs, their states now) with a run that is measured
// or will be: a cell with no SUCCEEDED, RUNNING or non-candidate PENDING
// run keeps its cheapest candidate (smallest budget; then run id), so the
// law that predicts the rest keeps its scales and stays determined (with a
// fit scale gone, alpha and A are not). Verify scales are not guarded:
// predicting them is what early stop is for. Pure.
std::vector<StopCandidate> KeepFitScalesMeasured(
    const hlab::v1::SweepSpec& spec, const std::vector<store::Run>& runs,
    const std::vector<StopCandidate>& candidates);

// Stops the candidates of the sweep's newest generation (KeepFitScalesMeasured
// of StopCandidates); returns the ids
// stopped (none without stop_when or a generation) and logs them. NotFound
// for an unknown sweep; the store's errors.
absl::StatusOr<std::vector<std::string>> StopRunsPredictedWell(
    ServiceContext& context, int64_t sweep_id);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_EARLY_STOP_H_
