// ProfileLikelihoodIntervals: confidence intervals for E, A, alpha, B, beta
// and for predicted losses that cover the truth at about their nominal rate
// on small grids (docs/analysis.md, "Intervals").
//
// The noise model is Gaussian relative error, L_i = L(N_i, D_i) (1 + eps_i)
// with eps_i ~ N(0, sigma^2) and sigma unknown, so the likelihood is that of
// least squares on relative residuals (to first order the log residuals
// FitPowerLaw uses). With RSS(theta) the sum of squared relative residuals,
// RSS_min its global minimum over the five coefficients (E, A, B >= 0) and
// nu = n - 5, the interval for a quantity g(theta) -- a coefficient, or the
// predicted loss at some (N, D) -- is
//   { c : min_{theta: g(theta) = c} RSS(theta) <= RSS_min (1 + t^2 / nu) },
// t the (1 + confidence)/2 quantile of Student's t with nu degrees of
// freedom: the profile-likelihood (F-test) interval of nonlinear regression,
// exact for a linear model and far better than Wald or percentile-bootstrap
// intervals when the surface is curved, as it is here (Bates & Watts 1988,
// ch. 6).
//
// Each profile point is a global minimisation: for fixed exponents the model
// is linear in (E, A, B), so those are solved exactly (least squares under
// E, A, B >= 0 and the linear constraint g = c, by active sets); the free
// exponents are searched over a grid, then refined by Nelder-Mead from the
// best grid point and the previous profile point's optimum. The bounds are
// found by stepping out from the estimate and then bisecting.
//
// Unbounded sides: when the profile stays below the threshold out to the end
// of the search range (alpha, beta up to exponent_max; E, A, B down to 0 or
// up to exp(40) times the estimate), the data do not bound that side. The
// interval then reports the range's end (0 below, +inf above) with
// bounded_below / bounded_above = false: an honest "not determined by this
// grid", never a narrower guess. A's (B's) upper side is reported unbounded
// whenever alpha's (beta's) is, since a larger exponent needs a larger
// coefficient. With n <= 5 points there are no degrees of
// freedom for sigma and no interval: FailedPrecondition.
//
// The estimate the intervals are centred on is the least-squares fit, not
// FitPowerLaw's Huber fit; on clean data the two agree closely.
//
// Determinism: no randomness; the result is the same for any thread count.
// Thread-safety: reentrant; starts and joins its own threads.
//
//   ProfileOptions options;
//   options.predict_at = {{1.14e5, 2.1e6}};  // (N, D) to predict
//   HLAB_ASSIGN_OR_RETURN(ProfileResult ci,
//                         ProfileLikelihoodIntervals(points, options));
//   std::cout << ci.alpha.lower << " .. " << ci.alpha.upper << "\n";
#ifndef HLAB_ANALYSIS_PROFILE_H_
#define HLAB_ANALYSIS_PROFILE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

// A place to predict the loss at.
struct PredictionSite {
  double n = 0;
  double d = 0;
};

struct ProfileOptions {
  double confidence = 0.95;  // two-sided
  // The exponents are searched in [exponent_min, exponent_max].
  double exponent_min = 0.0;
  double exponent_max = 3.0;
  // Grid points per free exponent at each profile point (the grid for the
  // least-squares fit itself is twice as fine).
  int grid_size = 16;
  // Bounds are bisected until the bracket is below this fraction of the
  // bound's distance from the estimate (in the exponent for alpha and beta,
  // in ln(value) for E, A, B and predictions).
  double bound_tolerance = 1e-3;
  std::vector<PredictionSite> predict_at;
  int threads = 1;  // <= 0: one per hardware thread
};

// One quantity's interval.
struct ProfileInterval {
  double estimate = 0;  // at the least-squares optimum
  double lower = 0;
  double upper = 0;
  // False when the data do not bound that side within the search range;
  // lower is then 0 (or exponent_min) and upper +inf.
  bool bounded_below = true;
  bool bounded_above = true;

  bool Contains(double value) const { return lower <= value && value <= upper; }
};

struct PredictionInterval {
  PredictionSite site;
  ProfileInterval interval;
};

struct ProfileResult {
  PowerLaw least_squares;  // the law the intervals are centred on
  double rss = 0;          // its sum of squared relative residuals
  int dof = 0;             // n - 5
  double sigma = 0;        // sqrt(rss / dof): the relative noise estimate
  double confidence = 0;
  // The profile threshold: RSS <= rss * threshold_ratio is inside.
  double threshold_ratio = 0;
  ProfileInterval E, A, alpha, B, beta;
  std::vector<PredictionInterval> predictions;  // as options.predict_at
};

// InvalidArgument as ValidatePoints, for a prediction site whose N or D is
// not finite and > 0, or for invalid options; FailedPrecondition for fewer
// than 6 points (no degree of freedom left for the noise).
absl::StatusOr<ProfileResult> ProfileLikelihoodIntervals(
    absl::Span<const ScalingPoint> points, const ProfileOptions& options = {});

// The quantile p in (0, 1) of Student's t distribution with dof >= 1 degrees
// of freedom (the regularised incomplete beta function, inverted by
// bisection; ~1e-12 absolute).
double StudentTQuantile(double p, int dof);

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_PROFILE_H_
