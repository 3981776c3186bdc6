// The report's figures of multiple-choice tasks (eval/multiple_choice.h),
// only for a sweep that evaluated evaluation.multiple_choice: one figure
// per task, mc_<task> (report/plots.h lists it).
//
// Thread-safety: reentrant (no shared state).
#ifndef HLAB_REPORT_MULTIPLE_CHOICE_FIGURES_H_
#define HLAB_REPORT_MULTIPLE_CHOICE_FIGURES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "report/plots.h"
#include "report/study_data.h"

namespace hlab::report {

// Writes the data files and scripts of the tasks' figures into `dir`
// (with its data/), appending their Plots to *plots. Internal (naming the
// file) when a file cannot be written.
absl::Status WriteMultipleChoiceFigures(const StudyData& study,
                                        const std::string& dir,
                                        std::vector<Plot>* plots);

}  // namespace hlab::report

#endif  // HLAB_REPORT_MULTIPLE_CHOICE_FIGURES_H_
