// The RULER figure (report/ruler_figures.h).
#include "report/ruler_figures.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "report/internal/gnuplot_text.h"

namespace hlab::report {

using internal::Color;
using internal::FileSafe;
using internal::G;
using internal::Header;
using internal::MakePlot;
using internal::Quote;
using internal::WriteText;

absl::Status WriteRulerFigures(const StudyData& study, const std::string& dir,
                               std::vector<Plot>* plots) {
  std::map<std::string, const RunRow*> runs;
  for (const RunRow& r : study.runs) runs[r.run_id] = &r;
  // Architecture -> its runs with a ruler_score.
  std::map<std::string, std::vector<std::pair<const RunRow*, double>>> archs;
  for (const RulerPoint& p : study.ruler) {
    auto run = runs.find(p.run_id);
    if (run == runs.end() || p.metric != "ruler_score") continue;
    archs[run->second->arch].emplace_back(run->second, p.value);
  }
  if (archs.empty()) return absl::OkStatus();
  Plot plot = MakePlot(
      "ruler_score", "", "RULER: score against D",
      "RULER's score (the mean string match over its tasks and lengths, by "
      "greedy decoding; docs/evaluation.md) of each architecture's runs at "
      "its largest scale with it, against training tokens D");
  std::string gp = Header(plot, 720, 460);
  absl::StrAppend(&gp,
                  "set xlabel \"training tokens D\"\n"
                  "set ylabel \"ruler_score\"\n"
                  "set logscale x\nset yrange [0:1.05]\n"
                  "set key outside right top\n");
  std::vector<std::string> clauses;
  size_t i = 0;
  for (const auto& [arch, points] : archs) {
    double largest = 0;
    for (const auto& [run, v] : points) largest = std::max(largest, run->n);
    std::vector<std::pair<double, double>> line;
    std::string scale;
    for (const auto& [run, v] : points) {
      if (run->n == largest) {
        line.emplace_back(run->d, v);
        scale = run->scale;
      }
    }
    std::sort(line.begin(), line.end());
    const std::string file =
        absl::StrCat("data/ruler_", FileSafe(arch), ".dat");
    std::string data = absl::StrCat("# hlab report: ruler_score of ", arch,
                                    " at scale ", scale, "\n# D score\n");
    for (const auto& [d, v] : line) {
      absl::StrAppend(&data, G(d), " ", G(v), "\n");
    }
    HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + file, data));
    clauses.push_back(absl::StrCat(
        "\"", file, "\" using 1:2 with linespoints pt 7 ps 0.8 lw 1.5 ",
        "lc rgb \"", Color(i++), "\" title ",
        Quote(absl::StrFormat("%s %s N=%.3g", arch, scale, largest))));
  }
  absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  plot.scripted = true;
  HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + plot.name + ".gp", gp));
  plots->push_back(std::move(plot));
  return absl::OkStatus();
}

}  // namespace hlab::report
