// The replay figure (`hlab replay --plot DIR`; docs/analysis.md, "Replay"):
// two panels against the fraction of the grid's FLOPs spent, one line per
// replay (policy, trunk cost model and seed; random seeds thin, in one
// colour): the target region's R^2 (mean over architectures, clipped at
// -1 so that early steps do not flatten the rest) with the full grid's
// value dashed, and the median |relative error| of the target predictions
// (log y). As the report's figures (report/plots.h): a gnuplot script
// replay.gp over data files data/replay_<policy>_<trunks>[_<seed>].dat
// (columns: fraction r2 median_abs_error; undefined steps are left out),
// drawn to replay.svg and replay.png by RenderPlots.
//
// Thread-safety: reentrant.
//
//   HLAB_ASSIGN_OR_RETURN(Plot plot, WriteReplayFigure(results, "out"));
//   std::vector<Plot> plots = {plot};
//   HLAB_RETURN_IF_ERROR(RenderPlots("out", PlotOptions(), &plots));
#ifndef HLAB_REPORT_REPLAY_FIGURE_H_
#define HLAB_REPORT_REPLAY_FIGURE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/replay.h"
#include "report/plots.h"

namespace hlab::report {

// Writes replay.gp and its data into `dir` (created if missing, with
// data/). InvalidArgument when `results` is empty; Internal naming the file
// when one cannot be written.
absl::StatusOr<Plot> WriteReplayFigure(
    const std::vector<analysis::ReplayResult>& results,
    const std::string& title, const std::string& dir);

}  // namespace hlab::report

#endif  // HLAB_REPORT_REPLAY_FIGURE_H_
