// AnalyzePowerLaw: the whole fitting procedure for one architecture and
// target, and its report as text or JSON.
//
// Runs, in order: the multi-start L-BFGS fit (analysis/fit.h) on the fit
// points; the variable-projection cross-check (analysis/varpro.h) and their
// comparison; profile-likelihood CIs for the coefficients and for the
// predictions at the held-out points (analysis/profile.h: the intervals that
// cover the truth at their nominal rate, docs/analysis.md); bootstrap CIs
// (analysis/bootstrap.h) unless resamples is 0; verification on held-out
// points (analysis/verify.h). Every warning of the steps is collected in
// PowerLawReport::warnings.
//
// Thread-safety: reentrant; the report is a plain value.
//
//   AnalysisOptions options;
//   options.fit.threads = options.bootstrap.threads = 2;
//   HLAB_ASSIGN_OR_RETURN(PowerLawReport report,
//                         AnalyzePowerLaw(split.fit, split.verify, options));
//   std::cout << FormatPowerLawReport(report);
//   std::string json = PowerLawReportToJson(report);
#ifndef HLAB_ANALYSIS_ANALYZE_H_
#define HLAB_ANALYSIS_ANALYZE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/bootstrap.h"
#include "analysis/fit.h"
#include "analysis/power_law.h"
#include "analysis/profile.h"
#include "analysis/varpro.h"
#include "analysis/verify.h"

namespace hlab::analysis {

struct AnalysisOptions {
  FitOptions fit;
  bool run_varpro = true;
  VarProOptions varpro;
  AgreementTolerance agreement;
  // Profile-likelihood intervals (with fewer than 6 fit points there are
  // none, and a warning says so). Its predict_at is replaced by the
  // held-out points; threads by fit.threads.
  bool run_intervals = true;
  ProfileOptions intervals;
  BootstrapOptions bootstrap;  // resamples = 0 skips the bootstrap
  // Further places to predict with an interval, e.g. runs not finished yet
  // (PowerLawReport::predictions).
  std::vector<PredictionSite> predict_at;
};

struct PowerLawReport {
  // The L-BFGS fit (copied from `fit` for convenience).
  double E = 0, A = 0, alpha = 0, B = 0, beta = 0;
  double a = 0, b = 0, e = 0;
  double objective = 0;
  double gradient_norm = 0;
  double r2_fit = 0;
  std::optional<double> r2_verify;
  size_t n_points = 0;         // fitted points
  size_t n_verify_points = 0;  // held-out points
  // Every step's warnings, e.g. disagreement between the two methods.
  std::vector<std::string> warnings;
  // Findings that are not warnings: a coefficient outside the L-BFGS start
  // grid's range at an optimum that the VarPro fit reaches too. The grid
  // warning exists because the multi-start search might have missed a
  // better optimum outside the grid; VarPro searches every E, A, B >= 0
  // (for alpha and beta in its range) and so rules that out.
  std::vector<std::string> notes;

  FitResult fit;
  std::optional<VarProResult> varpro;
  std::optional<FitAgreement> agreement;
  // The calibrated intervals: coefficients, and one prediction per held-out
  // point in order.
  std::optional<ProfileResult> intervals;
  // One per AnalysisOptions::predict_at, in order, when the profile
  // intervals ran (empty otherwise): the least-squares prediction and its
  // profile-likelihood interval.
  std::vector<PredictionInterval> predictions;
  std::optional<BootstrapResult> bootstrap;
  Verification verification;
};

// InvalidArgument when the fit points fail ValidatePoints (naming the point
// and field), a held-out point is invalid ("verify point 2: ..."), or an
// option is invalid.
absl::StatusOr<PowerLawReport> AnalyzePowerLaw(
    absl::Span<const ScalingPoint> fit_points,
    absl::Span<const ScalingPoint> verify_points,
    const AnalysisOptions& options = {});

// One JSON object: E, A, alpha, B, beta, a, b, e, objective, gradient_norm,
// r2_fit, r2_verify (only with held-out points), n_points, warnings, and the
// objects "fit", "varpro", "agreement", "intervals" (profile-likelihood CIs;
// an unbounded end is null), "bootstrap" (percentile CIs), "verification"
// (per-point predictions, with their interval when there is one). `indent` < 0
// gives one line.
std::string PowerLawReportToJson(const PowerLawReport& report, int indent = -1);

// A human-readable report: coefficients with CIs (profile likelihood, then
// the bootstrap's when it ran), objective, gradient norm, R^2, the VarPro
// cross-check, held-out errors and prediction intervals, and warnings.
std::string FormatPowerLawReport(const PowerLawReport& report);

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_ANALYZE_H_
