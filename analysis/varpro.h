// FitPowerLawVarPro: a variable-projection fit of L = E + A/N^alpha +
// B/D^beta, the cross-check for FitPowerLaw's multi-start L-BFGS.
//
// For fixed (alpha, beta) the model is linear in (E, A, B), so they are
// solved exactly under E, A, B >= 0 (NNLS with the design [1, N^-alpha,
// D^-beta]); only (alpha, beta) are searched: a grid, then Nelder-Mead from
// the best grid point. It shares no code path with the L-BFGS fit, so
// agreement means neither optimiser stopped early or in a poor basin.
//
// The residual is relative, (L-hat - L)/L, i.e. rows weighted by 1/L: to
// first order it equals the log residual ln L-hat - ln L that FitPowerLaw
// uses. With the default loss kHuber each (alpha, beta) minimises the summed
// Huber of relative residuals (same delta) by iteratively reweighted NNLS,
// so both methods target (nearly) the same estimator; kSquares is plain
// weighted least squares (one NNLS per point, the textbook VPNLS).
//
// Thread-safety: reentrant; runs on the calling thread.
//
//   HLAB_ASSIGN_OR_RETURN(VarProResult vp, FitPowerLawVarPro(points));
//   FitAgreement agree = CompareFits(fit.law, vp.law, points, {});
//   if (!agree.agree) std::cerr << agree.summary << "\n";
#ifndef HLAB_ANALYSIS_VARPRO_H_
#define HLAB_ANALYSIS_VARPRO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

enum class VarProLoss {
  kHuber,    // summed Huber(delta) of relative residuals, by IRLS
  kSquares,  // sum of squared relative residuals
};

struct VarProOptions {
  VarProLoss loss = VarProLoss::kHuber;
  double huber_delta = 1e-3;
  // The (alpha, beta) grid: grid_size values each, evenly spaced. The range
  // is the profile likelihood's (ProfileOptions: exponents up to 3), so a
  // law whose exponent lies past the L-BFGS start grid's 2 can be confirmed
  // rather than reported as a disagreement at VarPro's own edge; 48 values
  // keep the spacing of the earlier 32 over [0.01, 2] (0.064).
  double exponent_min = 0.01;
  double exponent_max = 3.0;
  int grid_size = 48;
  // IRLS iterations per (alpha, beta) on the grid and in the refinement
  // (kHuber only); IRLS stops earlier once the objective changes by less
  // than 1e-13 relative.
  int grid_irls_iterations = 30;
  int refine_irls_iterations = 500;
  // Nelder-Mead stops when the simplex spans less than this in alpha and
  // beta, or after max_refine_iterations.
  double refine_tolerance = 1e-9;
  int max_refine_iterations = 2000;
};

struct VarProResult {
  PowerLaw law;
  VarProLoss loss = VarProLoss::kHuber;
  double objective = 0;  // of `loss` on relative residuals at `law`
  // FitPowerLaw's objective (summed Huber of log residuals) at `law`, for a
  // like-for-like comparison with the L-BFGS fit.
  double log_huber_objective = 0;
  int evaluations = 0;  // (alpha, beta) points evaluated
  // E.g. "VarPro optimum alpha = 2 is on the edge of its search range".
  std::vector<std::string> warnings;
};

// InvalidArgument as ValidatePoints, or for invalid options.
absl::StatusOr<VarProResult> FitPowerLawVarPro(
    absl::Span<const ScalingPoint> points, const VarProOptions& options = {});

// When two fits of the same points count as agreeing.
struct AgreementTolerance {
  double exponent_atol = 0.05;    // |alpha1 - alpha2|, |beta1 - beta2|
  double prediction_rtol = 0.01;  // max_i |L1(i) - L2(i)| / L_i
};

struct FitAgreement {
  double alpha_diff = 0;  // absolute
  double beta_diff = 0;
  double max_prediction_rdiff = 0;  // over the points
  bool agree = true;
  std::string summary;  // one line with the figures
};

// Compares the exponents and the predictions at `points` of two laws.
FitAgreement CompareFits(const PowerLaw& first, const PowerLaw& second,
                         absl::Span<const ScalingPoint> points,
                         const AgreementTolerance& tolerance);

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_VARPRO_H_
