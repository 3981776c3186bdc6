#include "coordinator/sweep_fits.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace hlab::coordinator {
namespace {

struct RunPoint {
  std::string arch;
  std::string scale;
  double n = 0;
  double d = 0;
  std::optional<double> loss;     // validation, else training
  std::optional<double> longppl;  // log LongPPL
};

std::optional<double> Real(const store::Value& v) {
  if (const auto* d = std::get_if<double>(&v)) {
    if (std::isfinite(*d)) return *d;
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}

std::string Text(const store::Value& v) {
  const auto* s = std::get_if<std::string>(&v);
  return s != nullptr ? *s : std::string();
}

absl::StatusOr<std::vector<RunPoint>> ReadRunPoints(store::QueryEngine& query,
                                                    int64_t sweep_id) {
  const std::string sql = absl::StrCat(
      "SELECT rs.arch, rs.scale, rs.n_params, rs.budget_tokens,"
      " coalesce(rs.final_val_loss, rs.final_train_loss),"
      " (SELECT e.value FROM evals e WHERE e.run_id = rs.run_id"
      "    AND e.metric = 'log_longppl' ORDER BY e.step DESC LIMIT 1),"
      " (SELECT e.value FROM evals e WHERE e.run_id = rs.run_id"
      "    AND e.metric = 'longppl' AND e.value > 0"
      "    ORDER BY e.step DESC LIMIT 1)"
      " FROM run_summary rs JOIN sweep_runs sr ON sr.run_id = rs.run_id"
      " WHERE sr.sweep_id = ",
      sweep_id,
      " AND rs.state = 'SUCCEEDED'"
      " ORDER BY rs.arch, rs.n_params, rs.budget_tokens, rs.run_id");
  store::QueryOptions options;
  options.max_rows = 1000000;
  options.time_limit = absl::Minutes(5);
  HLAB_ASSIGN_OR_RETURN(store::QueryResult result, query.Run(sql, options));
  std::vector<RunPoint> points;
  for (const auto& row : result.rows) {
    RunPoint p;
    p.arch = Text(row[0]);
    p.scale = Text(row[1]);
    p.n = Real(row[2]).value_or(0);
    p.d = Real(row[3]).value_or(0);
    p.loss = Real(row[4]);
    p.longppl = Real(row[5]);
    if (!p.longppl) {
      const std::optional<double> ppl = Real(row[6]);
      if (ppl && *ppl > 0) p.longppl = std::log(*ppl);
    }
    points.push_back(std::move(p));
  }
  return points;
}

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
  HLAB_ASSIGN_OR_RETURN(std::vector<RunPoint> runs,
                        ReadRunPoints(query, sweep_id));
  std::vector<std::string> archs;
  for (const RunPoint& r : runs) {
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
      for (const RunPoint& r : runs) {
        if (r.arch != arch) continue;
        const std::optional<double>& v = target == "loss" ? r.loss : r.longppl;
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
      if (f.n_fit < kMinFitPoints) {
        f.reason = absl::StrCat(
            "too few points: ", f.n_fit, " succeeded runs with ", target,
            " in the fit scales, at least ", kMinFitPoints, " needed");
      } else {
        absl::StatusOr<analysis::PowerLawReport> report =
            analysis::AnalyzePowerLaw(fit_points, verify_points, analysis);
        if (report.ok()) {
          f.fitted = true;
          f.report = *std::move(report);
        } else {
          f.reason = absl::StrCat("fit failed: ", report.status().message());
        }
      }
      out.push_back(std::move(f));
    }
  }
  return out;
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
  record.r2_verify = r.r2_verify.value_or(0);
  record.n_points = static_cast<int>(r.n_points);
  nlohmann::ordered_json ci = nlohmann::ordered_json::object();
  if (r.bootstrap) {
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
  record.details = analysis::PowerLawReportToJson(r);
  return record;
}

std::string DescribeSweepFit(const SweepFit& fit) {
  if (!fit.fitted) {
    return absl::StrCat(fit.target, "/", fit.arch,
                        ": not fitted: ", fit.reason);
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
  return line;
}

}  // namespace hlab::coordinator
