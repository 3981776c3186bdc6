// Multiple-choice figures (report/multiple_choice_figures.h).
#include "report/multiple_choice_figures.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

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

// One architecture's line of a task's figure: its runs at the largest
// scale with the task scored, by D.
struct McLine {
  std::string arch, scale, data_file;
  double n = 0;
  struct Point {
    double d;
    std::optional<double> acc, acc_stderr, acc_norm, acc_norm_stderr;
  };
  std::vector<Point> points;
};

const MultipleChoiceRow* Scores(const StudyData& study, const RunRow& run,
                                const std::string& task) {
  for (const MultipleChoiceRow& m : study.multiple_choice) {
    if (m.run_id == run.run_id && m.task == task) return &m;
  }
  return nullptr;
}

std::vector<McLine> Lines(const StudyData& study, const std::string& task) {
  std::vector<McLine> out;
  for (const std::string& arch : study.Architectures()) {
    McLine line;
    line.arch = arch;
    for (const RunRow& r : study.runs) {
      if (r.arch == arch && Scores(study, r, task) != nullptr && r.n > line.n) {
        line.n = r.n;
        line.scale = r.scale;
      }
    }
    if (line.n == 0) continue;
    for (const RunRow& r : study.runs) {
      if (r.arch != arch || r.n != line.n) continue;
      const MultipleChoiceRow* m = Scores(study, r, task);
      if (m == nullptr) continue;
      line.points.push_back(
          {r.d, m->acc, m->acc_stderr, m->acc_norm, m->acc_norm_stderr});
    }
    std::sort(line.points.begin(), line.points.end(),
              [](const auto& a, const auto& b) { return a.d < b.d; });
    line.data_file =
        absl::StrCat("data/mc_", FileSafe(task), "_", FileSafe(arch), ".dat");
    out.push_back(std::move(line));
  }
  return out;
}

// A value or its stderr in a data file ("NaN" when absent: not drawn).
std::string Cell(const std::optional<double>& v) { return v ? G(*v) : "NaN"; }

std::string Script(const Plot& plot, const std::string& task,
                   const std::vector<McLine>& lines) {
  std::string gp = Header(plot, 720, 460);
  absl::StrAppend(
      &gp,
      "set xlabel \"training tokens D\"\n"
      "set ylabel \"accuracy\"\n"
      "set logscale x\nset yrange [0:1.05]\n"
      "set key outside right top\n"
      "set title ",
      Quote(absl::StrCat("Multiple choice: ", task, ", accuracy against D")),
      "\n");
  std::vector<std::string> clauses;
  for (size_t i = 0; i < lines.size(); ++i) {
    const McLine& l = lines[i];
    const std::string name =
        absl::StrFormat("%s %s N=%.3g", l.arch, l.scale, l.n);
    absl::StrAppend(&clauses.emplace_back(), "\"", l.data_file,
                    "\" using 1:4:5 with yerrorlines pt 7 ps 0.8 lw 1.5 lc "
                    "rgb \"",
                    Color(i), "\" title ", Quote(name + " acc_norm"));
    absl::StrAppend(&clauses.emplace_back(), "\"", l.data_file,
                    "\" using 1:2 with linespoints dt 2 pt 6 ps 0.8 lw 1 lc "
                    "rgb \"",
                    Color(i), "\" title ", Quote(name + " acc"));
  }
  absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
  return gp;
}

}  // namespace

absl::Status WriteMultipleChoiceFigures(const StudyData& study,
                                        const std::string& dir,
                                        std::vector<Plot>* plots) {
  std::set<std::string> tasks;
  for (const MultipleChoiceRow& m : study.multiple_choice) tasks.insert(m.task);
  for (const std::string& task : tasks) {
    const std::vector<McLine> lines = Lines(study, task);
    if (lines.empty()) continue;
    Plot plot = MakePlot(
        absl::StrCat("mc_", FileSafe(task)), "",
        absl::StrCat("Multiple choice: ", task, " against D"),
        absl::StrCat(
            "accuracy on the multiple-choice task ", task,
            " (lm-evaluation-harness's conventions, docs/evaluation.md): "
            "acc_norm (the choice's log-likelihood per character) with its "
            "standard error, and acc (summed log-likelihood) dashed, "
            "against training tokens D, at each architecture's largest "
            "scale that has it"));
    for (const McLine& line : lines) {
      std::string data = absl::StrCat(
          "# hlab report: multiple choice ", task, " of ", line.arch, " ",
          line.scale, "\n# D acc acc_stderr acc_norm acc_norm_stderr\n");
      for (const McLine::Point& p : line.points) {
        absl::StrAppend(&data, G(p.d), " ", Cell(p.acc), " ",
                        Cell(p.acc_stderr), " ", Cell(p.acc_norm), " ",
                        Cell(p.acc_norm_stderr), "\n");
      }
      HLAB_RETURN_IF_ERROR(WriteText(dir + "/" + line.data_file, data));
    }
    plot.scripted = true;
    HLAB_RETURN_IF_ERROR(
        WriteText(dir + "/" + plot.name + ".gp", Script(plot, task, lines)));
    plots->push_back(std::move(plot));
  }
  return absl::OkStatus();
}

}  // namespace hlab::report
