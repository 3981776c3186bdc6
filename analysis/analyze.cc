#include "analysis/analyze.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hlab::analysis {
namespace {

using Json = nlohmann::ordered_json;

Json LawToJson(const PowerLaw& law) {
  return Json{{"E", law.E},
              {"A", law.A},
              {"alpha", law.alpha},
              {"B", law.B},
              {"beta", law.beta}};
}

Json IntervalToJson(const Interval& interval) {
  return Json{{"lower", interval.lower},
              {"upper", interval.upper},
              {"median", interval.median},
              {"std_error", interval.std_error}};
}

// A bound that is not finite (an open side) as null.
Json Bound(double value) {
  return std::isfinite(value) ? Json(value) : Json(nullptr);
}

Json ProfileIntervalToJson(const ProfileInterval& interval) {
  return Json{{"estimate", interval.estimate},
              {"lower", Bound(interval.lower)},
              {"upper", Bound(interval.upper)},
              {"bounded_below", interval.bounded_below},
              {"bounded_above", interval.bounded_above}};
}

// `intervals`, when given, holds one prediction interval per point.
Json PredictionsToJson(const std::vector<PointPrediction>& predictions,
                       const std::vector<PredictionInterval>* intervals) {
  Json out = Json::array();
  for (size_t i = 0; i < predictions.size(); ++i) {
    const PointPrediction& p = predictions[i];
    Json j{{"N", p.point.n},
           {"D", p.point.d},
           {"loss", p.point.loss},
           {"predicted", p.predicted},
           {"relative_error", p.relative_error}};
    if (intervals != nullptr && i < intervals->size()) {
      const ProfileInterval& ci = (*intervals)[i].interval;
      j["lower"] = Bound(ci.lower);
      j["upper"] = Bound(ci.upper);
    }
    out.push_back(std::move(j));
  }
  return out;
}

// "[lo, hi]", a side the data do not bound marked with '*'.
std::string FormatInterval(const ProfileInterval& ci) {
  return absl::StrFormat("[%.6g%s, %.6g%s]", ci.lower,
                         ci.bounded_below ? "" : "*", ci.upper,
                         ci.bounded_above ? "" : "*");
}

const char* LossName(VarProLoss loss) {
  return loss == VarProLoss::kHuber ? "huber_relative" : "squares_relative";
}

// The rule for a coefficient outside the start grid (PowerLawReport::notes):
// with the VarPro fit in agreement, its warning becomes a note.
void ConfirmOutsideGrid(const std::vector<std::string>& outside_grid,
                        PowerLawReport* report) {
  for (const std::string& w : outside_grid) {
    auto it = std::find(report->warnings.begin(), report->warnings.end(), w);
    if (it == report->warnings.end()) continue;
    report->warnings.erase(it);
    report->notes.push_back(absl::StrCat(
        w,
        "; the VarPro fit, which searches every E, A, B >= 0, reaches the "
        "same optimum"));
  }
}

}  // namespace

absl::StatusOr<PowerLawReport> AnalyzePowerLaw(
    absl::Span<const ScalingPoint> fit_points,
    absl::Span<const ScalingPoint> verify_points,
    const AnalysisOptions& options) {
  if (auto s = ValidatePoints(verify_points, 0); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("verify ", s.message()));
  }
  PowerLawReport report;
  auto fit = FitPowerLaw(fit_points, options.fit);
  if (!fit.ok()) return fit.status();
  report.fit = *std::move(fit);
  const FitResult& f = report.fit;
  report.E = f.law.E;
  report.A = f.law.A;
  report.alpha = f.law.alpha;
  report.B = f.law.B;
  report.beta = f.law.beta;
  report.a = f.log_law.a;
  report.b = f.log_law.b;
  report.e = f.log_law.e;
  report.objective = f.objective;
  report.gradient_norm = f.gradient_norm;
  report.n_points = fit_points.size();
  report.n_verify_points = verify_points.size();
  report.warnings = f.warnings;

  if (options.run_varpro) {
    VarProOptions varpro_options = options.varpro;
    varpro_options.huber_delta = options.fit.huber_delta;
    auto varpro = FitPowerLawVarPro(fit_points, varpro_options);
    if (!varpro.ok()) return varpro.status();
    for (const std::string& w : varpro->warnings) {
      report.warnings.push_back(absl::StrCat("VarPro: ", w));
    }
    report.agreement =
        CompareFits(f.law, varpro->law, fit_points, options.agreement);
    if (!report.agreement->agree) {
      report.warnings.push_back(absl::StrCat(
          "the L-BFGS and VarPro fits disagree: ", report.agreement->summary));
    } else {
      ConfirmOutsideGrid(f.outside_grid, &report);
    }
    report.varpro = *std::move(varpro);
  }

  if (options.run_intervals && fit_points.size() <= 5) {
    report.warnings.push_back(
        "no confidence intervals: they need at least 6 points (5 "
        "coefficients and the noise)");
  } else if (options.run_intervals) {
    ProfileOptions profile = options.intervals;
    profile.threads = options.fit.threads;
    profile.predict_at.clear();
    for (const ScalingPoint& p : verify_points) {
      profile.predict_at.push_back({p.n, p.d});
    }
    profile.predict_at.insert(profile.predict_at.end(),
                              options.predict_at.begin(),
                              options.predict_at.end());
    auto intervals = ProfileLikelihoodIntervals(fit_points, profile);
    if (!intervals.ok()) return intervals.status();
    // The held-out points' intervals stay in `intervals`, the further
    // sites' go to `predictions`.
    std::vector<PredictionInterval>& all = intervals->predictions;
    report.predictions.assign(all.begin() + verify_points.size(), all.end());
    all.resize(verify_points.size());
    report.intervals = *std::move(intervals);
    // The intervals assume Gaussian relative noise and are centred on the
    // least-squares fit; outliers pull that away from the Huber fit.
    const ProfileResult& ci = *report.intervals;
    const std::pair<const char*, std::pair<const ProfileInterval*, double>>
        checks[] = {{"E", {&ci.E, f.law.E}},
                    {"A", {&ci.A, f.law.A}},
                    {"alpha", {&ci.alpha, f.law.alpha}},
                    {"B", {&ci.B, f.law.B}},
                    {"beta", {&ci.beta, f.law.beta}}};
    std::vector<std::string> outside;
    for (const auto& [name, check] : checks) {
      if (!check.first->Contains(check.second)) outside.push_back(name);
    }
    if (!outside.empty()) {
      const PowerLaw& ls = ci.least_squares;
      report.warnings.push_back(absl::StrFormat(
          "the Huber fit's %s lie(s) outside the %.0f%% profile-likelihood "
          "intervals, which are centred on the least-squares fit (E=%.6g "
          "A=%.6g alpha=%.6g B=%.6g beta=%.6g): the residuals look "
          "heavier-tailed than the Gaussian noise the intervals assume, so "
          "look at the residuals before trusting either",
          absl::StrJoin(outside, ", "), 100 * ci.confidence, ls.E, ls.A,
          ls.alpha, ls.B, ls.beta));
    }
  }

  if (options.bootstrap.resamples > 0) {
    auto boot =
        BootstrapPowerLaw(fit_points, f, options.fit, options.bootstrap);
    if (!boot.ok()) return boot.status();
    if (boot->failed > 0) {
      report.warnings.push_back(
          absl::StrCat(boot->failed, " of ", options.bootstrap.resamples,
                       " bootstrap refits failed and were left out"));
    }
    report.bootstrap = *std::move(boot);
  }

  report.verification = VerifyPowerLaw(f.law, fit_points, verify_points);
  report.r2_fit = report.verification.r2_fit;
  report.r2_verify = report.verification.r2_verify;
  if (!verify_points.empty() && !report.r2_verify.has_value()) {
    report.warnings.push_back(
        "R^2 on the held-out points is undefined (fewer than 2 points or no "
        "variance in their loss)");
  }
  return report;
}

std::string PowerLawReportToJson(const PowerLawReport& report, int indent) {
  const FitResult& f = report.fit;
  Json j;
  j["E"] = report.E;
  j["A"] = report.A;
  j["alpha"] = report.alpha;
  j["B"] = report.B;
  j["beta"] = report.beta;
  j["a"] = report.a;
  j["b"] = report.b;
  j["e"] = report.e;
  j["objective"] = report.objective;
  j["gradient_norm"] = report.gradient_norm;
  j["r2_fit"] = report.r2_fit;
  if (report.r2_verify.has_value()) j["r2_verify"] = *report.r2_verify;
  j["n_points"] = report.n_points;
  j["n_verify_points"] = report.n_verify_points;
  j["warnings"] = report.warnings;
  j["notes"] = report.notes;
  j["fit"] =
      Json{{"method", "multi-start L-BFGS (Ceres), summed Huber"},
           {"n_starts", f.n_starts},
           {"best_start", f.best_start},
           {"best_start_params", Json{{"a", f.best_start_params.a},
                                      {"b", f.best_start_params.b},
                                      {"e", f.best_start_params.e},
                                      {"alpha", f.best_start_params.alpha},
                                      {"beta", f.best_start_params.beta}}},
           {"n_starts_at_best", f.n_starts_at_best},
           {"iterations", f.iterations},
           {"termination", f.termination},
           {"condition_number", f.condition_number}};
  if (report.varpro.has_value()) {
    Json v = LawToJson(report.varpro->law);
    v["loss"] = LossName(report.varpro->loss);
    v["objective"] = report.varpro->objective;
    v["log_huber_objective"] = report.varpro->log_huber_objective;
    v["evaluations"] = report.varpro->evaluations;
    j["varpro"] = std::move(v);
  }
  if (report.agreement.has_value()) {
    j["agreement"] =
        Json{{"agree", report.agreement->agree},
             {"alpha_diff", report.agreement->alpha_diff},
             {"beta_diff", report.agreement->beta_diff},
             {"max_prediction_rdiff", report.agreement->max_prediction_rdiff}};
  }
  if (report.intervals.has_value()) {
    const ProfileResult& p = *report.intervals;
    Json predictions = Json::array();
    for (const PredictionInterval& q : p.predictions) {
      Json one = ProfileIntervalToJson(q.interval);
      one["N"] = q.site.n;
      one["D"] = q.site.d;
      predictions.push_back(std::move(one));
    }
    j["intervals"] =
        Json{{"method", "profile likelihood (F test), relative residuals"},
             {"confidence", p.confidence},
             {"dof", p.dof},
             {"sigma", p.sigma},
             {"least_squares", LawToJson(p.least_squares)},
             {"E", ProfileIntervalToJson(p.E)},
             {"A", ProfileIntervalToJson(p.A)},
             {"alpha", ProfileIntervalToJson(p.alpha)},
             {"B", ProfileIntervalToJson(p.B)},
             {"beta", ProfileIntervalToJson(p.beta)},
             {"predictions", std::move(predictions)}};
  }
  if (report.bootstrap.has_value()) {
    const BootstrapResult& boot = *report.bootstrap;
    j["bootstrap"] = Json{
        {"resamples", boot.resamples},   {"failed", boot.failed},
        {"confidence", boot.confidence}, {"E", IntervalToJson(boot.E)},
        {"A", IntervalToJson(boot.A)},   {"alpha", IntervalToJson(boot.alpha)},
        {"B", IntervalToJson(boot.B)},   {"beta", IntervalToJson(boot.beta)}};
  }
  const Verification& v = report.verification;
  Json verification{{"r2_fit", v.r2_fit},
                    {"rmse_fit", v.rmse_fit},
                    {"fit_points", PredictionsToJson(v.fit_points, nullptr)}};
  if (!v.verify_points.empty()) {
    verification["verify_points"] = PredictionsToJson(
        v.verify_points,
        report.intervals ? &report.intervals->predictions : nullptr);
    verification["mean_abs_relative_error_verify"] =
        *v.mean_abs_relative_error_verify;
    verification["max_abs_relative_error_verify"] =
        *v.max_abs_relative_error_verify;
  }
  j["verification"] = std::move(verification);
  return j.dump(indent);
}

std::string FormatPowerLawReport(const PowerLawReport& report) {
  const FitResult& f = report.fit;
  std::ostringstream out;
  out << absl::StrFormat(
      "L(N, D) = E + A/N^alpha + B/D^beta fitted to %d points "
      "(summed Huber of log residuals; L-BFGS from %d starts, best #%d, "
      "%d starts reached it)\n",
      report.n_points, f.n_starts, f.best_start, f.n_starts_at_best);
  const BootstrapResult* boot =
      report.bootstrap.has_value() ? &*report.bootstrap : nullptr;
  const ProfileResult* ci =
      report.intervals.has_value() ? &*report.intervals : nullptr;
  if (boot != nullptr || ci != nullptr) {
    out << absl::StrFormat("  %-6s %-18s", "", "value");
    if (ci != nullptr) {
      out << absl::StrFormat(" %-30s",
                             absl::StrFormat("%.0f%% CI (profile likelihood)",
                                             100 * ci->confidence));
    }
    if (boot != nullptr) {
      out << absl::StrFormat(" %.0f%% CI (%d bootstrap resamples)",
                             100 * boot->confidence, boot->resamples);
    }
    out << "\n";
  }
  struct Row {
    const char* name;
    double value;
    const ProfileInterval* profile;
    const Interval* bootstrap;
  };
  const Row rows[] = {
      {"E", report.E, ci ? &ci->E : nullptr, boot ? &boot->E : nullptr},
      {"A", report.A, ci ? &ci->A : nullptr, boot ? &boot->A : nullptr},
      {"alpha", report.alpha, ci ? &ci->alpha : nullptr,
       boot ? &boot->alpha : nullptr},
      {"B", report.B, ci ? &ci->B : nullptr, boot ? &boot->B : nullptr},
      {"beta", report.beta, ci ? &ci->beta : nullptr,
       boot ? &boot->beta : nullptr}};
  bool any_open = false;
  for (const Row& row : rows) {
    out << absl::StrFormat("  %-6s %-18.10g", row.name, row.value);
    if (row.profile != nullptr) {
      out << absl::StrFormat(" %-30s", FormatInterval(*row.profile));
      any_open |= !row.profile->bounded_below || !row.profile->bounded_above;
    }
    if (row.bootstrap != nullptr) {
      out << absl::StrFormat(" [%.6g, %.6g]", row.bootstrap->lower,
                             row.bootstrap->upper);
    }
    out << "\n";
  }
  if (ci != nullptr) {
    const PowerLaw& ls = ci->least_squares;
    out << absl::StrFormat(
        "  profile intervals: least squares on relative residuals, noise "
        "%.3g%% (%d dof), centred on E=%.6g A=%.6g alpha=%.6g B=%.6g "
        "beta=%.6g\n",
        100 * ci->sigma, ci->dof, ls.E, ls.A, ls.alpha, ls.B, ls.beta);
    if (any_open) {
      out << "  * not bounded by the data: the profile stays inside out to "
             "0 (E, A, B), to the exponent search range (alpha, beta), or "
             "A's (B's) upper end follows alpha's (beta's)\n";
    }
  }
  if (boot != nullptr) {
    out << "  bootstrap: percentile intervals, which under-cover on small "
           "grids (docs/analysis.md, \"Intervals\")\n";
  }
  out << absl::StrFormat(
      "  a = ln A = %.10g, b = ln B = %.10g, e = ln E = %.10g\n", report.a,
      report.b, report.e);
  out << absl::StrFormat("  objective %.12g, final gradient norm %.3g (%s)\n",
                         report.objective, report.gradient_norm, f.termination);
  out << absl::StrFormat("  R^2 (fit, on L) %.6f, RMSE %.4g\n", report.r2_fit,
                         report.verification.rmse_fit);
  const Verification& v = report.verification;
  if (!v.verify_points.empty()) {
    out << absl::StrFormat("Held-out points: %d", v.verify_points.size());
    if (report.r2_verify.has_value()) {
      out << absl::StrFormat(", R^2 %.6f", *report.r2_verify);
    }
    out << absl::StrFormat(", mean |relative error| %.4f%%, max %.4f%%\n",
                           100 * *v.mean_abs_relative_error_verify,
                           100 * *v.max_abs_relative_error_verify);
    out << absl::StrFormat(
        "  %-12s %-12s %-10s %-10s %-11s %s\n", "N", "D", "loss", "predicted",
        "rel. error",
        ci != nullptr
            ? absl::StrFormat("%.0f%% CI (profile)", 100 * ci->confidence)
            : std::string());
    for (size_t i = 0; i < v.verify_points.size(); ++i) {
      const PointPrediction& p = v.verify_points[i];
      out << absl::StrFormat(
          "  %-12.4g %-12.4g %-10.5g %-10.5g %-11s", p.point.n, p.point.d,
          p.point.loss, p.predicted,
          absl::StrFormat("%+.3f%%", 100 * p.relative_error));
      if (ci != nullptr && i < ci->predictions.size()) {
        out << " " << FormatInterval(ci->predictions[i].interval);
      }
      out << "\n";
    }
  }
  if (report.varpro.has_value()) {
    const VarProResult& vp = *report.varpro;
    out << absl::StrFormat(
        "VarPro cross-check (NNLS for E, A, B; %s loss): E=%.6g A=%.6g "
        "alpha=%.6g B=%.6g beta=%.6g\n",
        LossName(vp.loss), vp.law.E, vp.law.A, vp.law.alpha, vp.law.B,
        vp.law.beta);
    if (report.agreement.has_value()) {
      out << absl::StrFormat("  %s: %s\n",
                             report.agreement->agree ? "agrees" : "DISAGREES",
                             report.agreement->summary);
    }
  }
  if (report.warnings.empty()) {
    out << "Warnings: none\n";
  } else {
    out << "Warnings:\n";
    for (const std::string& w : report.warnings) out << "  - " << w << "\n";
  }
  if (!report.notes.empty()) {
    out << "Notes:\n";
    for (const std::string& n : report.notes) out << "  - " << n << "\n";
  }
  return out.str();
}

}  // namespace hlab::analysis
