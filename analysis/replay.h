// Replay: a sweep's schedule simulated on results already measured, to see
// how fast each order of training the runs pins down the law where it
// matters (issue #24, point 5; docs/analysis.md, "Replay").
//
// The pool is a finished sweep's runs with their measured final target. Runs
// in the target region (by default the fit's verify scales) are never
// trained by the simulation; their measured values are the truth the law's
// predictions are scored against. The others are candidates, trained one at
// a time in the policy's order. Each costs its FLOPs, with WSD trunk sharing
// as hlab plans it: the runs of one (architecture, scale) share a trunk.
// How a trunk is paid for is an option (TrunkCost):
//   - kWhole (hlab's scheduler today): the first run of a trunk pays for the
//     whole trunk, to its last branch point; every run pays its own decay.
//   - kExtend: a trunk is trained only as far as the runs taken need: a run
//     pays the trunk's extension up to its branch point (nothing when the
//     trunk is already past it) plus its decay. This is what a scheduler
//     that can stop a trunk at a branch point and resume it later would
//     spend.
//
// After each run, the law of its architecture is refitted on that
// architecture's trained runs (once it has 5), and two figures are taken
// over the target region:
//   - r2_target: the mean over architectures of R^2 (on L) of the law's
//     predictions at the architecture's target runs (defined once every
//     architecture has a law);
//   - median_abs_error: the median over every target run of |predicted -
//     measured| / measured.
// The last step has trained every candidate: its figures are the full
// grid's. A policy "reaches the target" at the smallest FLOPs fraction from
// which on r2_target stays within `r2_tolerance` of the full grid's.
//
// Policies:
//   - kDefault: hlab's own order (the caller's default_rank: the lease
//     order, trunk by trunk, each trunk's runs by budget);
//   - kRandom: a uniformly random order (seeded);
//   - kAdaptive: until an architecture's trained runs can determine a law
//     (Identifiable: 5 runs, 3 scales or all its scales, 2 budgets) the
//     cheapest run that adds a missing scale or budget; then the run with
//     the largest expected reduction of the target region's predictive
//     variance per FLOP (run_selection.h), over all architectures.
//
// Every fit in a replay is the same deterministic function of its points
// (FitPowerLaw on options.grid), so the last step reproduces the full-grid
// fit exactly.
//
// Thread-safety: Replay is reentrant.
//
//   ReplayOptions options;
//   options.policy = ReplayPolicy::kAdaptive;
//   HLAB_ASSIGN_OR_RETURN(ReplayResult r, Replay(pool, options));
//   if (r.flops_fraction_at_target) ...
#ifndef HLAB_ANALYSIS_REPLAY_H_
#define HLAB_ANALYSIS_REPLAY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/fit.h"

namespace hlab::analysis {

struct ReplayRun {
  std::string run_id;
  std::string arch;     // one law per architecture
  double n = 0;         // non-embedding parameters
  double d = 0;         // tokens
  double value = 0;     // the measured final target (> 0)
  bool target = false;  // in the target region: scored, never trained
  // Runs with the same non-empty trunk share it; trunk_flops is the trunk's
  // cost up to this run's branch point. Empty: the run trains alone.
  std::string trunk;
  double trunk_flops = 0;
  double own_flops = 0;      // its decay, or the whole run without a trunk
  int64_t default_rank = 0;  // position in hlab's own order (kDefault)
};

enum class ReplayPolicy { kDefault, kRandom, kAdaptive };
enum class TrunkCost { kWhole, kExtend };

// "default", "random", "adaptive".
const char* ReplayPolicyName(ReplayPolicy policy);
// "whole", "extend".
const char* TrunkCostName(TrunkCost cost);

struct ReplayOptions {
  ReplayPolicy policy = ReplayPolicy::kDefault;
  TrunkCost trunk_cost = TrunkCost::kWhole;
  uint64_t seed = 1;  // kRandom's order
  double r2_tolerance = 0.02;
  // Median error "reached" when within this factor of the full grid's.
  double error_factor = 1.5;
  // The fit at every step: 675 starts (alpha, beta in {0, .5, 1, 1.5, 2},
  // e in {-1, 0, 1}, a, b in {0, 10, 20}) unless set.
  StartGrid grid = CoarseReplayGrid();
  int threads = 1;

  static StartGrid CoarseReplayGrid();
};

struct ReplayStep {
  std::string run_id;  // the run trained at this step
  std::string arch;
  double cost = 0;      // its FLOPs (trunk part + own part)
  double flops = 0;     // cumulative
  double fraction = 0;  // flops / grid_flops
  std::optional<double> r2_target;
  std::optional<double> median_abs_error;
};

struct ReplayResult {
  ReplayPolicy policy = ReplayPolicy::kDefault;
  TrunkCost trunk_cost = TrunkCost::kWhole;
  uint64_t seed = 0;
  int candidates = 0;
  int targets = 0;
  double grid_flops = 0;  // every candidate, trunks shared
  // The full grid's figures (the last step's).
  std::optional<double> full_r2_target;
  std::optional<double> full_median_abs_error;
  std::vector<ReplayStep> steps;
  // The smallest fraction from which on r2_target stays within
  // r2_tolerance of the full grid's, and the same for the median error
  // within error_factor of the full grid's; nullopt when the full grid's
  // figure is undefined.
  std::optional<double> flops_fraction_at_target;
  std::optional<double> flops_fraction_at_error;
};

// Replays `runs` under `options`. InvalidArgument (naming the run and
// field) when a run's N, D or value is not finite and > 0, a cost is
// negative, a run id repeats, no run is a candidate or none a target, or an
// architecture has target runs but fewer than 5 candidates.
absl::StatusOr<ReplayResult> Replay(absl::Span<const ReplayRun> runs,
                                    const ReplayOptions& options);

// The r2_target of `result` at FLOPs fraction `fraction`: the last step at
// or before it (nullopt before the first step or where undefined); and the
// same for the median error.
std::optional<double> R2AtFraction(const ReplayResult& result, double fraction);
std::optional<double> ErrorAtFraction(const ReplayResult& result,
                                      double fraction);

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_REPLAY_H_
