// Partial-curve prediction measured on finished runs: each run's training
// curve read from a sweep database (its shared WSD trunk up to its branch
// point, then its own decay), and a backtest that, at fractions f of its
// steps, fits the learning-rate-area law (analysis/curve_law.h) to the
// points up to f only, predicts the run's final training loss and compares
// it with the measured value and with the last value held constant.
//
// What is predicted: the final *training* loss, as the mean of the
// train_loss points over the run's last 1% of updates, at least 32. The
// curve is the training loss: validation losses exist only at branch points
// and at the end, too few to fit, and the final validation loss is measured
// on another distribution (the short documents), so a training-loss law
// cannot predict it without an offset it never sees. The mean over a window
// instead of the last point: one point is one batch (the demo's 512 tokens)
// and its noise (~0.1 nats in the demo) would dominate both errors; 32
// points bring it to ~0.02.
//
// What the fit at f sees: the run's own points after warmup (and after
// law.min_updates) at steps <= f * steps, and the decay points at steps <=
// f * steps of the runs that share its trunk (their branch points come
// earlier; the same model and data, so one law).
// While none of them has decayed, C comes from a prior: the median C of the
// full-curve fits of the sweep's other trunk groups (leave one group out;
// in a live sweep, runs that finished before), its spread 1.4826 x MAD.
//
// The interval: the law's profile interval (analysis/curve_law.h) assumes
// the law is right. On real curves the law's own error dominates, so with
// `model_error` it is widened in quadrature by 1.96 x a scale measured on
// the run itself before f: the law fitted to the points up to f/2 predicts
// the window ending at f (seen), and its error is multiplied by the ratio
// of the horizons in ln S1 (f to the end against f/2 to f).
//
// Thread-safety: pure functions (ReadRunCurves as thread-safe as `query`).
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<RunCurve> runs,
//                         ReadRunCurves(query, sweep_id));
//   HLAB_ASSIGN_OR_RETURN(CurveBacktest b, BacktestCurves(runs, {}));
//   for (const FractionSummary& s : b.summaries) ...
#ifndef HLAB_FITS_CURVE_BACKTEST_H_
#define HLAB_FITS_CURVE_BACKTEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/curve_law.h"
#include "fits/run_figures.h"

namespace hlab::fits {

// One run's curve as the database holds it.
struct RunCurve {
  std::string run_id;
  std::string arch;
  std::string scale;
  std::string state;
  int64_t budget_tokens = 0;
  int64_t steps = 0;        // planned optimizer updates
  int64_t branch_step = 0;  // its decay start (its WSD schedule's)
  std::string trunk;        // the TRUNK task it branches from; "" for none
  int64_t warmup_steps = 0;
  std::vector<double> lr;  // the planned LR of every update
  // train_loss points: (record step, loss); the loss of record step k was
  // measured after k - 1 updates.
  std::vector<std::pair<int64_t, double>> train_loss;
  // Largest |stored lr - planned lr| / planned lr over the stored points:
  // a check that the schedule is reconstructed right.
  double lr_mismatch = 0;
  std::string skipped;  // why it cannot be backtested ("" if it can)
};

// Every run of sweep `sweep_id` with its schedule (from its config,
// task::PlanTraining's) and its train_loss and lr metrics. A run whose
// config cannot be read is returned with `skipped` saying why. Errors are
// the queries'.
absl::StatusOr<std::vector<RunCurve>> ReadRunCurves(const RunQuery& query,
                                                    int64_t sweep_id);

struct BacktestOptions {
  std::vector<double> fractions = {0.25, 0.5, 0.75};
  // The final window: this share of the run's updates, at least
  // final_window_min_steps (at most half the run).
  double final_window = 0.01;
  int64_t final_window_min_steps = 32;
  bool siblings = true;  // use the trunk siblings' decays
  bool prior = true;     // C's prior from the other groups
  // Widen the interval by the law's own error on the run (above).
  bool model_error = true;
  analysis::CurveLawOptions law;
};

// One prediction: run x fraction.
struct BacktestRow {
  std::string run_id, arch, scale;
  int64_t steps = 0;
  double fraction = 0;
  int64_t cutoff_step = 0;  // the last record step seen
  double measured = 0;      // the final window's mean train loss
  std::optional<double> predicted, lower, upper;  // empty if the fit failed
  std::string error;                              // why not
  double last_point = 0;   // baseline: the last point at the cutoff
  double last_window = 0;  // baseline: the mean of the last window there
  bool c_from_data = false;
  int siblings_used = 0;
  std::optional<double> model_error;  // the self-check's scale, if widened
  double alpha = 0, c = 0;
};

struct FractionSummary {
  double fraction = 0;
  int runs = 0;                            // predicted
  int failed = 0;                          // fits that failed
  double median_abs_error = 0;             // the law's
  double median_abs_error_last_point = 0;  // baselines'
  double median_abs_error_last_window = 0;
  double median_abs_relative_error = 0;  // the law's, |err| / measured
  double better_than_last_point = 0;     // share of runs
  double better_than_last_window = 0;
  double coverage = 0;  // share of intervals containing the measured value
  double median_interval_width = 0;
  int c_from_data = 0;  // runs whose C came from observed decays
};

struct CurveBacktest {
  std::vector<BacktestRow> rows;
  std::vector<FractionSummary> summaries;
  int runs = 0;     // backtested (succeeded, not skipped)
  int skipped = 0;  // with a reason in RunCurve::skipped, or not succeeded
  double max_lr_mismatch = 0;
};

// InvalidArgument for a fraction outside (0, 1), a final_window outside
// (0, 0.5] or a law.decay outside [0, 1). A fit that fails (too few
// points) leaves its row without a prediction, with the reason.
absl::StatusOr<CurveBacktest> BacktestCurves(absl::Span<const RunCurve> runs,
                                             const BacktestOptions& options);

// The live prediction: for every run that has points but has not
// finished (not FAILED or CANCELLED), the law fitted to everything stored
// now (its points and its trunk siblings' decays, the prior from the
// finished groups) predicts its final window's mean train loss, with the
// interval widened as in the backtest. Rows as BacktestRow, `measured`
// unused (0), `cutoff_step` its newest step, `fraction` that over its
// steps. InvalidArgument for a bad final_window.
absl::StatusOr<std::vector<BacktestRow>> PredictUnfinished(
    absl::Span<const RunCurve> runs, const BacktestOptions& options);

}  // namespace hlab::fits

#endif  // HLAB_FITS_CURVE_BACKTEST_H_
