// The report's RULER figure (report/plots.h lists it), only for a sweep
// that ran RULER: ruler_score against D, one line per architecture at its
// largest scale with the score (data/ruler_<arch>.dat: D score).
//
// Thread-safety: reentrant (no shared state).
#ifndef HLAB_REPORT_RULER_FIGURES_H_
#define HLAB_REPORT_RULER_FIGURES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "report/plots.h"
#include "report/study_data.h"

namespace hlab::report {

// Writes the figure's data files and script into `dir` (with its data/)
// when any run has a ruler_score, appending its Plot to *plots. Internal
// (naming the file) when a file cannot be written.
absl::Status WriteRulerFigures(const StudyData& study, const std::string& dir,
                               std::vector<Plot>* plots);

}  // namespace hlab::report

#endif  // HLAB_REPORT_RULER_FIGURES_H_
