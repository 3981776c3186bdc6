#include "fits/sweep_fits.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "fits/run_figures.h"

namespace hlab::fits {
namespace {

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& list,
              const std::string& s) {
  for (const std::string& x : list) {
    if (x == s) return true;
  }
  return false;
}

nlohmann::ordered_json IntervalJson(const analysis::Interval& i) {
  return nlohmann::ordered_json::array({i.lower, i.upper});
}

// The predictions of a fitted SweepFit at `runs` (its
// report.predictions, when the profile intervals ran, are at these runs in
// order).
std::vector<store::Prediction> PredictRuns(
    const SweepFit& fit, const std::vector<const RunFigures*>& runs) {
  const analysis::PowerLawReport& report = fit.report;
  std::vector<store::Prediction> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunFigures& r = *runs[i];
    store::Prediction p;
    p.run_id = r.run_id;
    p.target = fit.target;
    p.n_points = fit.n_fit;
    if (i < report.predictions.size()) {
      const analysis::ProfileInterval& ci = report.predictions[i].interval;
      p.method = "profile";
      p.predicted = ci.estimate;
      if (ci.bounded_below && std::isfinite(ci.lower)) p.lower = ci.lower;
      if (ci.bounded_above && std::isfinite(ci.upper)) p.upper = ci.upper;
    } else if (report.bootstrap && !report.bootstrap->samples.empty()) {
      // The percentile interval of the resampled laws' predictions.
      std::vector<double> values;
      for (const analysis::PowerLaw& law : report.bootstrap->samples) {
        const double v = law.Predict(r.n, r.d);
        if (std::isfinite(v)) values.push_back(v);
      }
      std::sort(values.begin(), values.end());
      p.method = "bootstrap";
      p.predicted = report.fit.law.Predict(r.n, r.d);
      if (!values.empty()) {
        const double tail = (1 - report.bootstrap->confidence) / 2;
        p.lower = analysis::Quantile(values, tail);
        p.upper = analysis::Quantile(values, 1 - tail);
      }
    } else {
      p.method = "fit";
      p.predicted = report.fit.law.Predict(r.n, r.d);
    }
    if (!std::isfinite(p.predicted)) continue;  // a law that runs off
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<SweepFit>> FitSweepRuns(
    store::QueryEngine& query, int64_t sweep_id, const hlab::v1::FitSpec& fit,
    const SweepFitOptions& options) {
  std::vector<std::string> targets;
  for (const std::string& t : fit.targets()) {
    if (!options.target.empty() && t != options.target) continue;
    targets.push_back(t);
  }
  if (fit.targets().empty() &&
      (options.target.empty() || options.target == "loss")) {
    targets.push_back("loss");
  }
  if (targets.empty() && !options.target.empty()) {
    targets.push_back(options.target);
  }
  for (const std::string& t : targets) {
    if (t != "loss" && t != "longppl") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown fit target '", t, "' (expected loss or longppl)"));
    }
  }
  store::QueryOptions query_options;
  query_options.max_rows = 1000000;
  query_options.time_limit = absl::Minutes(5);
  HLAB_ASSIGN_OR_RETURN(
      std::vector<RunFigures> runs,
      ReadRunFigures(
          [&](const std::string& sql) { return query.Run(sql, query_options); },
          sweep_id));
  // Failed and cancelled runs are left out; pending and running ones are
  // only ever predicted, never fitted, and so are PREDICTED ones (early
  // stop): only succeeded runs are points.
  std::vector<RunFigures> unfinished_runs;
  std::vector<RunFigures> predicted_runs;
  for (const RunFigures& r : runs) {
    if (r.state == "PENDING" || r.state == "RUNNING") {
      unfinished_runs.push_back(r);
    } else if (r.state == "PREDICTED") {
      predicted_runs.push_back(r);
    }
  }
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [](const RunFigures& r) { return !r.succeeded(); }),
             runs.end());
  std::vector<std::string> archs;
  for (const RunFigures& r : runs) {
    if (!options.arch.empty() && r.arch != options.arch) continue;
    if (archs.empty() || archs.back() != r.arch) archs.push_back(r.arch);
  }
  analysis::AnalysisOptions analysis;
  if (options.grid) analysis.fit.grid = *options.grid;
  analysis.fit.threads = options.threads;
  analysis.bootstrap.threads = options.threads;
  analysis.bootstrap.seed = options.seed;
  analysis.bootstrap.resamples = options.bootstrap;
  if (fit.has_bootstrap()) {
    analysis.bootstrap.resamples = std::min(options.bootstrap, fit.bootstrap());
  }
  std::vector<SweepFit> out;
  for (const std::string& arch : archs) {
    for (const std::string& target : targets) {
      SweepFit f;
      f.sweep_id = sweep_id;
      f.arch = arch;
      f.target = target;
      std::vector<analysis::ScalingPoint> fit_points, verify_points;
      for (const RunFigures& r : runs) {
        if (r.arch != arch) continue;
        const std::optional<double> v = r.Target(target);
        if (!v) continue;
        analysis::ScalingPoint p;
        p.n = r.n;
        p.d = r.d;
        p.loss = *v;
        if (Contains(fit.verify_scales(), r.scale)) {
          verify_points.push_back(p);
        } else if (fit.fit_scales().empty() ||
                   Contains(fit.fit_scales(), r.scale)) {
          fit_points.push_back(p);
        }
      }
      f.n_fit = static_cast<int>(fit_points.size());
      f.n_verify = static_cast<int>(verify_points.size());
      for (const RunFigures& r : predicted_runs) {
        if (r.arch == arch) f.predicted_runs.push_back(r.run_id);
      }
      // Live predictions: the architecture's unfinished runs.
      std::vector<const RunFigures*> unfinished;
      analysis::AnalysisOptions arch_analysis = analysis;
      if (options.predict_unfinished) {
        for (const RunFigures& r : unfinished_runs) {
          if (r.arch == arch) unfinished.push_back(&r);
        }
        for (const RunFigures* r : unfinished) {
          arch_analysis.predict_at.push_back({r->n, r->d});
        }
        // The profile intervals predict where there are 6 points or more;
        // the bootstrap stands in below that.
        if (f.n_fit > kMinFitPoints) arch_analysis.bootstrap.resamples = 0;
      }
      if (f.n_fit < kMinFitPoints) {
        f.reason = absl::StrCat(
            "too few points: ", f.n_fit, " succeeded runs with ", target,
            " in the fit scales, at least ", kMinFitPoints, " needed");
      } else {
        absl::StatusOr<analysis::PowerLawReport> report =
            analysis::AnalyzePowerLaw(fit_points, verify_points, arch_analysis);
        if (report.ok()) {
          f.fitted = true;
          f.report = *std::move(report);
          f.predictions = PredictRuns(f, unfinished);
        } else {
          f.reason = absl::StrCat("fit failed: ", report.status().message());
        }
      }
      out.push_back(std::move(f));
    }
  }
  return out;
}

absl::Status FindStoredSweep(store::QueryEngine& query, const std::string& ref,
                             int64_t* id, std::string* spec) {
  store::QueryOptions options;
  absl::StatusOr<store::QueryResult> result =
      query.Run("SELECT id, name, spec FROM sweeps ORDER BY id DESC", options);
  if (!result.ok()) return result.status();
  int64_t ref_id = 0;
  const bool by_id = absl::SimpleAtoi(ref, &ref_id);
  int matches = 0;
  for (const auto& row : result->rows) {
    const auto* row_id = std::get_if<int64_t>(&row[0]);
    const auto* name = std::get_if<std::string>(&row[1]);
    const auto* text = std::get_if<std::string>(&row[2]);
    if (row_id == nullptr || name == nullptr || text == nullptr) continue;
    const bool match =
        ref.empty() || (by_id && *row_id == ref_id) || *name == ref;
    if (!match) continue;
    if (matches++ == 0) {
      *id = *row_id;
      *spec = *text;
    }
    if (!ref.empty()) break;
  }
  if (matches == 0) {
    return absl::NotFoundError(
        ref.empty() ? std::string("the database has no sweeps")
                    : absl::StrCat("no sweep '", ref, "' in the database"));
  }
  if (ref.empty() && matches > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the database has ", matches, " sweeps; name one with --sweep S"));
  }
  return absl::OkStatus();
}

store::FitRecord ToFitRecord(const SweepFit& fit) {
  const analysis::PowerLawReport& r = fit.report;
  store::FitRecord record;
  record.sweep_id = fit.sweep_id;
  record.arch = fit.arch;
  record.target = fit.target;
  record.e = r.E;
  record.a = r.A;
  record.alpha = r.alpha;
  record.b = r.B;
  record.beta = r.beta;
  record.r2_fit = r.r2_fit;
  // NaN without held-out points: null in JSON, NULL in the fits table.
  record.r2_verify =
      r.r2_verify.value_or(std::numeric_limits<double>::quiet_NaN());
  record.n_points = static_cast<int>(r.n_points);
  nlohmann::ordered_json ci = nlohmann::ordered_json::object();
  if (r.intervals) {
    // The calibrated profile-likelihood CIs (an open end is stored as null).
    const analysis::ProfileResult& p = *r.intervals;
    auto bounds = [](const analysis::ProfileInterval& i) {
      return nlohmann::ordered_json::array({i.lower, i.upper});
    };
    ci["E"] = bounds(p.E);
    ci["A"] = bounds(p.A);
    ci["alpha"] = bounds(p.alpha);
    ci["B"] = bounds(p.B);
    ci["beta"] = bounds(p.beta);
    ci["method"] = "profile";
    ci["resamples"] = r.bootstrap ? r.bootstrap->resamples : 0;
    ci["confidence"] = p.confidence;
  } else if (r.bootstrap) {
    const analysis::BootstrapResult& b = *r.bootstrap;
    ci["E"] = IntervalJson(b.E);
    ci["A"] = IntervalJson(b.A);
    ci["alpha"] = IntervalJson(b.alpha);
    ci["B"] = IntervalJson(b.B);
    ci["beta"] = IntervalJson(b.beta);
    ci["resamples"] = b.resamples;
    ci["confidence"] = b.confidence;
  }
  record.ci = ci.dump();
  nlohmann::ordered_json details =
      nlohmann::ordered_json::parse(analysis::PowerLawReportToJson(r),
                                    /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!details.is_object()) details = nlohmann::ordered_json::object();
  details["measured_points"] = fit.n_fit + fit.n_verify;
  details["predicted_runs"] = fit.predicted_runs;
  record.details = details.dump();
  return record;
}

namespace {

// "; 2 runs predicted (stopped early), not fitted", or "".
std::string PredictedNote(const SweepFit& fit) {
  if (fit.predicted_runs.empty()) return "";
  return absl::StrCat("; ", fit.predicted_runs.size(),
                      fit.predicted_runs.size() == 1 ? " run" : " runs",
                      " predicted (stopped early), not fitted");
}

}  // namespace

std::string DescribeSweepFit(const SweepFit& fit) {
  if (!fit.fitted) {
    return absl::StrCat(fit.target, "/", fit.arch, ": not fitted: ", fit.reason,
                        PredictedNote(fit));
  }
  const analysis::PowerLawReport& r = fit.report;
  std::string line = absl::StrFormat(
      "%s/%s: E=%.4g A=%.4g alpha=%.4g B=%.4g beta=%.4g R^2 fit %.4f (%d "
      "points)",
      fit.target, fit.arch, r.E, r.A, r.alpha, r.B, r.beta, r.r2_fit,
      fit.n_fit);
  if (r.r2_verify) {
    absl::StrAppendFormat(&line, ", verify %.4f (%d points)", *r.r2_verify,
                          fit.n_verify);
  }
  absl::StrAppend(&line, PredictedNote(fit));
  return line;
}

}  // namespace hlab::fits
