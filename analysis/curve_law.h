// The learning-rate-area law of a training curve (Tissue et al., "Scaling
// Law with Learning Rate Annealing", arXiv 2408.11029), fitted to the
// points a run has so far, and its prediction of the run's final loss with
// an interval.
//
//   L(k) = L0 + A * S1(k)^-alpha - C * S2(k)
//
// with k the number of optimizer updates applied before the loss was
// measured and eta_i the learning rate of update i (0-based):
//   S1(k) = sum_{i<k} eta_i                        (forward area)
//   m_i   = lambda * m_{i-1} + (eta_{i-1} - eta_i)  (m = 0 during warmup)
//   S2(k) = sum_{i<k} m_i                          (annealing area)
// lambda = 0.999 by default (the paper's). The warmup's rising LR is not an
// annealing: m stays 0 until warmup ends.
//
// Fit: for fixed alpha the law is linear in (L0, A, C), solved exactly by
// least squares under L0, A, C >= 0 (every active set of the three, the
// feasible one of least RSS); alpha is searched on a log grid and refined by
// golden section. Several curves may be fitted together (runs that share a
// WSD trunk: the same model and data, different schedules), one law for all.
// While no observed point has S2 > 0 (a WSD run in its stable phase) C is
// not determined by the data; it is then `c_prior` (0 without one), and
// the interval widens by its spread. Once C is fitted, a prior with a
// spread acts as a Gaussian prior on it (a penalty (C - c_prior)^2 sigma^2
// / c_prior_sd^2, sigma from the fit without it): a decay too short to show
// its drop above the noise does not set C alone.
//
// Interval (95% by default) of the predicted mean loss over a window of
// updates: the profile-likelihood set { g : min RSS given g <= RSS_min (1 +
// t^2/nu) } over alpha and the linear coefficients (closed form for each
// alpha), with nu = n_eff - 4 and n_eff = n (1 - rho) / (1 + rho) for the
// lag-1 autocorrelation rho of the residuals (a loss curve's residuals are
// not independent); widened in quadrature by z * c_prior_sd * S2 when C is
// the prior, and by t * sigma / sqrt(window points) for the noise of the
// measured window mean (a prediction interval). Its coverage is measured
// (docs/analysis.md, "Curve prediction").
//
// Thread-safety: pure functions.
//
//   TrainingCurve run{.lr = schedule_lrs, .warmup_steps = 10,
//                     .points = {{100, 3.1}, {101, 3.0}, ...}};
//   HLAB_ASSIGN_OR_RETURN(CurvePrediction p,
//                         PredictCurveLoss({run}, 0, {T - 5, T}, {}));
//   std::cout << p.value << " [" << p.lower << ", " << p.upper << "]\n";
#ifndef HLAB_ANALYSIS_CURVE_LAW_H_
#define HLAB_ANALYSIS_CURVE_LAW_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace hlab::analysis {

// One observed loss: measured after `updates` optimizer updates.
struct CurvePoint {
  int64_t updates = 0;
  double loss = 0;
};

// One run's curve: its whole planned schedule and the points seen so far.
struct TrainingCurve {
  std::vector<double> lr;    // lr[i]: the LR of update i; size = total updates
  int64_t warmup_steps = 0;  // updates [0, warmup_steps) are warmup
  std::vector<CurvePoint> points;  // updates in [1, lr.size()]
};

// S1 and S2 after k = 0 .. lr.size() updates (size lr.size() + 1).
struct ScheduleAreas {
  std::vector<double> s1;
  std::vector<double> s2;
};
ScheduleAreas ComputeScheduleAreas(absl::Span<const double> lr,
                                   int64_t warmup_steps, double decay);

struct CurveLaw {
  double l0 = 0;
  double a = 0;
  double alpha = 0;
  double c = 0;
  double decay = 0.999;  // lambda
  double Loss(double s1, double s2) const;
};

struct CurveLawOptions {
  double decay = 0.999;  // lambda of S2
  // alpha is searched in [alpha_min, alpha_max]: a log grid, then golden
  // section around the best grid point.
  double alpha_min = 0.01;
  double alpha_max = 4.0;
  int alpha_grid = 80;
  // C while no observed point has S2 > 0, and its standard deviation; with
  // c_prior_sd > 0 also a Gaussian prior on a fitted C.
  std::optional<double> c_prior;
  double c_prior_sd = 0;
  double confidence = 0.95;
  // Points measured after fewer updates are left out (the first steps of a
  // run follow no power law in S1).
  int64_t min_updates = 1;
};

struct CurveLawFit {
  CurveLaw law;
  int n_points = 0;  // points fitted
  double rss = 0;
  double sigma = 0;                 // residual standard deviation
  double lag1_autocorrelation = 0;  // of the residuals, within curves
  double effective_points = 0;      // n_eff
  bool c_from_data = false;         // false: C is the prior (or 0)
  bool alpha_on_edge = false;       // alpha at alpha_min or alpha_max
};

struct CurvePrediction {
  CurveLawFit fit;
  double value = 0;  // the law's mean loss over the window
  double lower = 0;
  double upper = 0;
};

// The updates [first, last] of one curve whose mean loss is predicted.
struct UpdateWindow {
  int64_t first = 0;
  int64_t last = 0;
};

// Fits one law to every point of `curves`. InvalidArgument naming the
// field ("curves[1].points[3].loss: ...") for a curve without a schedule,
// a non-finite or non-positive LR or loss, a point outside [1, lr.size()],
// warmup_steps outside [0, lr.size()], or bad options; FailedPrecondition
// with fewer than 5 points at or after min_updates.
absl::StatusOr<CurveLawFit> FitCurveLaw(absl::Span<const TrainingCurve> curves,
                                        const CurveLawOptions& options = {});

// Fits, then predicts the mean loss of curve `target` over `window` (its
// own schedule) with the interval above. Errors as FitCurveLaw, and
// InvalidArgument for a target or window outside the curve.
absl::StatusOr<CurvePrediction> PredictCurveLoss(
    absl::Span<const TrainingCurve> curves, int target, UpdateWindow window,
    const CurveLawOptions& options = {});

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_CURVE_LAW_H_
