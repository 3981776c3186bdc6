// The report's figures of the paper's mechanism analyses (appendix D),
// each only for a sweep that measured it (report/plots.h lists them):
// gradient_profile (D.3), probing (D.2), retrieval_heads,
// retrieval_formation and q_grad (D.4).
//
// Thread-safety: reentrant (no shared state).
#ifndef HLAB_REPORT_MECHANISM_FIGURES_H_
#define HLAB_REPORT_MECHANISM_FIGURES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "report/plots.h"
#include "report/study_data.h"

namespace hlab::report {

// Writes the data files and scripts of the mechanism figures that have
// data into `dir` (with its data/), appending their Plots to *plots.
// Internal (naming the file) when a file cannot be written.
absl::Status WriteMechanismFigures(const StudyData& study,
                                   const std::string& dir,
                                   std::vector<Plot>* plots);

}  // namespace hlab::report

#endif  // HLAB_REPORT_MECHANISM_FIGURES_H_
