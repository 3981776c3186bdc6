// Run selection for a scaling-law grid: how much measuring one more run
// would narrow the fitted law's predictions in a target region (issue #24,
// points 3 and 5; docs/analysis.md, "Choosing the next run").
//
// The criterion is V-optimal design, linearised at the current fit. Near the
// fitted log-space parameters theta = (a, b, e, alpha, beta), ln L-hat is
// linear in theta with gradient
//   g(N, D) = (w_N, w_D, w_E, -w_N ln N, -w_D ln D),
//   w_N = A N^-alpha / L, w_D = B D^-beta / L, w_E = E / L,
// and with independent log residuals of a common variance sigma^2 the
// covariance of theta-hat is sigma^2 M^-1, M = sum_i g_i g_i^T over the
// measured points (with its columns scaled to a unit diagonal, plus a ridge
// of 1e-12 there, so that a direction the data do not determine has a large
// but finite variance). The target-region
// uncertainty is
//   U = sum_t g_t^T M^-1 g_t             (in units of sigma^2)
// and measuring a candidate c reduces it, by Sherman-Morrison, by
//   dU(c) = sum_t (g_t^T M^-1 g_c)^2 / (1 + g_c^T M^-1 g_c).
// A scheduler ranks candidates by dU(c) / cost(c). sigma^2 is common to
// every candidate of one law, so it drops out of the ranking; across laws
// (architectures) the log residuals' variance is taken to be the same.
//
// This is the within-optimum uncertainty that "Spend Less, Fit Better"
// (arXiv 2604.22753) finds to matter; it ignores the spread between optima,
// and it trusts the current fit's curvature, so it is only as good as that
// fit: callers use it once the law is identifiable (see Identifiable).
//
// Thread-safety: LinearisedLaw is immutable after Create; const methods may
// be called from many threads.
//
//   HLAB_ASSIGN_OR_RETURN(LinearisedLaw lin,
//                         LinearisedLaw::Create(fit.law, measured));
//   double gain = lin.VarianceReduction(candidate, targets) / cost;
#ifndef HLAB_ANALYSIS_RUN_SELECTION_H_
#define HLAB_ANALYSIS_RUN_SELECTION_H_

#include <array>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

// A run's place in the grid: N (non-embedding parameters), D (tokens).
struct DesignPoint {
  double n = 0;
  double d = 0;
};

// Whether points at these (N, D) can determine a five-coefficient law: at
// least 5 points, at least `min_n_levels` distinct N and 2 distinct D.
bool Identifiable(absl::Span<const DesignPoint> points, int min_n_levels = 3);

class LinearisedLaw {
 public:
  // `law` is the current fit (E may be 0, and A or B beyond a double's range
  // when log_A or log_B is set); `measured` the points it was fitted on.
  // InvalidArgument when a point's N or D is not finite and > 0, or the
  // law's exponents are not finite.
  static absl::StatusOr<LinearisedLaw> Create(
      const PowerLaw& law, absl::Span<const DesignPoint> measured);

  // U above: the summed variance of ln L-hat over `targets`, in units of
  // the log residuals' variance.
  double TargetVariance(absl::Span<const DesignPoint> targets) const;

  // dU above: by how much measuring `candidate` would lower
  // TargetVariance(targets). >= 0.
  double VarianceReduction(const DesignPoint& candidate,
                           absl::Span<const DesignPoint> targets) const;

  // g(N, D) above.
  std::array<double, kNumLogParams> Gradient(const DesignPoint& p) const;

 private:
  LinearisedLaw() = default;
  // g in the centred parametrisation (a - alpha c_N, b - beta c_D, e, alpha,
  // beta), c the measured points' mean ln N and ln D: the same predictive
  // variances, with far less collinear columns (w_N and w_N ln N are nearly
  // parallel over a grid's few octaves of N).
  std::array<double, kNumLogParams> CentredGradient(const DesignPoint& p) const;
  // M^-1 v, in the centred parametrisation.
  std::array<double, kNumLogParams> Solve(
      const std::array<double, kNumLogParams>& v) const;

  double log_a_ = 0, log_b_ = 0, log_e_ = 0, alpha_ = 0, beta_ = 0;
  double center_n_ = 0, center_d_ = 0;
  // M's column scales (the square roots of its diagonal) and the Cholesky
  // factor of the scaled matrix plus its ridge (lower triangle, row-major).
  std::array<double, kNumLogParams> scale_{};
  std::array<double, kNumLogParams * kNumLogParams> chol_{};
};

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_RUN_SELECTION_H_
