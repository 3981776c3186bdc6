// The fit figures' scripts and data files, and WritePlotScripts over every
// figure (the mechanism figures are in mechanism_figures.cc, the paper-style
// comparisons in comparison_figures.cc; RenderPlots, which runs gnuplot, is
// in gnuplot.cc).
#include "report/plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "report/comparison_figures.h"
#include "report/internal/gnuplot_text.h"
#include "report/mechanism_figures.h"
#include "report/multiple_choice_figures.h"
#include "report/ruler_figures.h"

namespace hlab::report {
namespace {

using internal::Color;
using internal::FileSafe;
using internal::G;
using internal::Header;
using internal::MakePlot;
using internal::Quote;
using internal::WriteText;

// A fit's A or B, by its log when it overflowed a double ("exp(812.3)").
std::string Coefficient(double value, double log_value) {
  if (std::isfinite(value) || !std::isfinite(log_value)) return G(value);
  return absl::StrCat("exp(", G(log_value), ")");
}

// One succeeded run's point for a target.
struct Point {
  const RunRow* run = nullptr;
  double value = 0;
  std::optional<double> predicted;
};

// The points of one architecture for one target, grouped by scale (N).
struct ArchSeries {
  std::string arch;
  std::string data_file;  // relative to the report directory
  const FitRow* fit = nullptr;
  std::vector<std::vector<Point>> scales;  // by N; each by D
};

std::vector<ArchSeries> SeriesOf(const StudyData& study,
                                 const std::string& target) {
  std::vector<ArchSeries> out;
  for (const std::string& arch : study.Architectures()) {
    ArchSeries s;
    s.arch = arch;
    s.data_file = absl::StrCat("data/", target, "_", FileSafe(arch), ".dat");
    s.fit = study.FindFit(arch, target);
    std::map<std::pair<double, std::string>, std::vector<Point>> by_scale;
    for (const RunRow& r : study.runs) {
      if (r.arch != arch || !r.succeeded() || r.n <= 0 || r.d <= 0) continue;
      const std::optional<double> v = r.Target(target);
      if (!v) continue;
      Point p;
      p.run = &r;
      p.value = *v;
      if (s.fit != nullptr) p.predicted = s.fit->Law().Predict(r.n, r.d);
      by_scale[{r.n, r.scale}].push_back(p);
    }
    if (by_scale.empty()) continue;
    for (auto& [key, points] : by_scale) {
      std::sort(
          points.begin(), points.end(),
          [](const Point& a, const Point& b) { return a.run->d < b.run->d; });
      s.scales.push_back(std::move(points));
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string DataFile(const ArchSeries& s, const std::string& target) {
  std::string out = absl::StrCat(
      "# hlab report: ", TargetLabel(target), " of architecture ", s.arch,
      "'s succeeded runs, one block per scale (gnuplot: index i)\n");
  if (s.fit != nullptr) {
    absl::StrAppend(&out, "# fitted L(N, D) = ", G(s.fit->E), " + ",
                    Coefficient(s.fit->A, s.fit->log_A), "/N^", G(s.fit->alpha),
                    " + ", Coefficient(s.fit->B, s.fit->log_B), "/D^",
                    G(s.fit->beta), "\n");
  } else {
    out += "# no fit: predicted and rel_residual are NaN\n";
  }
  out += "# N D observed predicted rel_residual held_out scale run_id\n";
  for (size_t i = 0; i < s.scales.size(); ++i) {
    if (i > 0) out += "\n\n";
    for (const Point& p : s.scales[i]) {
      const double predicted = p.predicted.value_or(NAN);
      absl::StrAppend(&out, G(p.run->n), " ", G(p.run->d), " ", G(p.value), " ",
                      G(predicted), " ", G(p.value / predicted - 1), " ",
                      p.run->verify ? 1 : 0, " ", FileSafe(p.run->scale), " ",
                      p.run->run_id, "\n");
    }
  }
  return out;
}

// One term of the law in gnuplot: "A0 / N**alpha0" with A0 defined, or,
// when A overflowed a double, "exp(log_A0 - alpha0 * log(N))".
std::string LawTerm(const char* coefficient, double value, double log_value,
                    const char* exponent, const char* variable, size_t i,
                    std::string* definitions) {
  if (std::isfinite(value)) {
    absl::StrAppendFormat(definitions, "%s%d = %s; ", coefficient, i, G(value));
    return absl::StrFormat("%s%d / %s**%s%d", coefficient, i, variable,
                           exponent, i);
  }
  absl::StrAppendFormat(definitions, "log_%s%d = %s; ", coefficient, i,
                        G(log_value));
  return absl::StrFormat("exp(log_%s%d - %s%d * log(%s))", coefficient, i,
                         exponent, i, variable);
}

// The coefficients of one fit as script variables with suffix i.
std::string LawVariables(const FitRow& f, size_t i) {
  std::string definitions = absl::StrFormat("E%d = %s; ", i, G(f.E));
  const std::string a_term =
      LawTerm("A", f.A, f.log_A, "alpha", "N", i, &definitions);
  const std::string b_term =
      LawTerm("B", f.B, f.log_B, "beta", "D", i, &definitions);
  return absl::StrFormat(
      "%salpha%d = %s; beta%d = %s\nL%d(N, D) = E%d + %s + %s\n", definitions,
      i, G(f.alpha), i, G(f.beta), i, i, a_term, b_term);
}

// The token axes reach this factor past the smallest and largest D.
constexpr double kTokenMargin = 1.25;

// The smallest and largest tokens D of every series.
std::pair<double, double> TokenRange(const std::vector<ArchSeries>& series) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const ArchSeries& s : series) {
    for (const auto& scale : s.scales) {
      for (const Point& p : scale) {
        lo = std::min(lo, p.run->d);
        hi = std::max(hi, p.run->d);
      }
    }
  }
  return {lo, hi};
}

// "50k", "1M", "2.5G": a token count for a tick label.
std::string TokenLabel(double v) {
  if (v >= 1e9) return absl::StrFormat("%gG", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%gM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%gk", v / 1e3);
  return absl::StrFormat("%g", v);
}

// The x range and tics of a log token axis for data from d_min to d_max:
// tics at 1, 2, 5 per decade, or 1..9 when that gives fewer than three, or
// else at d_min and d_max (sweeps often span less than a decade, where
// gnuplot's own log tics leave one label or none).
std::string TokenAxis(double d_min, double d_max) {
  const double lo = d_min / kTokenMargin;
  const double hi = d_max * kTokenMargin;
  std::vector<double> tics;
  for (const std::vector<double>& mantissas :
       {std::vector<double>{1, 2, 5},
        std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    tics.clear();
    for (double decade = std::pow(10, std::floor(std::log10(lo))); decade <= hi;
         decade *= 10) {
      for (double m : mantissas) {
        if (m * decade >= lo && m * decade <= hi) tics.push_back(m * decade);
      }
    }
    if (tics.size() >= 3) break;
  }
  if (tics.size() < 2) {
    tics = {d_min};
    if (d_max > d_min) tics.push_back(d_max);
  }
  std::vector<std::string> items;
  for (double t : tics) {
    items.push_back(absl::StrCat("\"", TokenLabel(t), "\" ", G(t)));
  }
  return absl::StrCat("set logscale x\nset xtics (", absl::StrJoin(items, ", "),
                      ")\nset xrange [", G(lo), ":", G(hi), "]\n");
}

std::string TokensScript(const Plot& plot, const std::string& target,
                         const std::vector<ArchSeries>& series) {
  const int cols = static_cast<int>(std::min<size_t>(series.size(), 4));
  const int rows = static_cast<int>((series.size() + cols - 1) / cols);
  std::string gp = Header(plot, 380 * cols + 40, 340 * rows + 50);
  const auto [d_min, d_max] = TokenRange(series);
  absl::StrAppend(
      &gp, TokenAxis(d_min, d_max), "set xlabel \"tokens D\"\nset ylabel ",
      Quote(TargetLabel(target)), "\nset multiplot layout ", rows, ",", cols,
      " title ", Quote(plot.title + "; lines: fitted L(N, D)"), "\n");
  for (size_t a = 0; a < series.size(); ++a) {
    const ArchSeries& s = series[a];
    absl::StrAppend(&gp, "\n# ", s.arch, "\n");
    std::vector<std::string> clauses;
    if (s.fit != nullptr) {
      gp += LawVariables(*s.fit, a);
      absl::StrAppend(&gp, "set title ", Quote(s.arch), "\n");
    } else {
      absl::StrAppend(&gp, "set title ", Quote(s.arch + " (no fit)"), "\n");
    }
    for (size_t i = 0; i < s.scales.size(); ++i) {
      const RunRow& first = *s.scales[i].front().run;
      const std::string title =
          absl::StrFormat("%s N=%.3g%s", first.scale, first.n,
                          first.verify ? " (held out)" : "");
      absl::StrAppend(&clauses.emplace_back(), "\"", s.data_file, "\" index ",
                      i, " using 2:3 with points pt ", first.verify ? 6 : 7,
                      " ps 1.1 lc rgb \"", Color(i), "\" title ", Quote(title));
      if (s.fit != nullptr) {
        absl::StrAppend(&clauses.emplace_back(), "L", a, "(", G(first.n),
                        ", x) with lines lw 1.5 lc rgb \"", Color(i), "\"",
                        first.verify ? " dt 2" : "", " notitle");
      }
    }
    absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  }
  gp += "unset multiplot\n";
  return gp;
}

// Fit (held_out = 0) and held-out (1) points of each fitted architecture.
std::string PointClauses(const std::vector<ArchSeries>& series,
                         const std::string& x, const std::string& y) {
  std::vector<std::string> clauses;
  for (size_t a = 0; a < series.size(); ++a) {
    const ArchSeries& s = series[a];
    if (s.fit == nullptr) continue;
    bool any_verify = false;
    for (const auto& scale : s.scales) any_verify |= scale.front().run->verify;
    absl::StrAppend(&clauses.emplace_back(), "\"", s.data_file,
                    "\" using ($6 == 0 ? ", x, " : NaN):", y,
                    " with points pt 7 ps 1.1 lc rgb \"", Color(a), "\" title ",
                    Quote(s.arch + " fit"));
    if (any_verify) {
      absl::StrAppend(&clauses.emplace_back(), "\"", s.data_file,
                      "\" using ($6 == 1 ? ", x, " : NaN):", y,
                      " with points pt 6 ps 1.6 lw 1.5 lc rgb \"", Color(a),
                      "\" title ", Quote(s.arch + " held out"));
    }
  }
  return absl::StrJoin(clauses, ", \\\n     ");
}

std::string ObservedScript(const Plot& plot, const std::string& target,
                           const std::vector<ArchSeries>& series) {
  std::string gp = Header(plot, 620, 580);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const ArchSeries& s : series) {
    if (s.fit == nullptr) continue;
    for (const auto& scale : s.scales) {
      for (const Point& p : scale) {
        lo = std::min({lo, p.value, *p.predicted});
        hi = std::max({hi, p.value, *p.predicted});
      }
    }
  }
  const double pad = std::max(hi - lo, 1e-6 * std::abs(hi)) * 0.05;
  absl::StrAppend(&gp, "set title ", Quote(plot.title), "\n", "set xlabel ",
                  Quote("predicted " + TargetLabel(target)), "\nset ylabel ",
                  Quote("observed " + TargetLabel(target)),
                  "\nset size square\nset key top left\n", "set xrange [",
                  G(lo - pad), ":", G(hi + pad), "]\nset yrange [", G(lo - pad),
                  ":", G(hi + pad), "]\n", "plot ",
                  PointClauses(series, "$4", "3"),
                  ", \\\n     x with lines dt 2 lw 1.2 lc rgb \"black\" "
                  "title \"y = x\"\n");
  return gp;
}

std::string ResidualScript(const Plot& plot,
                           const std::vector<ArchSeries>& series) {
  std::string gp = Header(plot, 760, 480);
  const auto [d_min, d_max] = TokenRange(series);
  absl::StrAppend(&gp, "set title ", Quote(plot.title), "\n",
                  TokenAxis(d_min, d_max), "set key outside right top\n",
                  "set xlabel \"tokens D\"\n"
                  "set ylabel \"observed / predicted - 1 (%)\"\n",
                  "plot ", PointClauses(series, "$2", "($5 * 100)"),
                  ", \\\n     0 with lines dt 2 lw 1.2 lc rgb \"black\" "
                  "notitle\n");
  return gp;
}

}  // namespace

absl::StatusOr<std::vector<Plot>> WritePlotScripts(const StudyData& study,
                                                   const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir + "/data", ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", dir, "/data: ", ec.message()));
  }
  std::vector<Plot> plots;
  // The paper-style comparisons lead (comparison_figures.h).
  HLAB_RETURN_IF_ERROR(WriteComparisonFigures(study, dir, &plots));
  for (const std::string target : kTargets) {
    const std::string label = TargetLabel(target);
    const std::vector<ArchSeries> series = SeriesOf(study, target);
    std::vector<std::string> unfitted;
    for (const ArchSeries& s : series) {
      if (s.fit == nullptr) unfitted.push_back(s.arch);
    }
    const bool any_fit = unfitted.size() < series.size();

    Plot tokens = MakePlot(
        absl::StrCat(target, "_vs_tokens"), target,
        absl::StrCat(label == "loss" ? "Loss" : label, " against tokens D"),
        absl::StrCat(label,
                     " of each succeeded run against its tokens D (log "
                     "scale), one panel per architecture, one colour per "
                     "scale N; lines: the fitted L(N, D) at each scale's N "
                     "(dashed, open points: held-out scales)"));
    Plot observed = MakePlot(
        absl::StrCat(target, "_observed_vs_predicted"), target,
        absl::StrCat("Observed against predicted ", label),
        absl::StrCat("observed ", label,
                     " against the fitted law's prediction; filled: fit "
                     "points, open: held-out (verify) points; dashed: y = x"));
    Plot residuals = MakePlot(
        absl::StrCat(target, "_residuals"), target,
        absl::StrCat("Relative residuals of ", label),
        absl::StrCat("observed / predicted - 1 of ", label,
                     ", in percent, against tokens D; filled: fit points, "
                     "open: held-out points"));
    if (series.empty()) {
      const std::string note = absl::StrCat(
          "no ", label, " values in sweep ", study.sweep_id,
          " yet: no succeeded run has ",
          target == "loss" ? "a loss" : "a log_longppl (or longppl) eval");
      for (Plot* p : {&tokens, &observed, &residuals}) p->note = note;
    } else {
      for (const ArchSeries& s : series) {
        HLAB_RETURN_IF_ERROR(
            WriteText(dir + "/" + s.data_file, DataFile(s, target)));
      }
      tokens.scripted = true;
      HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + tokens.name + ".gp",
                                     TokensScript(tokens, target, series)));
      if (any_fit) {
        observed.scripted = residuals.scripted = true;
        HLAB_RETURN_IF_ERROR(
            WriteText(dir + "/" + observed.name + ".gp",
                      ObservedScript(observed, target, series)));
        HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + residuals.name + ".gp",
                                       ResidualScript(residuals, series)));
      } else {
        const std::string note = absl::StrCat(
            "no fit of ", label, " for any architecture (",
            absl::StrJoin(unfitted, ", "), "); see the fits table");
        observed.note = residuals.note = note;
      }
      if (any_fit && !unfitted.empty()) {
        const std::string missing = absl::StrCat(
            " Not fitted, left out: ", absl::StrJoin(unfitted, ", "), ".");
        observed.caption += missing;
        residuals.caption += missing;
      }
    }
    plots.push_back(std::move(tokens));
    plots.push_back(std::move(observed));
    plots.push_back(std::move(residuals));
  }
  HLAB_RETURN_IF_ERROR(WriteMechanismFigures(study, dir, &plots));
  HLAB_RETURN_IF_ERROR(WriteMultipleChoiceFigures(study, dir, &plots));
  HLAB_RETURN_IF_ERROR(WriteRulerFigures(study, dir, &plots));
  return plots;
}

}  // namespace hlab::report
