#include "report/replay_figure.h"
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "report/internal/gnuplot_text.h"

namespace hlab::report {
namespace {

using internal::Color;
using internal::G;
using internal::Header;
using internal::MakePlot;
using internal::Quote;
using internal::WriteText;

absl::Status MakeDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plot> WriteReplayFigure(
    const std::vector<analysis::ReplayResult>& results,
    const std::string& title, const std::string& dir) {
  if (results.empty()) {
    return absl::InvalidArgumentError("no replay to draw");
  }
  if (absl::Status s = MakeDir(dir); !s.ok()) return s;
  if (absl::Status s = MakeDir(dir + "/data"); !s.ok()) return s;
  Plot plot = MakePlot(
      "replay", "", title,
      "Target-region R^2 (mean over architectures) and median |relative "
      "error| of the fitted laws' predictions against the fraction of the "
      "grid's FLOPs spent, per scheduling policy; the full grid's R^2 "
      "dashed.");
  // One colour per (policy, trunk cost model).
  std::map<std::string, size_t> colours;
  std::string r2_lines, error_lines;
  for (const analysis::ReplayResult& r : results) {
    const std::string key =
        absl::StrCat(analysis::ReplayPolicyName(r.policy), "_",
                     analysis::TrunkCostName(r.trunk_cost));
    const bool random = r.policy == analysis::ReplayPolicy::kRandom;
    const std::string file = absl::StrCat(
        "data/replay_", key, random ? absl::StrCat("_", r.seed) : "", ".dat");
    std::string data = "# fraction r2_target median_abs_error\n";
    for (const analysis::ReplayStep& s : r.steps) {
      if (!s.r2_target || !s.median_abs_error) continue;
      absl::StrAppend(&data, G(s.fraction), " ",
                      G(std::max(*s.r2_target, -1.0)), " ",
                      G(*s.median_abs_error), "\n");
    }
    if (absl::Status w = WriteText(absl::StrCat(dir, "/", file), data);
        !w.ok()) {
      return w;
    }
    const bool first_of_key = colours.count(key) == 0;
    const size_t colour = colours.emplace(key, colours.size()).first->second;
    const std::string label =
        first_of_key
            ? absl::StrCat(analysis::ReplayPolicyName(r.policy), ", trunks ",
                           analysis::TrunkCostName(r.trunk_cost))
            : "";
    const std::string style = absl::StrCat(
        "with steps lw ", random ? "1" : "2.5", " lc rgb ",
        Quote(Color(colour)), label.empty() ? " notitle" : "",
        label.empty() ? "" : absl::StrCat(" title ", Quote(label)));
    absl::StrAppend(&r2_lines, r2_lines.empty() ? "" : ", \\\n     ", "'", file,
                    "' using 1:2 ", style);
    absl::StrAppend(&error_lines, error_lines.empty() ? "" : ", \\\n     ", "'",
                    file, "' using 1:($3*100) ", style);
  }
  std::string script = Header(plot, 1100, 480);
  absl::StrAppend(&script, "set multiplot layout 1,2 title ", Quote(title),
                  "\n", "set key bottom right font ',9'\n",
                  "set xlabel 'fraction of the grid FLOPs'\n",
                  "set xrange [0:1]\n");
  if (results.front().full_r2_target) {
    absl::StrAppend(&script, "set arrow from 0,",
                    G(*results.front().full_r2_target), " to 1,",
                    G(*results.front().full_r2_target),
                    " nohead dt 2 lc rgb '#444444'\n");
  }
  absl::StrAppend(
      &script, "set ylabel 'target-region R^2'\n", "set yrange [-1:1]\n",
      "plot ", r2_lines, "\n", "unset arrow\n", "set key top right font ',9'\n",
      "set ylabel 'median |relative error| (%)'\n", "set logscale y\n",
      "set yrange [*:*]\n", "plot ", error_lines, "\n", "unset multiplot\n");
  if (absl::Status w = WriteText(absl::StrCat(dir, "/replay.gp"), script);
      !w.ok()) {
    return w;
  }
  plot.scripted = true;
  return plot;
}

}  // namespace hlab::report
