#include "analysis/verify.h"

#include <algorithm>
#include <cmath>

namespace hlab::analysis {
namespace {

std::vector<PointPrediction> Predict(const PowerLaw& law,
                                     absl::Span<const ScalingPoint> points) {
  std::vector<PointPrediction> out;
  out.reserve(points.size());
  for (const ScalingPoint& p : points) {
    const double predicted = law.Predict(p.n, p.d);
    out.push_back({p, predicted, (predicted - p.loss) / p.loss});
  }
  return out;
}

}  // namespace

double RSquared(const PowerLaw& law, absl::Span<const ScalingPoint> points) {
  if (points.size() < 2) return std::nan("");
  double mean = 0;
  for (const ScalingPoint& p : points) mean += p.loss;
  mean /= points.size();
  double ss_res = 0, ss_tot = 0;
  for (const ScalingPoint& p : points) {
    const double r = p.loss - law.Predict(p.n, p.d);
    ss_res += r * r;
    ss_tot += (p.loss - mean) * (p.loss - mean);
  }
  if (ss_tot == 0) return std::nan("");
  return 1.0 - ss_res / ss_tot;
}

Verification VerifyPowerLaw(const PowerLaw& law,
                            absl::Span<const ScalingPoint> fit,
                            absl::Span<const ScalingPoint> verify) {
  Verification v;
  v.fit_points = Predict(law, fit);
  v.r2_fit = RSquared(law, fit);
  double ss = 0;
  for (const PointPrediction& p : v.fit_points) {
    ss += (p.predicted - p.point.loss) * (p.predicted - p.point.loss);
  }
  v.rmse_fit = fit.empty() ? std::nan("") : std::sqrt(ss / fit.size());
  if (verify.empty()) return v;
  v.verify_points = Predict(law, verify);
  const double r2 = RSquared(law, verify);
  if (std::isfinite(r2)) v.r2_verify = r2;
  double sum_abs = 0, max_abs = 0;
  for (const PointPrediction& p : v.verify_points) {
    sum_abs += std::abs(p.relative_error);
    max_abs = std::max(max_abs, std::abs(p.relative_error));
  }
  v.mean_abs_relative_error_verify = sum_abs / verify.size();
  v.max_abs_relative_error_verify = max_abs;
  return v;
}

PointSplit SplitByN(absl::Span<const ScalingPoint> points, double n_above) {
  PointSplit split;
  for (const ScalingPoint& p : points) {
    (p.n > n_above ? split.verify : split.fit).push_back(p);
  }
  return split;
}

}  // namespace hlab::analysis
