// The runs a replay (analysis/replay.h) schedules: a sweep's plan, with
// each run's cost and place in hlab's own order taken from the planner
// (coordinator/sweep/expand.h) and its measured final target from a
// finished sweep's results (a database's runs, or a report's runs.csv).
//
// Costs are the planner's FLOPs: a run on a shared trunk costs the trunk's
// FLOPs up to its branch point (the trunk task's FLOPs scaled by branch
// step / trunk end step) plus its DECAY task; a run trained alone its TRAIN
// task. The default rank is the order one worker leases the training tasks
// in: the ready task with the highest priority, then the fewest FLOPs, then
// the smallest id (the store's lease order), a run ranked where its last
// training task is.
//
// A run of the plan is in the pool when it has a measured value for the
// target; runs of `target_scales` are the target region.
//
// Thread-safety: pure functions.
//
//   HLAB_ASSIGN_OR_RETURN(sweep::SweepPlan plan, sweep::PlanSweep(spec));
//   HLAB_ASSIGN_OR_RETURN(ReplayPool pool,
//       BuildReplayPool(plan, measured, {"S4"}));
//   HLAB_ASSIGN_OR_RETURN(analysis::ReplayResult r,
//       analysis::Replay(pool.runs, {}));
#ifndef HLAB_FITS_REPLAY_POOL_H_
#define HLAB_FITS_REPLAY_POOL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/replay.h"
#include "coordinator/sweep/expand.h"
#include "fits/run_figures.h"

namespace hlab::fits {

// A measured final value, keyed by the run's place in the grid (run ids
// change with hlab's versions, e.g. the synthetic corpus's; the place does
// not).
struct GridPlace {
  std::string arch;
  std::string scale;
  int64_t tokens = 0;
  bool operator<(const GridPlace& o) const {
    return std::tie(arch, scale, tokens) < std::tie(o.arch, o.scale, o.tokens);
  }
};
using MeasuredValues = std::map<GridPlace, double>;

struct ReplayPool {
  std::vector<analysis::ReplayRun> runs;
  int planned = 0;   // runs in the plan
  int measured = 0;  // of them, with a measured value (in `runs`)
};

// The pool of `plan` (one seed: a spec with several seeds is refused) with
// the values of `measured`. InvalidArgument when the plan has more than one
// seed, a target scale is not a scale of the spec (naming it), or no run of
// the plan has a measured value.
absl::StatusOr<ReplayPool> BuildReplayPool(
    const sweep::SweepPlan& plan, const MeasuredValues& measured,
    const std::vector<std::string>& target_scales);

// The measured values of `target` ("loss" or "longppl", as the fits take
// them: RunFigures::Target) of a sweep's succeeded runs.
MeasuredValues MeasuredFromRuns(const std::vector<RunFigures>& runs,
                                const std::string& target);

// The measured values of `target` from a report's runs.csv (columns
// architecture, scale, D, state, final_loss, val_loss, log_longppl; "loss"
// is val_loss, else final_loss). InvalidArgument naming the file, line and
// column for a missing column or a value that does not parse; NotFound
// when the file cannot be read.
absl::StatusOr<MeasuredValues> ReadMeasuredCsv(const std::string& path,
                                               const std::string& target);

}  // namespace hlab::fits

#endif  // HLAB_FITS_REPLAY_POOL_H_
