#include "report/comparison_figures.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

using Figure = std::function<std::optional<double>(const RunRow&)>;

// One architecture's points in one panel: (x, y, run id), by x.
struct Line {
  std::string arch;
  size_t color = 0;  // the architecture's index in the sweep
  std::vector<std::tuple<double, double, std::string>> points;
};

// One panel per scale (by N), each with the lines of `archs` that have
// points there.
struct Panel {
  std::string scale;
  double n = 0, n_min = 0;  // appendix-B matching: N varies a little
  std::string data_file;
  std::vector<Line> lines;
};

std::vector<Panel> Panels(const StudyData& study, const std::string& figure,
                          const std::vector<std::string>& archs,
                          const Figure& y, bool x_is_dn) {
  const std::vector<std::string> all = study.Architectures();
  std::map<std::pair<double, std::string>, std::map<std::string, Line>> cells;
  for (const RunRow& r : study.runs) {
    if (!r.succeeded() || r.n <= 0 || r.d <= 0) continue;
    if (std::find(archs.begin(), archs.end(), r.arch) == archs.end()) continue;
    const std::optional<double> v = y(r);
    if (!v || !std::isfinite(*v)) continue;
    Line& line = cells[{r.n, r.scale}][r.arch];
    line.arch = r.arch;
    line.color = std::find(all.begin(), all.end(), r.arch) - all.begin();
    line.points.emplace_back(x_is_dn ? r.d / r.n : r.d, *v, r.run_id);
  }
  // Appendix-B matching moves N a little between architectures: a scale's
  // panel gathers its runs under the scale's name.
  std::map<std::string, Panel> by_scale;
  for (auto& [key, lines] : cells) {
    Panel& p = by_scale[key.second];
    p.scale = key.second;
    p.n = std::max(p.n, key.first);
    p.n_min = p.n_min == 0 ? key.first : std::min(p.n_min, key.first);
    for (auto& [arch, line] : lines) p.lines.push_back(std::move(line));
  }
  std::vector<Panel> out;
  for (auto& [scale, p] : by_scale) {
    std::sort(p.lines.begin(), p.lines.end(),
              [](const Line& a, const Line& b) { return a.color < b.color; });
    for (Line& l : p.lines) std::sort(l.points.begin(), l.points.end());
    p.data_file = absl::StrCat("data/", figure, "_", FileSafe(scale), ".dat");
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(),
            [](const Panel& a, const Panel& b) { return a.n < b.n; });
  return out;
}

std::string PanelData(const Plot& plot, const Panel& panel) {
  std::string out = absl::StrCat("# hlab report: ", plot.title, ", scale ",
                                 panel.scale, "; one block per architecture ",
                                 "(gnuplot: index i)\n# x y run_id\n");
  for (size_t i = 0; i < panel.lines.size(); ++i) {
    if (i > 0) out += "\n\n";
    absl::StrAppend(&out, "# ", panel.lines[i].arch, "\n");
    for (const auto& [x, y, run] : panel.lines[i].points) {
      absl::StrAppend(&out, G(x), " ", G(y), " ", run, "\n");
    }
  }
  return out;
}

std::string PanelsScript(const Plot& plot, const std::vector<Panel>& panels,
                         const std::string& xlabel, const std::string& ylabel) {
  const size_t cols = std::min<size_t>(2, panels.size());
  const size_t rows = (panels.size() + cols - 1) / cols;
  std::string gp = Header(plot, 470 * cols + 40, 360 * rows + 50);
  absl::StrAppend(&gp, "set logscale x\nset xlabel ", Quote(xlabel),
                  "\nset ylabel ", Quote(ylabel),
                  "\nset key outside right top font \",8\"\n",
                  "set multiplot layout ", rows, ",", cols, " title ",
                  Quote(plot.title), "\n");
  for (const Panel& p : panels) {
    absl::StrAppend(
        &gp, "\nset title ",
        Quote(absl::StrCat(
            p.scale, " (N ", G(std::round(p.n_min)),
            p.n_min < p.n ? absl::StrCat("-", G(std::round(p.n))) : "", ")")),
        "\n");
    std::vector<std::string> clauses;
    for (size_t i = 0; i < p.lines.size(); ++i) {
      absl::StrAppend(&clauses.emplace_back(), "\"", p.data_file, "\" index ",
                      i, " using 1:2 with linespoints pt 7 ps 0.7 lw 1.4 lc ",
                      "rgb \"", Color(p.lines[i].color), "\" title ",
                      Quote(p.lines[i].arch));
    }
    absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  }
  gp += "unset multiplot\n";
  return gp;
}

absl::Status WriteFigure(const StudyData& study, const std::string& dir,
                         const std::vector<std::string>& archs, const Figure& y,
                         bool x_is_dn, const std::string& ylabel,
                         const std::string& empty, Plot plot,
                         std::vector<Plot>* plots) {
  const std::vector<Panel> panels = Panels(study, plot.name, archs, y, x_is_dn);
  if (panels.empty()) {
    plot.note = empty;
  } else {
    for (const Panel& p : panels) {
      HLAB_RETURN_IF_ERROR(
          WriteText(dir + "/" + p.data_file, PanelData(plot, p)));
    }
    HLAB_RETURN_IF_ERROR(WriteText(
        dir + "/" + plot.name + ".gp",
        PanelsScript(plot, panels, x_is_dn ? "D/N" : "tokens D", ylabel)));
    plot.scripted = true;
  }
  plots->push_back(std::move(plot));
  return absl::OkStatus();
}

std::optional<double> LogLongPpl(const RunRow& r) { return r.log_longppl; }
std::optional<double> ValLoss(const RunRow& r) { return r.val_loss; }

}  // namespace

absl::Status WriteComparisonFigures(const StudyData& study,
                                    const std::string& dir,
                                    std::vector<Plot>* plots) {
  const std::vector<std::string> archs = study.Architectures();
  HLAB_RETURN_IF_ERROR(WriteFigure(
      study, dir, archs, LogLongPpl, /*x_is_dn=*/true, "log(LongPPL)",
      "no succeeded run has a log(LongPPL) yet (evaluation.longppl)",
      MakePlot("longppl_vs_dn", "longppl", "log(LongPPL) against D/N",
               "each succeeded run's log(LongPPL) against its tokens per "
               "parameter D/N (log scale), one line per architecture, one "
               "panel per scale: which architectures gain long-context "
               "ability first, and whether they converge"),
      plots));
  HLAB_RETURN_IF_ERROR(WriteFigure(
      study, dir, archs, ValLoss, /*x_is_dn=*/false, "validation loss",
      "no succeeded run has a validation loss yet "
      "(evaluation.validation_loss)",
      MakePlot("loss_overlaid", "loss",
               "Validation loss against D, architectures overlaid",
               "each succeeded run's validation loss against its tokens D "
               "(log scale), every architecture in one panel per scale"),
      plots));
  // Section 6: each swa-W-nope beside its swa-W and full.
  std::vector<std::string> nope;
  for (const std::string& arch : archs) {
    if (!absl::EndsWith(arch, "-nope")) continue;
    const std::string base = arch.substr(0, arch.size() - 5);
    if (std::find(archs.begin(), archs.end(), base) == archs.end()) continue;
    nope.push_back(base);
    nope.push_back(arch);
  }
  if (!nope.empty()) {
    if (std::find(archs.begin(), archs.end(), "full") != archs.end()) {
      nope.push_back("full");
    }
    HLAB_RETURN_IF_ERROR(WriteFigure(
        study, dir, nope, LogLongPpl, /*x_is_dn=*/true, "log(LongPPL)",
        "no NoPE pair has a log(LongPPL) yet",
        MakePlot("nope", "longppl", "NoPE on the full layers: log(LongPPL)",
                 absl::StrCat("log(LongPPL) against D/N of ",
                              absl::StrJoin(nope, ", "),
                              ": NoPE on the full-attention layers of the "
                              "hybrid against RoPE (section 6), one panel "
                              "per scale")),
        plots));
  }
  return absl::OkStatus();
}

}  // namespace hlab::report
