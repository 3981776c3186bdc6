// The report's figures of the downstream benchmarks (RULER, the
// multiple-choice harness; report/plots.h lists them), each only for a
// sweep that measured it: for every headline metric (one without "/":
// ruler_score, and mc_acc_norm/<task> per multiple-choice task), the score
// against D, one line per architecture at its largest scale with the metric
// (data/benchmark_<metric>_<arch>.dat: D score).
//
// Thread-safety: reentrant (no shared state).
#ifndef HLAB_REPORT_BENCHMARK_FIGURES_H_
#define HLAB_REPORT_BENCHMARK_FIGURES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "report/plots.h"
#include "report/study_data.h"

namespace hlab::report {

// Whether the report draws `metric` (a headline benchmark metric).
bool IsHeadlineBenchmark(const std::string& metric);

// Writes the data files and scripts of the benchmark figures that have data
// into `dir` (with its data/), appending their Plots to *plots. Internal
// (naming the file) when a file cannot be written.
absl::Status WriteBenchmarkFigures(const StudyData& study,
                                   const std::string& dir,
                                   std::vector<Plot>* plots);

}  // namespace hlab::report

#endif  // HLAB_REPORT_BENCHMARK_FIGURES_H_
