// WriteStudyReport: the report directory of a sweep (`hlab report`, and the
// end of `hlab up`):
//   index.html    everything on one page: laws, fits, figures, runs;
//   report.md     the same in Markdown;
//   runs.csv      one row per run (report/tables.h);
//   fits.csv      one row per architecture and target, with CI bounds;
//   <figure>.gp, data/*.dat, <figure>.svg (and .png)  (report/plots.h).
// Named apart from analysis/analyze.h, which is the fitter's text report of
// one power law.
//
// Thread-safety: reentrant; two calls must not share a directory.
//
//   HLAB_ASSIGN_OR_RETURN(StudyData study, ReadStudyData(*source, "demo", {}));
//   HLAB_ASSIGN_OR_RETURN(StudyReport written,
//                         WriteStudyReport(study, "out/report", {}));
//   if (!written.plot_status.ok()) std::cerr << written.plot_status;
//   std::cout << written.index_html << "\n";
#ifndef HLAB_REPORT_STUDY_REPORT_H_
#define HLAB_REPORT_STUDY_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "report/plots.h"
#include "report/study_data.h"

namespace hlab::report {

struct StudyReportOptions {
  PlotOptions plot;
};

struct StudyReport {
  std::string dir;
  std::string index_html;  // dir + "/index.html"
  std::vector<Plot> plots;
  // RenderPlots' status: not OK when gnuplot is missing or failed (the
  // tables, scripts, report.md and index.html are written all the same).
  absl::Status plot_status;
};

// Creates `dir` if needed and checks that files can be written in it (a
// probe file, removed again). FailedPrecondition naming `dir` and the
// reason otherwise. Callers run it before slow work (reading, fitting).
absl::Status PrepareReportDirectory(const std::string& dir);

// Writes the report of `study` into `dir`, creating it. FailedPrecondition
// when `dir` cannot be created or written (naming it and the reason);
// Internal when a later file cannot be written.
absl::StatusOr<StudyReport> WriteStudyReport(const StudyData& study,
                                             const std::string& dir,
                                             const StudyReportOptions& options);

// One line per fitted law: "full / loss: L(N, D) = 1.61 + 402/N^0.341 +
// 405/D^0.279 (R^2 fit 0.9999, verify 0.9991)", followed by "[3 warnings,
// the first: badly conditioned: ...]" when the fit has warnings; a line
// with the reason for each fit that failed.
std::vector<std::string> LawLines(const StudyData& study);

}  // namespace hlab::report

#endif  // HLAB_REPORT_STUDY_REPORT_H_
