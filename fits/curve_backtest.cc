#include "fits/curve_backtest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "fits/internal/values.h"
#include "task/lr_schedule.h"
#include "task/run_config.h"
#include "task/train_plan.h"

namespace hlab::fits {
namespace {

using internal::Real;
using internal::Text;

// SQL string literal ('' doubled).
std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// The schedule of a run from its config: task::PlanTraining's.
absl::Status ReadSchedule(const std::string& config, int64_t n_params,
                          RunCurve* run) {
  HLAB_ASSIGN_OR_RETURN(task::RunConfig rc, task::RunConfigFromJson(config));
  HLAB_ASSIGN_OR_RETURN(task::TrainTask t, task::TrainTaskForRun(rc));
  HLAB_ASSIGN_OR_RETURN(task::TrainPlan plan, task::PlanTraining(t, n_params));
  const task::WsdSchedule schedule(plan.schedule);
  run->steps = plan.total_steps;
  run->warmup_steps = plan.schedule.warmup_steps;
  run->branch_step = schedule.DecayStart();
  run->lr.resize(run->steps);
  for (int64_t i = 0; i < run->steps; ++i) {
    run->lr[i] = schedule.LearningRate(i);
  }
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The run's points with record step in [first, last] as the law's points
// (the loss of record step k follows k - 1 updates).
std::vector<analysis::CurvePoint> Points(const RunCurve& r, int64_t first,
                                         int64_t last) {
  std::vector<analysis::CurvePoint> out;
  for (const auto& [step, loss] : r.train_loss) {
    if (step < first || step > last || step < 2) continue;
    out.push_back({step - 1, loss});
  }
  return out;
}

// The mean loss over record steps [first, last]; nullopt without points.
std::optional<double> MeanLoss(const RunCurve& r, int64_t first, int64_t last) {
  double sum = 0;
  int n = 0;
  for (const auto& [step, loss] : r.train_loss) {
    if (step < first || step > last) continue;
    sum += loss;
    ++n;
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

int64_t Window(const RunCurve& r, const BacktestOptions& o) {
  const int64_t w = std::max<int64_t>(
      o.final_window_min_steps,
      std::llround(o.final_window * static_cast<double>(r.steps)));
  return std::clamp<int64_t>(w, 1, r.steps / 2);
}

// The group's curves with every point (a finished trunk and its decays),
// each trunk point once: the longest run whole, the others after their
// branch point.
std::vector<analysis::TrainingCurve> GroupCurves(
    const std::vector<const RunCurve*>& members, int64_t cutoff,
    const RunCurve* target) {
  std::vector<analysis::TrainingCurve> curves;
  for (const RunCurve* m : members) {
    analysis::TrainingCurve c;
    c.lr = m->lr;
    c.warmup_steps = m->warmup_steps;
    c.points = m == target ? Points(*m, 2, cutoff)
                           : Points(*m, m->branch_step + 2, cutoff);
    if (m == target || !c.points.empty()) curves.push_back(std::move(c));
  }
  return curves;
}

using Groups = std::map<std::string, std::vector<const RunCurve*>>;

// The trunk group of a run (a run alone is its own group).
std::string GroupKey(const RunCurve& r) {
  return r.trunk.empty() ? "run:" + r.run_id : r.trunk;
}

// Each group's C from all its points (the longest run whole, the others'
// decays), for the other groups' prior; only groups whose fit saw a decay.
std::map<std::string, double> GroupCs(const Groups& groups,
                                      const analysis::CurveLawOptions& law) {
  std::map<std::string, double> out;
  for (const auto& [key, members] : groups) {
    const RunCurve* longest =
        *std::max_element(members.begin(), members.end(),
                          [](const RunCurve* a, const RunCurve* b) {
                            return a->steps < b->steps;
                          });
    analysis::CurveLawOptions o = law;
    o.min_updates = std::max(o.min_updates, longest->warmup_steps + 1);
    absl::StatusOr<analysis::CurveLawFit> fit =
        analysis::FitCurveLaw(GroupCurves(members, longest->steps, longest), o);
    if (fit.ok() && fit->c_from_data) out[key] = fit->law.c;
  }
  return out;
}

// The law's options for the runs of group `key`: after warmup, and with
// the prior from the other groups' C (median, 1.4826 x MAD) when at least
// 3 of them have one.
analysis::CurveLawOptions GroupLawOptions(
    const std::string& key, const std::vector<const RunCurve*>& members,
    const std::map<std::string, double>& group_c,
    const BacktestOptions& options) {
  analysis::CurveLawOptions o = options.law;
  if (options.prior) {
    std::vector<double> others;
    for (const auto& [k, c] : group_c) {
      if (k != key) others.push_back(c);
    }
    if (others.size() >= 3) {
      const double median = Median(others);
      std::vector<double> dev;
      for (double c : others) dev.push_back(std::abs(c - median));
      o.c_prior = median;
      o.c_prior_sd = 1.4826 * Median(dev);
    }
  }
  // The law describes the curve after warmup.
  o.min_updates = std::max(o.min_updates, members.front()->warmup_steps + 1);
  return o;
}

// The scale of the law's own error on this run: the law fitted to the
// points up to half the cutoff predicts the window ending at the cutoff
// (already seen, `observed`); its error, times the ratio of the horizons in
// ln S1 (cutoff to the end, against half the cutoff to the cutoff).
// nullopt when that fit fails.
std::optional<double> SelfCheckError(const std::vector<const RunCurve*>& seen,
                                     const RunCurve& r, int64_t cutoff,
                                     int64_t w, double observed,
                                     const analysis::CurveLawOptions& o) {
  const int64_t half = cutoff / 2;
  if (cutoff - w < 1 || half < 2) return std::nullopt;
  absl::StatusOr<analysis::CurvePrediction> p = analysis::PredictCurveLoss(
      GroupCurves(seen, half, &r), 0, {cutoff - w, cutoff - 1}, o);
  if (!p.ok()) return std::nullopt;
  std::vector<double> s1(r.lr.size() + 1, 0.0);
  for (size_t i = 0; i < r.lr.size(); ++i) s1[i + 1] = s1[i] + r.lr[i];
  const double ahead = std::log(s1[r.steps - 1] / s1[cutoff - 1]);
  const double behind = std::log(s1[cutoff - 1] / s1[half - 1]);
  if (!(behind > 0) || !std::isfinite(ahead)) return std::nullopt;
  return std::abs(p->value - observed) * ahead / behind;
}

// A prediction row of run `r` cut at step `cutoff` (its fraction is the
// caller's: nominal in a backtest, actual when live).
BacktestRow RowOf(const RunCurve& r, int64_t cutoff) {
  BacktestRow row;
  row.run_id = r.run_id;
  row.arch = r.arch;
  row.scale = r.scale;
  row.steps = r.steps;
  row.cutoff_step = cutoff;
  return row;
}

}  // namespace

absl::StatusOr<std::vector<RunCurve>> ReadRunCurves(const RunQuery& query,
                                                    int64_t sweep_id) {
  const std::string sql = absl::StrCat(
      "SELECT r.id, r.arch, r.scale, r.state, r.budget_tokens, r.n_params,"
      " r.config, (SELECT d.depends_on FROM tasks t"
      "   JOIN task_deps d ON d.task_id = t.id"
      "   JOIN tasks u ON u.id = d.depends_on"
      "   WHERE t.run_id = r.id AND t.kind = 'DECAY' AND u.kind = 'TRUNK'"
      "   LIMIT 1)"
      " FROM runs r JOIN sweep_runs sr ON sr.run_id = r.id"
      " WHERE sr.sweep_id = ",
      sweep_id, " ORDER BY r.arch, r.n_params, r.budget_tokens, r.id");
  HLAB_ASSIGN_OR_RETURN(store::QueryResult result, query(sql));
  std::vector<RunCurve> runs;
  for (const auto& row : result.rows) {
    if (row.size() != 8) continue;
    RunCurve r;
    r.run_id = Text(row[0]);
    r.arch = Text(row[1]);
    r.scale = Text(row[2]);
    r.state = Text(row[3]);
    r.budget_tokens = static_cast<int64_t>(Real(row[4]).value_or(0));
    r.trunk = Text(row[7]);
    if (absl::Status s = ReadSchedule(
            Text(row[6]), static_cast<int64_t>(Real(row[5]).value_or(0)), &r);
        !s.ok()) {
      r.skipped = absl::StrCat("config: ", s.message());
      runs.push_back(std::move(r));
      continue;
    }
    HLAB_ASSIGN_OR_RETURN(
        store::QueryResult points,
        query(absl::StrCat("SELECT name, step, value FROM metrics"
                           " WHERE run_id = ",
                           Quoted(r.run_id),
                           " AND name IN ('train_loss', 'lr')"
                           " ORDER BY name, step")));
    for (const auto& p : points.rows) {
      if (p.size() != 3) continue;
      const std::optional<double> step = Real(p[1]);
      const std::optional<double> value = Real(p[2]);
      if (!step || !value) continue;
      const int64_t k = static_cast<int64_t>(*step);
      if (Text(p[0]) == "train_loss") {
        r.train_loss.emplace_back(k, *value);
      } else if (k >= 1 && k <= r.steps && r.lr[k - 1] > 0) {
        // The lr of record step k is that of update k - 1.
        r.lr_mismatch = std::max(r.lr_mismatch,
                                 std::abs(*value - r.lr[k - 1]) / r.lr[k - 1]);
      }
    }
    runs.push_back(std::move(r));
  }
  return runs;
}

absl::StatusOr<CurveBacktest> BacktestCurves(absl::Span<const RunCurve> runs,
                                             const BacktestOptions& options) {
  for (double f : options.fractions) {
    if (!(f > 0 && f < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("fractions: each must be in (0, 1), got ", f));
    }
  }
  if (!(options.final_window > 0 && options.final_window <= 0.5)) {
    return absl::InvalidArgumentError("final_window: must be in (0, 0.5]");
  }
  if (!(options.law.decay >= 0 && options.law.decay < 1)) {
    return absl::InvalidArgumentError("law.decay: must be in [0, 1)");
  }
  CurveBacktest out;
  // Trunk groups of the runs that can be backtested (a run alone is its
  // own group).
  Groups groups;
  std::vector<const RunCurve*> usable;
  for (const RunCurve& r : runs) {
    if (!r.skipped.empty() || r.state != "SUCCEEDED" || r.steps < 2 ||
        r.train_loss.empty()) {
      ++out.skipped;
      continue;
    }
    usable.push_back(&r);
    groups[GroupKey(r)].push_back(&r);
    out.max_lr_mismatch = std::max(out.max_lr_mismatch, r.lr_mismatch);
  }
  out.runs = static_cast<int>(usable.size());
  const std::map<std::string, double> group_c =
      options.prior ? GroupCs(groups, options.law)
                    : std::map<std::string, double>();
  for (double f : options.fractions) {
    FractionSummary s;
    s.fraction = f;
    std::vector<double> law, last_point, last_window, rel, width;
    int better_point = 0, better_window = 0, covered = 0;
    for (const auto& [key, members] : groups) {
      const analysis::CurveLawOptions law_options =
          GroupLawOptions(key, members, group_c, options);
      for (const RunCurve* r : members) {
        BacktestRow row = RowOf(*r, static_cast<int64_t>(std::floor(
                                        f * static_cast<double>(r->steps))));
        row.fraction = f;
        const int64_t w = Window(*r, options);
        const std::optional<double> measured =
            MeanLoss(*r, r->steps - w + 1, r->steps);
        const std::optional<double> window =
            MeanLoss(*r, row.cutoff_step - w + 1, row.cutoff_step);
        std::optional<double> point;
        for (const auto& [step, loss] : r->train_loss) {
          if (step <= row.cutoff_step) point = loss;
        }
        if (!measured || !window || !point) {
          row.error =
              "no train_loss points in the final window or before "
              "the cutoff";
          ++s.failed;
          out.rows.push_back(std::move(row));
          continue;
        }
        row.measured = *measured;
        row.last_point = *point;
        row.last_window = *window;
        std::vector<const RunCurve*> seen = {r};
        if (options.siblings) {
          for (const RunCurve* m : members) {
            if (m != r) seen.push_back(m);
          }
        }
        std::vector<analysis::TrainingCurve> curves =
            GroupCurves(seen, row.cutoff_step, r);
        row.siblings_used = static_cast<int>(curves.size()) - 1;
        absl::StatusOr<analysis::CurvePrediction> p =
            analysis::PredictCurveLoss(curves, 0, {r->steps - w, r->steps - 1},
                                       law_options);
        if (!p.ok()) {
          row.error = std::string(p.status().message());
          ++s.failed;
          out.rows.push_back(std::move(row));
          continue;
        }
        row.predicted = p->value;
        row.lower = p->lower;
        row.upper = p->upper;
        if (options.model_error) {
          const std::optional<double> model = SelfCheckError(
              seen, *r, row.cutoff_step, w, row.last_window, law_options);
          if (model) {
            // Widened in quadrature by 1.96 times the model error's scale.
            row.model_error = *model;
            row.lower =
                p->value - std::hypot(p->value - p->lower, 1.96 * *model);
            row.upper =
                p->value + std::hypot(p->upper - p->value, 1.96 * *model);
          }
        }
        row.c_from_data = p->fit.c_from_data;
        row.alpha = p->fit.law.alpha;
        row.c = p->fit.law.c;
        const double e = std::abs(p->value - row.measured);
        const double ep = std::abs(row.last_point - row.measured);
        const double ew = std::abs(row.last_window - row.measured);
        law.push_back(e);
        last_point.push_back(ep);
        last_window.push_back(ew);
        rel.push_back(e / row.measured);
        width.push_back(*row.upper - *row.lower);
        if (e < ep) ++better_point;
        if (e < ew) ++better_window;
        if (*row.lower <= row.measured && row.measured <= *row.upper) {
          ++covered;
        }
        if (p->fit.c_from_data) ++s.c_from_data;
        out.rows.push_back(std::move(row));
      }
    }
    s.runs = static_cast<int>(law.size());
    if (s.runs > 0) {
      const double n = s.runs;
      s.median_abs_error = Median(law);
      s.median_abs_error_last_point = Median(last_point);
      s.median_abs_error_last_window = Median(last_window);
      s.median_abs_relative_error = Median(rel);
      s.better_than_last_point = better_point / n;
      s.better_than_last_window = better_window / n;
      s.coverage = covered / n;
      s.median_interval_width = Median(width);
    }
    out.summaries.push_back(s);
  }
  return out;
}

absl::StatusOr<std::vector<BacktestRow>> PredictUnfinished(
    absl::Span<const RunCurve> runs, const BacktestOptions& options) {
  if (!(options.final_window > 0 && options.final_window <= 0.5)) {
    return absl::InvalidArgumentError("final_window: must be in (0, 0.5]");
  }
  Groups finished, all;
  for (const RunCurve& r : runs) {
    if (!r.skipped.empty() || r.steps < 2 || r.train_loss.empty()) continue;
    if (r.state == "FAILED" || r.state == "CANCELLED" ||
        r.state == "PREDICTED") {
      continue;  // ended without (more) training
    }
    all[GroupKey(r)].push_back(&r);
    if (r.state == "SUCCEEDED") finished[GroupKey(r)].push_back(&r);
  }
  const std::map<std::string, double> group_c =
      options.prior ? GroupCs(finished, options.law)
                    : std::map<std::string, double>();
  std::vector<BacktestRow> out;
  for (const auto& [key, members] : all) {
    const analysis::CurveLawOptions law_options =
        GroupLawOptions(key, members, group_c, options);
    for (const RunCurve* r : members) {
      const int64_t seen = r->train_loss.back().first;
      if (r->state == "SUCCEEDED" || seen >= r->steps) continue;
      BacktestRow row = RowOf(*r, seen);
      row.fraction = static_cast<double>(seen) / static_cast<double>(r->steps);
      const int64_t w = Window(*r, options);
      row.last_point = r->train_loss.back().second;
      row.last_window = MeanLoss(*r, seen - w + 1, seen).value_or(0);
      // Everything stored now: the run's points and its siblings' decays.
      std::vector<const RunCurve*> group = {r};
      if (options.siblings) {
        for (const RunCurve* m : members) {
          if (m != r) group.push_back(m);
        }
      }
      std::vector<analysis::TrainingCurve> curves =
          GroupCurves(group, std::numeric_limits<int64_t>::max(), r);
      row.siblings_used = static_cast<int>(curves.size()) - 1;
      absl::StatusOr<analysis::CurvePrediction> p = analysis::PredictCurveLoss(
          curves, 0, {r->steps - w, r->steps - 1}, law_options);
      if (!p.ok()) {
        row.error = std::string(p.status().message());
        out.push_back(std::move(row));
        continue;
      }
      row.predicted = p->value;
      row.lower = p->lower;
      row.upper = p->upper;
      row.c_from_data = p->fit.c_from_data;
      row.alpha = p->fit.law.alpha;
      row.c = p->fit.law.c;
      if (options.model_error) {
        const std::optional<double> model =
            SelfCheckError(group, *r, seen, w, row.last_window, law_options);
        if (model) {
          row.model_error = *model;
          row.lower = p->value - std::hypot(p->value - p->lower, 1.96 * *model);
          row.upper = p->value + std::hypot(p->upper - p->value, 1.96 * *model);
        }
      }
      out.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace hlab::fits
