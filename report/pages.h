// The report's two pages: report.md (Markdown) and index.html (one HTML
// page, no scripts or external assets), each with the sweep's summary and
// notes, the fitted laws, the fits table, every figure (or, in its place,
// why it is missing) and the runs table.
//
// Thread-safety: pure functions.
//
//   std::string md = ReportMarkdown(study, plots, plot_status);
//   std::string html = IndexHtml(study, plots, plot_status);
#ifndef HLAB_REPORT_PAGES_H_
#define HLAB_REPORT_PAGES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "report/plots.h"
#include "report/study_data.h"

namespace hlab::report {

// `plot_status` is RenderPlots' result: a figure that was scripted but not
// drawn is shown with it and the command that draws it.
std::string ReportMarkdown(const StudyData& study,
                           const std::vector<Plot>& plots,
                           const absl::Status& plot_status);
std::string IndexHtml(const StudyData& study, const std::vector<Plot>& plots,
                      const absl::Status& plot_status);

// The summary line: "sweep demo (id 1) from database x.db: 48 runs, 48
// succeeded; fits stored by the coordinator" ("36 succeeded (measured), 12
// predicted (stopped early, not in the fits); ..." after an early stop).
std::string SummaryLine(const StudyData& study);

}  // namespace hlab::report

#endif  // HLAB_REPORT_PAGES_H_
