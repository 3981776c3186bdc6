// The report's paper-style comparisons (#21, point 5), drawn first:
//   longppl_vs_dn   log(LongPPL) against D/N (log x), one line per
//                   architecture, one panel per scale (the paper's
//                   convergence figures);
//   loss_overlaid   validation loss against tokens D (log x), every
//                   architecture overlaid, one panel per scale;
//   nope            log(LongPPL) against D/N of each swa-W-nope beside its
//                   swa-W and full, one panel per scale (section 6), only
//                   when the sweep has such a pair.
// Data: data/<figure>_<scale>.dat, one block per architecture drawn in that
// panel (columns: x y run_id), so `gnuplot <figure>.gp` re-draws it. An
// architecture keeps its colour across panels and figures.
//
// Thread-safety: reentrant (no shared state).
#ifndef HLAB_REPORT_COMPARISON_FIGURES_H_
#define HLAB_REPORT_COMPARISON_FIGURES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "report/plots.h"
#include "report/study_data.h"

namespace hlab::report {

// Writes the comparison figures' data and scripts into `dir` (with its
// data/), appending their Plots to *plots; a figure without data gets a
// Plot with its `note`. Internal (naming the file) when a file cannot be
// written.
absl::Status WriteComparisonFigures(const StudyData& study,
                                    const std::string& dir,
                                    std::vector<Plot>* plots);

}  // namespace hlab::report

#endif  // HLAB_REPORT_COMPARISON_FIGURES_H_
