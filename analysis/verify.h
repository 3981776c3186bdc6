// Verification of a fitted law: R^2 on the fit set and on held-out points,
// and the relative extrapolation error of each point.
//
// The study fits on small scales and verifies on larger held-out ones. R^2
// is computed on L (not ln L): R^2 = 1 - sum (L - L-hat)^2 / sum (L - mean
// L)^2, so it can be negative when the law predicts worse than the mean.
// Relative error = (L-hat - L) / L, signed (positive: the law overpredicts).
//
// Thread-safety: pure functions.
//
//   PointSplit split = SplitByN(points, /*n_above=*/1e9);
//   HLAB_ASSIGN_OR_RETURN(FitResult fit, FitPowerLaw(split.fit));
//   Verification v = VerifyPowerLaw(fit.law, split.fit, split.verify);
//   if (v.r2_verify) std::cout << *v.r2_verify << "\n";
#ifndef HLAB_ANALYSIS_VERIFY_H_
#define HLAB_ANALYSIS_VERIFY_H_

#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

struct PointPrediction {
  ScalingPoint point;
  double predicted = 0;
  double relative_error = 0;  // (predicted - loss) / loss
};

struct Verification {
  double r2_fit = 0;
  double rmse_fit = 0;  // on L
  std::vector<PointPrediction> fit_points;
  // Empty optionals when there are no held-out points; r2_verify is also
  // empty with fewer than 2 held-out points or when they all share one loss
  // (R^2 is undefined there).
  std::optional<double> r2_verify;
  std::optional<double> mean_abs_relative_error_verify;
  std::optional<double> max_abs_relative_error_verify;
  std::vector<PointPrediction> verify_points;
};

// R^2 of `law` on `points` (on L); NaN for fewer than 2 points or zero
// variance.
double RSquared(const PowerLaw& law, absl::Span<const ScalingPoint> points);

// Predictions, R^2 and errors on both sets; `verify` may be empty.
Verification VerifyPowerLaw(const PowerLaw& law,
                            absl::Span<const ScalingPoint> fit,
                            absl::Span<const ScalingPoint> verify);

struct PointSplit {
  std::vector<ScalingPoint> fit;
  std::vector<ScalingPoint> verify;
};

// Held-out set = the points with N > n_above; the rest are fitted. Order is
// kept within each set.
PointSplit SplitByN(absl::Span<const ScalingPoint> points, double n_above);

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_VERIFY_H_
