// FitPowerLaw: Chinchilla approach 3 as Epoch's replication runs it.
//
// Minimises the summed Huber objective of analysis/power_law.h with L-BFGS
// (Ceres GradientProblemSolver, analytic gradients) from every point of a
// start grid -- by default Chinchilla's 4500 starts -- and keeps the start
// with the lowest final objective, then polishes it with fresh L-BFGS runs
// until the objective stops falling. Tolerances are tight (relative function
// change 1e-12 per start, 1e-15 when polishing) so the optimiser does not
// stop early, the pitfall of Hoffmann et al.'s fit; the final gradient norm
// is reported.
//
// Determinism: every start is an independent single-threaded solve, and the
// best is chosen by (objective, start index), so the result is bitwise the
// same for any thread count and across runs of one build on one kind of CPU
// (the objective has an AVX2 variant whose FMAs change the last bits).
//
// Thread-safety: FitPowerLaw and RefinePowerLaw are reentrant; they start and
// join their own threads.
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<ScalingPoint> points,
//                         ReadPointsCsv("runs.csv"));
//   FitOptions options;
//   options.threads = 2;
//   HLAB_ASSIGN_OR_RETURN(FitResult fit, FitPowerLaw(points, options));
//   std::cout << fit.law.E << " " << fit.law.alpha << "\n";
#ifndef HLAB_ANALYSIS_FIT_H_
#define HLAB_ANALYSIS_FIT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

// The L-BFGS start grid: the Cartesian product of five axes. Start i is
// enumerated with alpha outermost, then beta, e, a and b innermost (the loop
// order of Epoch's notebook).
struct StartGrid {
  std::vector<double> alpha;
  std::vector<double> beta;
  std::vector<double> e;
  std::vector<double> a;
  std::vector<double> b;

  // alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1},
  // a, b in {0, 5, ..., 25}: 5*5*5*6*6 = 4500 starts.
  static StartGrid Chinchilla();

  size_t size() const;
  LogPowerLaw At(size_t index) const;
  // True when some coordinate of start `index` is the first or last value of
  // its axis (axes with one or two values are all edge).
  bool OnEdge(size_t index) const;
  // InvalidArgument when an axis is empty or holds a non-finite value.
  absl::Status Validate() const;
};

struct FitOptions {
  StartGrid grid = StartGrid::Chinchilla();
  double huber_delta = 1e-3;
  // Threads for the starts; <= 0 means one per hardware thread. The result
  // does not depend on it.
  int threads = 1;
  // Each start's L-BFGS run (Ceres GradientProblemSolver options of the same
  // names; function_tolerance is relative). 1e-12 is ~1000x tighter than
  // SciPy's L-BFGS-B default (2.2e-9), enough to rank the starts.
  int max_iterations = 2000;
  double function_tolerance = 1e-12;
  double gradient_tolerance = 1e-10;
  double parameter_tolerance = 1e-14;
  // The best start is then polished with these tighter settings: it is run
  // again from its start point, then restarted from the lower end point
  // while that still lowers the objective, `polish_rounds` runs in all (0:
  // no polishing). RefinePowerLaw uses the polish settings throughout.
  int polish_rounds = 3;
  int polish_max_iterations = 20000;
  double polish_function_tolerance = 1e-15;
  double polish_gradient_tolerance = 1e-12;
  // A start "reaches the best" when its objective is within
  // max(same_optimum_rtol * best, same_optimum_atol) of the best (used for
  // n_starts_at_best and the grid-edge warning); the absolute floor matters
  // for noise-free data, whose optimum is ~0.
  double same_optimum_rtol = 1e-7;
  double same_optimum_atol = 1e-12;
  // Warn when the condition number of the column-scaled Jacobian of ln L at
  // the optimum exceeds this.
  double condition_warning = 1e8;
};

struct FitResult {
  PowerLaw law;
  LogPowerLaw log_law;
  double objective = 0;      // summed Huber at the optimum
  double gradient_norm = 0;  // L2 norm of its analytic gradient
  size_t n_points = 0;
  size_t n_starts = 0;
  size_t best_start = 0;  // index into the grid (0 for RefinePowerLaw)
  LogPowerLaw best_start_params;
  size_t n_starts_at_best = 0;  // starts that reached the best objective
  // Whether the best start lies on the edge of the grid, and whether some
  // start strictly inside the grid reached the best objective too. Only an
  // edge best that no interior start matches is warned about: with many
  // starts converging to one optimum the lowest-index one is usually on an
  // edge, which says nothing about the grid being too narrow.
  bool best_start_on_edge = false;
  bool interior_start_reached_best = false;
  int iterations = 0;       // L-BFGS iterations of the best start
  std::string termination;  // Ceres's message for the best start
  // Condition number of the Jacobian of ln L-hat w.r.t. (a, b, e, alpha,
  // beta) at the optimum, columns scaled to unit norm; inf when singular.
  double condition_number = 0;
  std::vector<std::string> warnings;
  // Those of `warnings` that say a fitted coefficient lies outside the
  // start grid's range (AnalyzePowerLaw turns them into notes when the
  // VarPro fit confirms the optimum).
  std::vector<std::string> outside_grid;
};

// Fits L(N, D) by multi-start L-BFGS. InvalidArgument when the points fail
// ValidatePoints (fewer than 5, or a non-finite or non-positive N, D or loss;
// the message names the point and field), or when the options are invalid.
// Badly conditioned problems (one distinct N or D, a near-singular Jacobian,
// a best start on the grid edge that no interior start matches, a fitted
// exponent outside the grid's range) fit anyway and say so in `warnings`.
absl::StatusOr<FitResult> FitPowerLaw(absl::Span<const ScalingPoint> points,
                                      const FitOptions& options = {});

// One L-BFGS run (plus polishing) from `start`, ignoring options.grid: the
// refit used by the bootstrap. Same errors as FitPowerLaw.
absl::StatusOr<FitResult> RefinePowerLaw(absl::Span<const ScalingPoint> points,
                                         const LogPowerLaw& start,
                                         const FitOptions& options = {});

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_FIT_H_
