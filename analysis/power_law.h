// The separable scaling law L(N, D) = E + A/N^alpha + B/D^beta and the
// Chinchilla approach-3 objective it is fitted with.
//
// In log space (a = ln A, b = ln B, e = ln E) the prediction is
//   ln L(N, D) = LSE(a - alpha ln N, b - beta ln D, e)
// and the objective over points i is the SUM (not the mean) of
//   Huber_delta(LSE_i - ln L_i),  delta = 1e-3 by default,
// as in Hoffmann et al. 2022 (App. D.2) and Epoch's replication. The
// objective is the fit's hot loop: it is evaluated in SIMD lanes with a
// branch-free exp/log (analysis/internal/fast_math.h), four lanes with AVX2
// and FMA (picked at run time), two otherwise; values agree with a plain
// std::exp/std::log evaluation to ~1e-15 relative.
//
// Thread-safety: plain value types and const objects; HuberLogObjective is
// immutable after construction, so one instance may be evaluated from many
// threads at once.
//
//   std::vector<ScalingPoint> points = ...;  // N params, D tokens, loss
//   HLAB_RETURN_IF_ERROR(ValidatePoints(points));
//   HuberLogObjective objective(points, /*delta=*/1e-3);
//   double x[kNumLogParams] = {6.0, 6.0, 0.5, 0.34, 0.28};  // a b e alpha beta
//   double grad[kNumLogParams];
//   double f = objective.Evaluate(x, grad);
#ifndef HLAB_ANALYSIS_POWER_LAW_H_
#define HLAB_ANALYSIS_POWER_LAW_H_

#include <cstddef>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace hlab::analysis {

// One training run: N (non-embedding parameters), D (training tokens) and its
// final loss (or any positive target, e.g. log LongPPL).
struct ScalingPoint {
  double n = 0;
  double d = 0;
  double loss = 0;
};

// L(N, D) = E + A/N^alpha + B/D^beta, in natural units.
struct PowerLaw {
  double E = 0;
  double A = 0;
  double alpha = 0;
  double B = 0;
  double beta = 0;
  // ln A and ln B when known (ToPowerLaw sets them). A fit whose N or D term
  // vanishes (alpha or beta run off) can have A or B beyond a double's range
  // (inf) while ln A is finite; Predict then computes that term as
  // exp(ln A - alpha ln n) instead of inf * 0. Used only when A (B) is inf.
  double log_A = std::numeric_limits<double>::quiet_NaN();
  double log_B = std::numeric_limits<double>::quiet_NaN();

  // The predicted loss at (n, d); n, d > 0.
  double Predict(double n, double d) const;
};

// The same law in the log parametrisation the optimiser works in.
struct LogPowerLaw {
  double a = 0;  // ln A
  double b = 0;  // ln B
  double e = 0;  // ln E
  double alpha = 0;
  double beta = 0;
};

// The objective's kernels take this many points per step (arrays are padded).
inline constexpr int kPointsPerStep = 4;

// The optimiser's parameter vector is (a, b, e, alpha, beta), in this order.
inline constexpr int kNumLogParams = 5;
enum LogParamIndex { kParamA = 0, kParamB, kParamE, kParamAlpha, kParamBeta };

PowerLaw ToPowerLaw(const LogPowerLaw& law);
// Requires E, A, B > 0 (a zero coefficient maps to -inf).
LogPowerLaw ToLogPowerLaw(const PowerLaw& law);
void ToVector(const LogPowerLaw& law, double* x);
LogPowerLaw FromVector(const double* x);

// ln L(N, D) under `law`, computed stably with log-sum-exp.
double PredictLog(const LogPowerLaw& law, double n, double d);

// The Huber loss: r^2/2 for |r| <= delta, delta (|r| - delta/2) beyond.
double Huber(double r, double delta);

// Checks that the points can be fitted: at least `min_points`, and every N, D
// and loss finite and > 0. InvalidArgument names the first bad point and
// field ("point 3: D = -1 must be finite and > 0"), or the count.
absl::Status ValidatePoints(absl::Span<const ScalingPoint> points,
                            size_t min_points = 5);

// The summed Huber objective in log space with its analytic gradient.
class HuberLogObjective {
 public:
  // Copies what it needs from `points` (which must be valid; see
  // ValidatePoints). delta > 0.
  HuberLogObjective(absl::Span<const ScalingPoint> points, double delta);

  // Returns the objective at x = (a, b, e, alpha, beta); writes the gradient
  // to `gradient` (kNumLogParams values) when it is not null. Deterministic:
  // the summation order depends only on the points and the kernel.
  double Evaluate(const double* x, double* gradient) const;

  // Evaluate with the portable two-lane kernel even where the AVX2 one would
  // run: for tests of the fallback and comparisons between the kernels.
  double EvaluatePortable(const double* x, double* gradient) const;

  // The residuals LSE_i - ln L_i at x, one per point.
  std::vector<double> Residuals(const double* x) const;

  size_t num_points() const { return num_points_; }
  double delta() const { return delta_; }

 private:
  size_t num_points_;
  std::vector<double> log_n_;  // ln N_i, padded to kPointsPerStep
  std::vector<double> log_d_;
  std::vector<double> log_loss_;
  std::vector<double> weight_;  // 1 per point, 0 on the padding
  double delta_;
};

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_POWER_LAW_H_
