#include "report/study_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_parser.h"
#include "fits/sweep_fits.h"

namespace hlab::report {
namespace {

using Json = nlohmann::json;

constexpr const char* kCoefficients[] = {"E", "A", "alpha", "B", "beta"};

// The sweep `ref` names: its id, name and stored spec.
struct SweepRow {
  int64_t id = 0;
  std::string name;
  std::string spec;
};

absl::StatusOr<SweepRow> FindSweep(RowSource& source, const std::string& ref) {
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      source.Query("SELECT id, name FROM sweeps ORDER BY id DESC"));
  int64_t ref_id = 0;
  const bool by_id = absl::SimpleAtoi(ref, &ref_id);
  std::vector<SweepRow> matches;
  for (const auto& row : result.rows) {
    SweepRow s;
    s.id = static_cast<int64_t>(RealValue(row[0]).value_or(0));
    s.name = TextValue(row[1]);
    if (ref.empty() || (by_id && s.id == ref_id) || s.name == ref) {
      matches.push_back(std::move(s));
      if (!ref.empty()) break;
    }
  }
  if (matches.empty()) {
    return absl::NotFoundError(
        ref.empty()
            ? absl::StrCat(source.Describe(), " has no sweeps")
            : absl::StrCat("no sweep '", ref, "' in ", source.Describe(),
                           "; `hlab status` lists the sweeps"));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source.Describe(), " has ", matches.size(),
                     " sweeps; name one with --sweep ID"));
  }
  SweepRow sweep = std::move(matches.front());
  HLAB_ASSIGN_OR_RETURN(store::QueryResult spec,
                        source.Query(absl::StrCat(
                            "SELECT spec FROM sweeps WHERE id = ", sweep.id)));
  if (spec.rows.size() == 1) sweep.spec = TextValue(spec.rows[0][0]);
  return sweep;
}

bool Contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

absl::StatusOr<std::vector<RunRow>> ReadRuns(RowSource& source,
                                             int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(
      std::vector<fits::RunFigures> figures,
      fits::ReadRunFigures(
          [&](const std::string& sql) { return source.Query(sql); }, sweep_id));
  std::vector<RunRow> runs;
  runs.reserve(figures.size());
  for (fits::RunFigures& f : figures) {
    RunRow r;
    static_cast<fits::RunFigures&>(r) = std::move(f);
    runs.push_back(std::move(r));
  }
  return runs;
}

// A finite number, or nullopt (null, not a number, not finite).
std::optional<double> JsonReal(const Json& j) {
  if (!j.is_number()) return std::nullopt;
  const double v = j.get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> JsonReal(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return std::nullopt;
  return JsonReal(j[key]);
}

std::optional<double> Finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// A stored A (or B) and its log (details "a" / "b"): (A, ln A). A NULL A
// with a finite ln A overflowed: (+inf, ln A). Unknown parts are NaN.
std::pair<double, double> ScaleCoefficient(std::optional<double> value,
                                           std::optional<double> log_value) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (value) {
    return {*value,
            log_value ? *log_value : (*value > 0 ? std::log(*value) : kNaN)};
  }
  if (log_value) return {std::numeric_limits<double>::infinity(), *log_value};
  return {kNaN, kNaN};
}

absl::StatusOr<std::vector<RetrievalPoint>> ReadRetrieval(RowSource& source,
                                                          int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      source.Query(absl::StrCat(
          "SELECT e.run_id, e.step, e.value, e.details FROM evals e"
          " JOIN sweep_runs sr ON sr.run_id = e.run_id WHERE sr.sweep_id = ",
          sweep_id,
          " AND e.metric = 'retrieval_score' ORDER BY e.run_id, e.step")));
  std::vector<RetrievalPoint> points;
  for (const auto& row : result.rows) {
    if (row.size() != 4) continue;
    const auto* step = std::get_if<int64_t>(&row[1]);
    const auto* value = std::get_if<double>(&row[2]);
    if (step == nullptr || value == nullptr || !std::isfinite(*value)) {
      continue;
    }
    RetrievalPoint p;
    p.run_id = TextValue(row[0]);
    p.step = *step;
    p.score = *value;
    p.details = TextValue(row[3]);
    points.push_back(std::move(p));
  }
  return points;
}

// mc_acc/<task> and mc_acc_norm/<task> of the sweep's runs: per run and
// task, the newest step's (rows come by step, so later ones win).
absl::StatusOr<std::vector<MultipleChoiceRow>> ReadMultipleChoice(
    RowSource& source, int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      source.Query(absl::StrCat(
          "SELECT e.run_id, e.metric, e.step, e.value, e.details FROM evals e"
          " JOIN sweep_runs sr ON sr.run_id = e.run_id WHERE sr.sweep_id = ",
          sweep_id,
          " AND (substr(e.metric, 1, 7) = 'mc_acc/' OR"
          " substr(e.metric, 1, 12) = 'mc_acc_norm/')"
          " ORDER BY e.run_id, e.step")));
  std::map<std::pair<std::string, std::string>, MultipleChoiceRow> rows;
  for (const auto& row : result.rows) {
    if (row.size() != 5) continue;
    const auto* step = std::get_if<int64_t>(&row[2]);
    if (step == nullptr) continue;
    const std::string metric = TextValue(row[1]);
    const bool norm = absl::StartsWith(metric, "mc_acc_norm/");
    const std::string task = metric.substr(metric.find('/') + 1);
    MultipleChoiceRow& r = rows[{TextValue(row[0]), task}];
    if (*step < r.step) continue;
    if (*step > r.step) r = MultipleChoiceRow();
    r.run_id = TextValue(row[0]);
    r.task = task;
    r.step = *step;
    const auto* value = std::get_if<double>(&row[3]);
    std::optional<double> v;
    if (value != nullptr) v = Finite(*value);
    const Json details =
        Json::parse(TextValue(row[4]), nullptr, /*allow_exceptions=*/false);
    (norm ? r.acc_norm : r.acc) = v;
    (norm ? r.acc_norm_stderr : r.acc_stderr) =
        JsonReal(details, norm ? "acc_norm_stderr" : "acc_stderr");
    if (const std::optional<double> n = JsonReal(details, "n")) {
      r.n = static_cast<int64_t>(*n);
    }
    if (const std::optional<double> k = JsonReal(details, "num_fewshot")) {
      r.num_fewshot = static_cast<int64_t>(*k);
    }
  }
  std::vector<MultipleChoiceRow> out;
  for (auto& [key, r] : rows) out.push_back(std::move(r));
  return out;
}

// ruler_score and ruler_score/<task> of the sweep's runs: per run and
// metric, the newest step's.
absl::StatusOr<std::vector<RulerPoint>> ReadRuler(RowSource& source,
                                                  int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      source.Query(absl::StrCat(
          "SELECT e.run_id, e.metric, e.step, e.value FROM evals e"
          " JOIN sweep_runs sr ON sr.run_id = e.run_id WHERE sr.sweep_id = ",
          sweep_id,
          " AND (e.metric = 'ruler_score' OR substr(e.metric, 1, 12) = "
          "'ruler_score/') ORDER BY e.run_id, e.metric, e.step")));
  std::vector<RulerPoint> points;
  for (const auto& row : result.rows) {
    if (row.size() != 4) continue;
    const auto* step = std::get_if<int64_t>(&row[2]);
    const auto* value = std::get_if<double>(&row[3]);
    if (step == nullptr || value == nullptr || !std::isfinite(*value)) {
      continue;
    }
    RulerPoint p{TextValue(row[0]), TextValue(row[1]), *step, *value};
    // Ordered by step: a later one of the same run and metric replaces it.
    if (!points.empty() && points.back().run_id == p.run_id &&
        points.back().metric == p.metric) {
      points.back() = std::move(p);
    } else {
      points.push_back(std::move(p));
    }
  }
  return points;
}

absl::StatusOr<std::vector<QGradPoint>> ReadQGrad(RowSource& source,
                                                  int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      source.Query(absl::StrCat(
          "SELECT m.run_id, m.name, m.step, m.tokens, m.value FROM metrics m"
          " JOIN sweep_runs sr ON sr.run_id = m.run_id WHERE sr.sweep_id = ",
          sweep_id,
          " AND substr(m.name, 1, 12) = 'q_grad_norm_' ORDER BY m.run_id,"
          " m.name, m.step")));
  std::vector<QGradPoint> points;
  constexpr size_t kPrefix = sizeof("q_grad_norm_") - 1;
  for (const auto& row : result.rows) {
    if (row.size() != 5) continue;
    const std::string name = TextValue(row[1]);
    const auto* step = std::get_if<int64_t>(&row[2]);
    const auto* tokens = std::get_if<int64_t>(&row[3]);
    const auto* value = std::get_if<double>(&row[4]);
    if (name.size() <= kPrefix || step == nullptr || value == nullptr ||
        !std::isfinite(*value)) {
      continue;
    }
    QGradPoint p;
    p.run_id = TextValue(row[0]);
    p.head = name.substr(kPrefix);
    p.step = *step;
    p.tokens = tokens != nullptr ? static_cast<double>(*tokens) : 0;
    p.value = *value;
    points.push_back(std::move(p));
  }
  return points;
}

// The stored fits of the sweep; CIs, objective and warnings from the JSON
// columns when they hold them.
absl::StatusOr<std::vector<FitRow>> ReadStoredFits(RowSource& source,
                                                   int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      source.Query(absl::StrCat(
          "SELECT arch, target, e, a, alpha, b, beta, ci, r2_fit, r2_verify,"
          " n_points, details FROM fits WHERE sweep_id = ",
          sweep_id,
          " ORDER BY arch, CASE target WHEN 'loss' THEN 0 WHEN 'longppl'"
          " THEN 1 ELSE 2 END, target")));
  std::vector<FitRow> fits;
  for (const auto& row : result.rows) {
    FitRow f;
    f.arch = TextValue(row[0]);
    f.target = TextValue(row[1]);
    const Json details = Json::parse(TextValue(row[11]), nullptr, false);
    f.E = RealValue(row[2]).value_or(0);
    f.alpha = RealValue(row[4]).value_or(0);
    f.beta = RealValue(row[6]).value_or(0);
    std::tie(f.A, f.log_A) =
        ScaleCoefficient(RealValue(row[3]), JsonReal(details, "a"));
    std::tie(f.B, f.log_B) =
        ScaleCoefficient(RealValue(row[5]), JsonReal(details, "b"));
    f.r2_fit = RealValue(row[8]);
    f.n_points = static_cast<int>(RealValue(row[10]).value_or(0));
    const Json ci = Json::parse(TextValue(row[7]), nullptr, false);
    for (const char* name : kCoefficients) {
      if (ci.is_object() && ci.contains(name) && ci[name].is_array() &&
          ci[name].size() == 2) {
        f.ci[name] = {JsonReal(ci[name][0]), JsonReal(ci[name][1])};
      }
    }
    f.confidence = JsonReal(ci, "confidence").value_or(0);
    f.resamples = static_cast<int>(JsonReal(ci, "resamples").value_or(0));
    if (ci.is_object() && ci.contains("method") && ci["method"].is_string()) {
      f.ci_method = ci["method"].get<std::string>();
    }
    f.objective = JsonReal(details, "objective");
    // The fitter's details say whether there were held-out points; the
    // r2_verify column holds 0 without them.
    if (details.is_object() && details.contains("n_verify_points")) {
      f.r2_verify = JsonReal(details, "r2_verify");
    } else {
      f.r2_verify = RealValue(row[9]);
    }
    for (const auto& [key, list] :
         {std::pair{"warnings", &f.warnings}, std::pair{"notes", &f.notes}}) {
      if (!details.is_object() || !details.contains(key) ||
          !details[key].is_array()) {
        continue;
      }
      for (const Json& w : details[key]) {
        if (w.is_string()) list->push_back(w.get<std::string>());
      }
    }
    fits.push_back(std::move(f));
  }
  return fits;
}

FitRow FromSweepFit(const fits::SweepFit& s) {
  FitRow f;
  f.arch = s.arch;
  f.target = s.target;
  f.fitted = s.fitted;
  f.reason = s.reason;
  f.n_points = s.n_fit;
  if (!s.fitted) return f;
  const analysis::PowerLawReport& r = s.report;
  f.E = r.E;
  f.A = r.A;
  f.alpha = r.alpha;
  f.B = r.B;
  f.beta = r.beta;
  f.log_A = r.a;
  f.log_B = r.b;
  f.objective = r.objective;
  f.r2_fit = r.r2_fit;
  f.r2_verify = r.r2_verify;
  f.n_points = static_cast<int>(r.n_points);
  f.warnings = r.warnings;
  f.notes = r.notes;
  if (r.intervals) {
    const analysis::ProfileResult& p = *r.intervals;
    f.ci["E"] = {Finite(p.E.lower), Finite(p.E.upper)};
    f.ci["A"] = {Finite(p.A.lower), Finite(p.A.upper)};
    f.ci["alpha"] = {Finite(p.alpha.lower), Finite(p.alpha.upper)};
    f.ci["B"] = {Finite(p.B.lower), Finite(p.B.upper)};
    f.ci["beta"] = {Finite(p.beta.lower), Finite(p.beta.upper)};
    f.ci_method = "profile";
    f.confidence = p.confidence;
    f.resamples = r.bootstrap ? r.bootstrap->resamples : 0;
  } else if (r.bootstrap) {
    const analysis::BootstrapResult& b = *r.bootstrap;
    f.ci["E"] = {Finite(b.E.lower), Finite(b.E.upper)};
    f.ci["A"] = {Finite(b.A.lower), Finite(b.A.upper)};
    f.ci["alpha"] = {Finite(b.alpha.lower), Finite(b.alpha.upper)};
    f.ci["B"] = {Finite(b.B.lower), Finite(b.B.upper)};
    f.ci["beta"] = {Finite(b.beta.lower), Finite(b.beta.upper)};
    f.confidence = b.confidence;
    f.resamples = b.resamples;
  }
  return f;
}

}  // namespace

std::string TargetLabel(const std::string& target) {
  if (target == "loss") return "loss";
  if (target == "longppl") return "log(LongPPL)";
  return target;
}

std::vector<std::string> StudyData::Architectures() const {
  std::vector<std::string> archs;
  for (const RunRow& r : runs) {
    if (!Contains(archs, r.arch)) archs.push_back(r.arch);
  }
  return archs;
}

const FitRow* StudyData::FindFit(const std::string& arch,
                                 const std::string& target) const {
  for (const FitRow& f : fits) {
    if (f.arch == arch && f.target == target && f.fitted) return &f;
  }
  return nullptr;
}

absl::StatusOr<StudyData> ReadStudyData(RowSource& source,
                                        const std::string& sweep_ref,
                                        const StudyOptions& options) {
  HLAB_ASSIGN_OR_RETURN(SweepRow sweep, FindSweep(source, sweep_ref));
  StudyData study;
  study.sweep_id = sweep.id;
  study.sweep_name = sweep.name;
  study.source = source.Describe();
  absl::StatusOr<v1::SweepSpec> spec = sweep::ParseSweepSpec(sweep.spec);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the stored spec of sweep ", sweep.id,
                     " does not parse: ", spec.status().message()));
  }
  const v1::FitSpec fit_spec = sweep::WithDefaults(*spec).fit();
  study.fit_scales.assign(fit_spec.fit_scales().begin(),
                          fit_spec.fit_scales().end());
  study.verify_scales.assign(fit_spec.verify_scales().begin(),
                             fit_spec.verify_scales().end());
  HLAB_ASSIGN_OR_RETURN(study.runs, ReadRuns(source, sweep.id));
  for (RunRow& r : study.runs)
    r.verify = Contains(study.verify_scales, r.scale);
  HLAB_ASSIGN_OR_RETURN(study.q_grad, ReadQGrad(source, sweep.id));
  HLAB_ASSIGN_OR_RETURN(study.retrieval, ReadRetrieval(source, sweep.id));
  HLAB_ASSIGN_OR_RETURN(study.multiple_choice,
                        ReadMultipleChoice(source, sweep.id));
  HLAB_ASSIGN_OR_RETURN(study.ruler, ReadRuler(source, sweep.id));
  HLAB_ASSIGN_OR_RETURN(study.fits, ReadStoredFits(source, sweep.id));
  if (!study.fits.empty()) {
    study.fits_origin = "stored";
    return study;
  }
  const bool any_succeeded =
      std::any_of(study.runs.begin(), study.runs.end(),
                  [](const RunRow& r) { return r.succeeded(); });
  if (study.runs.empty()) {
    study.notes.push_back(absl::StrCat("sweep ", sweep.id,
                                       " has no runs: nothing to tabulate, "
                                       "fit or plot"));
    return study;
  }
  if (!any_succeeded) {
    study.notes.push_back(absl::StrCat(
        "no run of sweep ", sweep.id,
        " has succeeded yet: the fits and figures need succeeded runs "
        "(`hlab status ",
        sweep.id, "` shows progress)"));
    return study;
  }
  store::QueryEngine* engine = source.LocalEngine();
  if (engine == nullptr) {
    study.notes.push_back(absl::StrCat(
        "no fits are stored for sweep ", sweep.id,
        " yet (the coordinator fits a sweep when all its runs are done); "
        "for fits now, run hlab report --db on the coordinator's database"));
    return study;
  }
  fits::SweepFitOptions fit_options;
  fit_options.bootstrap = options.bootstrap;
  fit_options.threads = options.threads;
  fit_options.seed = options.seed;
  fit_options.grid = options.grid;
  HLAB_ASSIGN_OR_RETURN(
      std::vector<fits::SweepFit> computed,
      fits::FitSweepRuns(*engine, sweep.id, fit_spec, fit_options));
  for (const fits::SweepFit& s : computed) {
    study.fits.push_back(FromSweepFit(s));
  }
  study.fits_origin = "computed";
  study.notes.push_back(absl::StrCat(
      "no fits are stored for sweep ", sweep.id,
      "; these were computed by hlab report from its succeeded runs, as "
      "hlab fit --db does (",
      options.bootstrap, " bootstrap resamples at most)"));
  return study;
}

}  // namespace hlab::report
