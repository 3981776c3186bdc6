// Reading scaling points (N, D, loss) from CSV files.
//
// The project's format: a header row naming the columns N, D and loss (case
// and surrounding spaces ignored, any order, other columns ignored), then one
// run per row. Blank lines and lines starting with '#' are skipped; fields may
// be double-quoted. Every value must parse as a finite number > 0.
//
// The Chinchilla Figure 4 file (columns "Model Size", "Training FLOP", loss)
// is read as Epoch's replication reads it: N = Model Size,
// D = Training FLOP / (6 N), and the points with the highest loss dropped.
//
// Thread-safety: free functions without shared state.
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<ScalingPoint> points,
//                         ReadPointsCsv("runs.csv"));
//   HLAB_ASSIGN_OR_RETURN(auto chinchilla,
//                         ReadChinchillaCsv(path, /*drop_highest_loss=*/5));
#ifndef HLAB_ANALYSIS_POINTS_CSV_H_
#define HLAB_ANALYSIS_POINTS_CSV_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

// Parses CSV text in the project's format. `source` names the text in errors.
// InvalidArgument says where and what: "runs.csv:7: column 'D': 'abc' is not
// a number", "runs.csv:1: missing column 'loss' (header: n,d,ppl)",
// "runs.csv:4: expected 3 fields, got 2", "runs.csv: no data rows".
absl::StatusOr<std::vector<ScalingPoint>> ParsePointsCsv(
    absl::string_view text, absl::string_view source);

// Reads and parses `path`. NotFound when the file cannot be opened; otherwise
// as ParsePointsCsv with the path as source.
absl::StatusOr<std::vector<ScalingPoint>> ReadPointsCsv(
    const std::string& path);

// Parses Chinchilla's Figure 4 points (see the top comment) and drops the
// `drop_highest_loss` points with the highest loss (as the replication: keep
// loss < the drop_highest_loss-th highest loss); the rest keep file order.
// Errors as ParsePointsCsv (columns "Model Size", "Training FLOP", "loss").
absl::StatusOr<std::vector<ScalingPoint>> ParseChinchillaCsv(
    absl::string_view text, absl::string_view source,
    int drop_highest_loss = 5);

// Reads `path` and parses it with ParseChinchillaCsv.
absl::StatusOr<std::vector<ScalingPoint>> ReadChinchillaCsv(
    const std::string& path, int drop_highest_loss = 5);

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_POINTS_CSV_H_
