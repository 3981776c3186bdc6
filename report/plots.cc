// Figure scripts and data files (RenderPlots, which runs gnuplot, is in
// gnuplot.cc).
#include "report/plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace hlab::report {
namespace {

// Colours of scales (first figure) and architectures (the others).
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                   "#bcbd22", "#17becf"};

std::string Color(size_t i) {
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

// A number for a script or data file, exactly.
std::string G(double v) {
  if (!std::isfinite(v)) return "NaN";
  return absl::StrFormat("%.17g", v);
}

// A fit's A or B, by its log when it overflowed a double ("exp(812.3)").
std::string Coefficient(double value, double log_value) {
  if (std::isfinite(value) || !std::isfinite(log_value)) return G(value);
  return absl::StrCat("exp(", G(log_value), ")");
}

// A gnuplot string literal (double quotes; enhanced-text specials escaped
// so names like "swa_32" print as written).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '_' || c == '^' || c == '@' || c == '&' || c == '{' || c == '}') {
      out += "\\\\";
    }
    out += c;
  }
  return out + "\"";
}

// A file-name-safe form of an architecture name.
std::string FileSafe(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '-' || c == '.';
    out += ok ? c : '_';
  }
  return out;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
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

// The opening of every script: terminal chosen by `fmt` (svg by default).
std::string Header(const Plot& plot, int width, int height) {
  return absl::StrCat(
      "# hlab report: ", plot.title, "\n# ", plot.caption,
      "\n# Re-run from this directory: gnuplot ", plot.name,
      ".gp (SVG); gnuplot -e 'fmt=\"png\"' ", plot.name, ".gp (PNG).\n",
      "if (!exists(\"fmt\")) fmt = \"svg\"\n", "if (fmt eq \"png\") {\n",
      "  set terminal pngcairo size ", width, ",", height,
      " font \"sans,10\"\n  set output \"", plot.name, ".png\"\n} else {\n",
      "  set terminal svg size ", width, ",", height,
      " font \"sans,11\" background \"white\"\n  set output \"", plot.name,
      ".svg\"\n}\n", "set grid lc rgb \"#dddddd\"\nset border lw 1.2\n",
      "set key top right box opaque samplen 2 font \",9\"\n",
      "set datafile missing \"NaN\"\n");
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

// The gradient profile figure's line of one architecture: its largest
// succeeded run (N, then D) with a profile, and that profile's bins.
struct ProfileLine {
  const RunRow* run = nullptr;
  std::string data_file;
  std::vector<std::pair<double, double>> points;  // bin middle, G / G_base
};

std::vector<ProfileLine> ProfileLines(const StudyData& study) {
  std::vector<ProfileLine> out;
  for (const std::string& arch : study.Architectures()) {
    ProfileLine line;
    for (const RunRow& r : study.runs) {
      if (r.arch != arch || !r.succeeded() || r.grad_profile.empty()) continue;
      if (line.run == nullptr || r.n > line.run->n ||
          (r.n == line.run->n && r.d > line.run->d)) {
        line.run = &r;
      }
    }
    if (line.run == nullptr) continue;
    const nlohmann::json details = nlohmann::json::parse(
        line.run->grad_profile, nullptr, /*allow_exceptions=*/false);
    if (!details.is_object() || !details.contains("bins") ||
        !details["bins"].is_array()) {
      continue;
    }
    for (const auto& bin : details["bins"]) {
      if (!bin.is_object() || !bin.contains("from") || !bin.contains("to") ||
          !bin["from"].is_number() || !bin["to"].is_number() ||
          !bin.contains("ratio") || !bin["ratio"].is_number()) {
        continue;
      }
      line.points.emplace_back(
          (bin["from"].get<double>() + bin["to"].get<double>()) / 2,
          bin["ratio"].get<double>());
    }
    if (line.points.empty()) continue;
    line.data_file = absl::StrCat("data/gradient_", FileSafe(arch), ".dat");
    out.push_back(std::move(line));
  }
  return out;
}

// The probing figure's line of one architecture: its largest succeeded
// run (N, then D) with layer probes, and each layer's accuracy.
struct ProbeLine {
  const RunRow* run = nullptr;
  std::string data_file;
  struct Point {
    double layer, accuracy, lo, hi;
  };
  std::vector<Point> points;
  double chance = 0;
};

std::vector<ProbeLine> ProbeLines(const StudyData& study) {
  std::vector<ProbeLine> out;
  for (const std::string& arch : study.Architectures()) {
    ProbeLine line;
    for (const RunRow& r : study.runs) {
      if (r.arch != arch || !r.succeeded() || r.probe_layers.empty()) continue;
      if (line.run == nullptr || r.n > line.run->n ||
          (r.n == line.run->n && r.d > line.run->d)) {
        line.run = &r;
      }
    }
    if (line.run == nullptr) continue;
    const nlohmann::json details = nlohmann::json::parse(
        line.run->probe_layers, nullptr, /*allow_exceptions=*/false);
    if (!details.is_object() || !details.contains("layers") ||
        !details["layers"].is_array()) {
      continue;
    }
    for (const auto& l : details["layers"]) {
      bool numbers = l.is_object();
      for (const char* key : {"layer", "accuracy", "lo", "hi"}) {
        numbers = numbers && l.contains(key) && l[key].is_number();
      }
      if (!numbers) continue;
      line.points.push_back({l["layer"].get<double>(),
                             l["accuracy"].get<double>(), l["lo"].get<double>(),
                             l["hi"].get<double>()});
    }
    if (line.points.empty()) continue;
    if (details.contains("chance") && details["chance"].is_number()) {
      line.chance = details["chance"].get<double>();
    }
    line.data_file = absl::StrCat("data/probing_", FileSafe(arch), ".dat");
    out.push_back(std::move(line));
  }
  return out;
}

std::string ProbeScript(const Plot& plot, const std::vector<ProbeLine>& lines) {
  std::string gp = Header(plot, 720, 460);
  absl::StrAppend(&gp,
                  "set xlabel \"layer (0: embeddings)\"\n"
                  "set ylabel \"probe test accuracy\"\n"
                  "set yrange [0:1]\nset xtics 1\nset key outside right top\n"
                  "set title \"Layer-wise probes: the needle's value from the "
                  "residual stream\"\n");
  std::vector<std::string> clauses;
  for (size_t i = 0; i < lines.size(); ++i) {
    const RunRow& r = *lines[i].run;
    absl::StrAppend(&clauses.emplace_back(), "\"", lines[i].data_file,
                    "\" using 1:2:3:4 with yerrorlines pt 7 ps 0.8 lw 1.5 lc "
                    "rgb \"",
                    Color(i), "\" title ",
                    Quote(absl::StrFormat("%s %s N=%.3g D/N=%.3g", r.arch,
                                          r.scale, r.n, r.d / r.n)));
  }
  if (!lines.empty() && lines[0].chance > 0) {
    clauses.push_back(absl::StrCat(G(lines[0].chance),
                                   " with lines dt 2 lc rgb \"#888888\" "
                                   "title \"chance\""));
  }
  absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  return gp;
}

std::string ProfileScript(const Plot& plot,
                          const std::vector<ProfileLine>& lines) {
  std::string gp = Header(plot, 720, 460);
  absl::StrAppend(&gp,
                  "set logscale xy\nset xlabel \"distance d (tokens back)\"\n"
                  "set ylabel \"G(d) / G_{base}\"\n"
                  "set title \"Gradient profile: G(d) / G_{base} against "
                  "distance\"\n");
  std::vector<std::string> clauses;
  for (size_t i = 0; i < lines.size(); ++i) {
    const RunRow& r = *lines[i].run;
    absl::StrAppend(&clauses.emplace_back(), "\"", lines[i].data_file,
                    "\" using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb "
                    "\"",
                    Color(i), "\" title ",
                    Quote(absl::StrFormat("%s %s N=%.3g D/N=%.3g", r.arch,
                                          r.scale, r.n, r.d / r.n)));
  }
  clauses.push_back("1 with lines dt 2 lc rgb \"#888888\" title \"G_{base}\"");
  absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  return gp;
}

// The retrieval figure's line of one architecture: its runs at the largest
// scale with a retrieval-head trace, by D, and the formation D: the first
// whose top head scores at least kRetrievalFormation.
struct RetrievalLine {
  std::string arch, scale, data_file;
  double n = 0;
  struct Point {
    double d, score;
    int64_t layer, head;
  };
  std::vector<Point> points;
  std::optional<double> formation_d;
};

std::vector<RetrievalLine> RetrievalLines(const StudyData& study) {
  std::vector<RetrievalLine> out;
  for (const std::string& arch : study.Architectures()) {
    RetrievalLine line;
    line.arch = arch;
    for (const RunRow& r : study.runs) {
      if (r.arch == arch && r.succeeded() && r.retrieval_score &&
          r.n > line.n) {
        line.n = r.n;
        line.scale = r.scale;
      }
    }
    if (line.n == 0) continue;
    for (const RunRow& r : study.runs) {
      if (r.arch != arch || !r.succeeded() || !r.retrieval_score ||
          r.n != line.n) {
        continue;
      }
      RetrievalLine::Point p{r.d, *r.retrieval_score, -1, -1};
      const nlohmann::json details = nlohmann::json::parse(
          r.retrieval_heads, nullptr, /*allow_exceptions=*/false);
      if (details.is_object() && details.contains("top") &&
          details["top"].is_array() && !details["top"].empty()) {
        const auto& top = details["top"][0];
        if (top.is_object() && top.contains("layer") &&
            top["layer"].is_number_integer() && top.contains("head") &&
            top["head"].is_number_integer()) {
          p.layer = top["layer"].get<int64_t>();
          p.head = top["head"].get<int64_t>();
        }
      }
      line.points.push_back(p);
    }
    std::sort(line.points.begin(), line.points.end(),
              [](const auto& a, const auto& b) { return a.d < b.d; });
    for (const auto& p : line.points) {
      if (p.score >= kRetrievalFormation) {
        line.formation_d = p.d;
        break;
      }
    }
    line.data_file = absl::StrCat("data/retrieval_", FileSafe(arch), ".dat");
    out.push_back(std::move(line));
  }
  return out;
}

std::string RetrievalScript(const Plot& plot,
                            const std::vector<RetrievalLine>& lines) {
  std::string gp = Header(plot, 720, 460);
  absl::StrAppend(&gp,
                  "set xlabel \"training tokens D\"\n"
                  "set ylabel \"top head's retrieval score\"\n"
                  "set logscale x\nset yrange [0:1.05]\n"
                  "set key outside right top\n"
                  "set title \"Retrieval heads: the top head's score against "
                  "D\"\n");
  std::vector<std::string> clauses;
  for (size_t i = 0; i < lines.size(); ++i) {
    const RetrievalLine& l = lines[i];
    absl::StrAppend(
        &clauses.emplace_back(), "\"", l.data_file,
        "\" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 "
        "lc rgb \"",
        Color(i), "\" title ",
        Quote(absl::StrFormat("%s %s N=%.3g", l.arch, l.scale, l.n)));
    if (l.formation_d) {
      absl::StrAppend(&clauses.emplace_back(), "\"", l.data_file,
                      "\" index 1 using 1:2 with points pt 6 ps 2.5 lw 2 lc "
                      "rgb \"",
                      Color(i), "\" notitle");
    }
  }
  clauses.push_back(absl::StrCat(G(kRetrievalFormation),
                                 " with lines dt 2 lc rgb \"#888888\" "
                                 "title \"formation threshold\""));
  absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  return gp;
}

// The Q-gradient figure's line of one architecture: its largest run (N,
// then D) with hook metrics, and one head's norms against tokens: the
// run's top retrieval head when it was traced and logged, else the head
// with the largest mean norm.
struct QGradLine {
  const RunRow* run = nullptr;
  std::string head, why, data_file;
  std::vector<std::pair<double, double>> points;  // (tokens, norm)
  std::optional<double> formation_d;
};

std::vector<QGradLine> QGradLines(const StudyData& study,
                                  const std::vector<RetrievalLine>& formed) {
  std::vector<QGradLine> out;
  std::map<std::string, std::map<std::string, std::vector<const QGradPoint*>>>
      by_run;  // run -> head -> points
  for (const QGradPoint& p : study.q_grad)
    by_run[p.run_id][p.head].push_back(&p);
  for (const std::string& arch : study.Architectures()) {
    QGradLine line;
    for (const RunRow& r : study.runs) {
      if (r.arch != arch || by_run.count(r.run_id) == 0) continue;
      if (line.run == nullptr || r.n > line.run->n ||
          (r.n == line.run->n && r.d > line.run->d)) {
        line.run = &r;
      }
    }
    if (line.run == nullptr) continue;
    const auto& heads = by_run[line.run->run_id];
    const nlohmann::json details = nlohmann::json::parse(
        line.run->retrieval_heads, nullptr, /*allow_exceptions=*/false);
    if (details.is_object() && details.contains("top") &&
        details["top"].is_array() && !details["top"].empty() &&
        details["top"][0].is_object()) {
      const auto& top = details["top"][0];
      if (top.contains("layer") && top["layer"].is_number_integer() &&
          top.contains("head") && top["head"].is_number_integer()) {
        const std::string head = absl::StrCat("l", top["layer"].get<int64_t>(),
                                              "h", top["head"].get<int64_t>());
        if (heads.count(head) > 0) {
          line.head = head;
          line.why = "top retrieval head";
        }
      }
    }
    if (line.head.empty()) {
      double best = -1;
      for (const auto& [head, points] : heads) {
        double mean = 0;
        for (const QGradPoint* p : points) mean += p->value / points.size();
        if (mean > best) {
          best = mean;
          line.head = head;
        }
      }
      line.why = "largest mean norm";
    }
    for (const QGradPoint* p : heads.at(line.head)) {
      line.points.emplace_back(p->tokens, p->value);
    }
    for (const RetrievalLine& r : formed) {
      if (r.arch == arch) line.formation_d = r.formation_d;
    }
    line.data_file = absl::StrCat("data/q_grad_", FileSafe(arch), ".dat");
    out.push_back(std::move(line));
  }
  return out;
}

std::string QGradScript(const Plot& plot, const std::vector<QGradLine>& lines) {
  std::string gp = Header(plot, 720, 460);
  absl::StrAppend(&gp,
                  "set xlabel \"training tokens D\"\n"
                  "set ylabel \"Q-projection gradient norm\"\n"
                  "set logscale y\nset key inside left top\n"
                  "set title \"Q-projection gradient norm of a full-attention "
                  "head\"\n");
  std::vector<std::string> clauses;
  for (size_t i = 0; i < lines.size(); ++i) {
    const QGradLine& l = lines[i];
    if (l.formation_d) {
      absl::StrAppend(&gp, "set arrow from ", G(*l.formation_d),
                      ", graph 0 to ", G(*l.formation_d),
                      ", graph 1 nohead dt 3 lw 1.5 lc rgb \"", Color(i),
                      "\"\n");
    }
    absl::StrAppend(&clauses.emplace_back(), "\"", l.data_file,
                    "\" using 1:2 with lines lw 1.5 lc rgb \"", Color(i),
                    "\" title ",
                    Quote(absl::StrFormat("%s %s %s (%s)", l.run->arch,
                                          l.run->scale, l.head, l.why)));
  }
  absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  return gp;
}

Plot MakePlot(std::string name, std::string target, std::string title,
              std::string caption) {
  Plot plot;
  plot.name = std::move(name);
  plot.target = std::move(target);
  plot.title = std::move(title);
  plot.caption = std::move(caption);
  return plot;
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
  // Appendix D.3, only for sweeps that profiled gradients.
  const std::vector<ProfileLine> lines = ProfileLines(study);
  if (!lines.empty()) {
    Plot profile = MakePlot(
        "gradient_profile", "",
        "Gradient profile: G(d) / G_base against distance",
        "the mean input-gradient norm of the last position's target logit "
        "at each distance d over its far-quarter floor G_base, log-binned, "
        "for each architecture's largest profiled run (appendix D.3, "
        "docs/evaluation.md); bins where G is 0 are not drawn");
    for (const ProfileLine& line : lines) {
      std::string data = absl::StrCat("# hlab report: gradient profile of run ",
                                      line.run->run_id, " (", line.run->arch,
                                      ")\n# d_mid ratio\n");
      for (const auto& [d, ratio] : line.points) {
        absl::StrAppend(&data, G(d), " ", G(ratio), "\n");
      }
      HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + line.data_file, data));
    }
    profile.scripted = true;
    HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + profile.name + ".gp",
                                   ProfileScript(profile, lines)));
    plots.push_back(std::move(profile));
  }
  // Appendix D.2, only for sweeps that probed layers.
  const std::vector<ProbeLine> probes = ProbeLines(study);
  if (!probes.empty()) {
    Plot probing = MakePlot(
        "probing", "", "Layer-wise probes: accuracy against layer",
        "test accuracy of a linear softmax probe of the needle's value "
        "(chance dashed) on the residual stream at the query "
        "position of synthetic NIAH samples, after each layer (0: the "
        "embeddings), with Wilson 95% intervals, for each architecture's "
        "largest probed run (appendix D.2, docs/evaluation.md)");
    for (const ProbeLine& line : probes) {
      std::string data =
          absl::StrCat("# hlab report: layer probes of run ", line.run->run_id,
                       " (", line.run->arch, ")\n# layer accuracy lo hi\n");
      for (const ProbeLine::Point& p : line.points) {
        absl::StrAppend(&data, G(p.layer), " ", G(p.accuracy), " ", G(p.lo),
                        " ", G(p.hi), "\n");
      }
      HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + line.data_file, data));
    }
    probing.scripted = true;
    HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + probing.name + ".gp",
                                   ProbeScript(probing, probes)));
    plots.push_back(std::move(probing));
  }
  // Appendix D.4, only for sweeps that traced retrieval heads.
  const std::vector<RetrievalLine> retrieval = RetrievalLines(study);
  if (!retrieval.empty()) {
    Plot heads = MakePlot(
        "retrieval_heads", "", "Retrieval heads: formation against D",
        absl::StrCat(
            "the Retrieval_Head score of each run's top full-attention head "
            "(its top-1 key in the needle and the generated token equal to "
            "it, on synthetic single-needle NIAH samples) against training "
            "tokens D, at each architecture's largest traced scale; the "
            "circled point is the formation D, the first whose score is at "
            "least ",
            G(kRetrievalFormation),
            " (dashed; appendix D.4, docs/evaluation.md)"));
    for (const RetrievalLine& line : retrieval) {
      std::string data =
          absl::StrCat("# hlab report: retrieval heads of ", line.arch, " ",
                       line.scale, "\n# D score top_layer top_head\n");
      for (const auto& p : line.points) {
        absl::StrAppend(&data, G(p.d), " ", G(p.score), " ", p.layer, " ",
                        p.head, "\n");
      }
      if (line.formation_d) {
        absl::StrAppend(&data, "\n\n# formation: D score\n",
                        G(*line.formation_d), " ", G(kRetrievalFormation),
                        "\n");
      }
      HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + line.data_file, data));
    }
    heads.scripted = true;
    HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + heads.name + ".gp",
                                   RetrievalScript(heads, retrieval)));
    plots.push_back(std::move(heads));
  }
  // The Q-gradient hook's curves, only for sweeps that logged them.
  const std::vector<QGradLine> q_grad = QGradLines(study, retrieval);
  if (!q_grad.empty()) {
    Plot curves = MakePlot(
        "q_grad", "", "Q-projection gradient norms against D",
        absl::StrCat(
            "the Frobenius norm of one full-attention head's rows of the "
            "q_proj weight gradient (before clipping) during training "
            "(analysis.q_grad_every_steps), for each architecture's largest "
            "run with the hook: its top retrieval head when traced, else "
            "its head with the largest mean norm; a dotted line marks the "
            "formation D of the retrieval figure (score >= ",
            G(kRetrievalFormation),
            ") where one was reached (appendix D.4, docs/evaluation.md)"));
    for (const QGradLine& line : q_grad) {
      std::string data = absl::StrCat(
          "# hlab report: q_proj gradient norm of ", line.head, ", run ",
          line.run->run_id, " (", line.run->arch, ")\n# tokens norm\n");
      for (const auto& [tokens, norm] : line.points) {
        absl::StrAppend(&data, G(tokens), " ", G(norm), "\n");
      }
      HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + line.data_file, data));
    }
    curves.scripted = true;
    HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + curves.name + ".gp",
                                   QGradScript(curves, q_grad)));
    plots.push_back(std::move(curves));
  }
  return plots;
}

}  // namespace hlab::report
