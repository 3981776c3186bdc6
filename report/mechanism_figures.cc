// Appendix D's figures (report/plots.h describes each).
#include "report/mechanism_figures.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "report/internal/gnuplot_text.h"

namespace hlab::report {
namespace {

using internal::Color;
using internal::FileSafe;
using internal::G;
using internal::Header;
using internal::MakePlot;
using internal::Quote;
using internal::WriteText;

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

// The formation figure's line of one architecture: the run of its largest
// scale with the most retrieval_score evals along training (at least
// kMinTrajectoryPoints: evaluation.trajectory's, or branch points), its
// scores against step, the Q-gradient norm of the top head of its best
// trace (the highest score) when the hook logged it, and the formation
// step.
constexpr size_t kMinTrajectoryPoints = 3;

struct TrajectoryLine {
  const RunRow* run = nullptr;
  std::string head;                                // "l1h0"
  std::vector<std::pair<int64_t, double>> scores;  // (step, score)
  std::vector<std::pair<int64_t, double>> q_grad;  // (step, norm)
  std::optional<int64_t> formation_step;
  std::string data_file;
};

// "l<layer>h<head>" of the first top head in a retrieval_heads details
// JSON; "" when it names none.
std::string TopHead(const std::string& details_text) {
  const nlohmann::json details =
      nlohmann::json::parse(details_text, nullptr, /*allow_exceptions=*/false);
  if (!details.is_object() || !details.contains("top") ||
      !details["top"].is_array() || details["top"].empty() ||
      !details["top"][0].is_object()) {
    return "";
  }
  const auto& top = details["top"][0];
  if (!top.contains("layer") || !top["layer"].is_number_integer() ||
      !top.contains("head") || !top["head"].is_number_integer()) {
    return "";
  }
  return absl::StrCat("l", top["layer"].get<int64_t>(), "h",
                      top["head"].get<int64_t>());
}

std::vector<TrajectoryLine> TrajectoryLines(const StudyData& study) {
  std::map<std::string, std::vector<const RetrievalPoint*>> by_run;
  for (const RetrievalPoint& p : study.retrieval) {
    by_run[p.run_id].push_back(&p);
  }
  std::vector<TrajectoryLine> out;
  for (const std::string& arch : study.Architectures()) {
    TrajectoryLine line;
    size_t best_points = 0;
    for (const RunRow& r : study.runs) {
      const auto found = by_run.find(r.run_id);
      if (r.arch != arch || found == by_run.end() ||
          found->second.size() < kMinTrajectoryPoints) {
        continue;
      }
      const size_t points = found->second.size();
      if (line.run == nullptr || r.n > line.run->n ||
          (r.n == line.run->n &&
           std::make_pair(points, r.d) >
               std::make_pair(best_points, line.run->d))) {
        line.run = &r;
        best_points = points;
      }
    }
    if (line.run == nullptr) continue;
    const std::vector<const RetrievalPoint*>& points = by_run[line.run->run_id];
    for (const RetrievalPoint* p : points) {
      line.scores.emplace_back(p->step, p->score);
    }
    std::sort(line.scores.begin(), line.scores.end());
    for (const auto& [step, score] : line.scores) {
      if (score >= kRetrievalFormation) {
        line.formation_step = step;
        break;
      }
    }
    // The head that formed: the top head of the best trace (the earliest
    // of equal scores), not of the newest, which may have dissolved.
    const RetrievalPoint* best = *std::max_element(
        points.begin(), points.end(), [](const auto* a, const auto* b) {
          return a->score != b->score ? a->score < b->score : a->step > b->step;
        });
    line.head = TopHead(best->details);
    for (const QGradPoint& q : study.q_grad) {
      if (q.run_id == line.run->run_id && q.head == line.head) {
        line.q_grad.emplace_back(q.step, q.value);
      }
    }
    std::sort(line.q_grad.begin(), line.q_grad.end());
    line.data_file = absl::StrCat("data/formation_", FileSafe(arch), ".dat");
    out.push_back(std::move(line));
  }
  return out;
}

std::string TrajectoryScript(const Plot& plot,
                             const std::vector<TrajectoryLine>& lines) {
  std::string gp = Header(plot, 760, 480);
  const bool any_q_grad =
      std::any_of(lines.begin(), lines.end(),
                  [](const TrajectoryLine& l) { return !l.q_grad.empty(); });
  absl::StrAppend(&gp,
                  "set xlabel \"training step\"\n"
                  "set ylabel \"top head's retrieval score\"\n"
                  "set yrange [0:1.05]\nset key outside right top\n"
                  "set title \"Retrieval-head formation along training\"\n");
  if (any_q_grad) {
    absl::StrAppend(&gp,
                    "set y2label \"Q-projection gradient norm (dashed)\"\n"
                    "set logscale y2\nset y2tics\nset ytics nomirror\n");
  }
  std::vector<std::string> clauses;
  for (size_t i = 0; i < lines.size(); ++i) {
    const TrajectoryLine& l = lines[i];
    if (l.formation_step) {
      absl::StrAppend(&gp, "set arrow from ", *l.formation_step,
                      ", graph 0 to ", *l.formation_step,
                      ", graph 1 nohead dt 3 lw 1.5 lc rgb \"", Color(i),
                      "\"\n");
    }
    absl::StrAppend(
        &clauses.emplace_back(), "\"", l.data_file,
        "\" index 0 using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 lc rgb \"",
        Color(i), "\" title ",
        Quote(absl::StrFormat("%s %s N=%.3g", l.run->arch, l.run->scale,
                              l.run->n)));
    if (!l.q_grad.empty()) {
      absl::StrAppend(&clauses.emplace_back(), "\"", l.data_file,
                      "\" index 1 using 1:2 axes x1y2 with lines dt 2 lw 1 "
                      "lc rgb \"",
                      Color(i), "\" title ",
                      Quote(absl::StrCat(l.run->arch, " ", l.head, " |dQ|")));
    }
  }
  clauses.push_back(absl::StrCat(G(kRetrievalFormation),
                                 " with lines dt 2 lc rgb \"#888888\" "
                                 "title \"formation threshold\""));
  absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  return gp;
}

}  // namespace

absl::Status WriteMechanismFigures(const StudyData& study,
                                   const std::string& dir,
                                   std::vector<Plot>* out) {
  std::vector<Plot>& plots = *out;
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
  // Formation along one trajectory, only for sweeps that traced retrieval
  // heads at several steps of a run (evaluation.trajectory).
  const std::vector<TrajectoryLine> trajectories = TrajectoryLines(study);
  if (!trajectories.empty()) {
    Plot formation = MakePlot(
        "retrieval_formation", "",
        "Retrieval-head formation against training step",
        absl::StrCat(
            "the top full-attention head's Retrieval_Head score at every "
            "evaluated step of one training trajectory per architecture (its "
            "largest scale's run with the most points: "
            "evaluation.trajectory, branch points, the end), with the "
            "Q-projection gradient norm of its best trace's top head "
            "(dashed, right axis) where the hook logged it; a dotted line "
            "marks the formation step, the first whose score is at least ",
            G(kRetrievalFormation), " (appendix D.4, docs/evaluation.md)"));
    for (const TrajectoryLine& line : trajectories) {
      std::string data = absl::StrCat(
          "# hlab report: retrieval-head formation of run ", line.run->run_id,
          " (", line.run->arch, " ", line.run->scale, ")\n# step score\n");
      for (const auto& [step, score] : line.scores) {
        absl::StrAppend(&data, step, " ", G(score), "\n");
      }
      absl::StrAppend(&data, "\n\n# q_proj gradient norm of ",
                      line.head.empty() ? "(no top head)" : line.head,
                      ": step norm\n");
      for (const auto& [step, norm] : line.q_grad) {
        absl::StrAppend(&data, step, " ", G(norm), "\n");
      }
      HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + line.data_file, data));
    }
    formation.scripted = true;
    HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + formation.name + ".gp",
                                   TrajectoryScript(formation, trajectories)));
    plots.push_back(std::move(formation));
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
  return absl::OkStatus();
}

}  // namespace hlab::report
