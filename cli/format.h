// Output of rows (runs, query results, workers) as an aligned table, JSON or
// CSV, shared by `hlab runs`, `hlab query` and `hlab workers`; plus the
// lowercase names of states that the commands print.
//
//   table  header line, then one line per row; columns separated by two
//          spaces, numbers right-aligned; NULL is empty; text on one line
//          (\n, \t shown escaped) and cut at 60 bytes with "..." (json
//          and csv keep every value whole).
//   json   one array of objects, keys in column order, numbers as numbers,
//          NULL as null.
//   csv    RFC 4180: a header line, then rows; a field with a comma, quote,
//          CR or LF is quoted and its quotes doubled; NULL is empty; "\n"
//          line ends.
//
// Thread-compatible: plain values and pure functions.
//
//   Rows rows{{"run_id", "loss"}};
//   rows.rows.push_back({Cell::Text("a1b2"), Cell::Double(3.25)});
//   WriteRows(rows, OutputFormat::kCsv, std::cout);
#ifndef HLAB_CLI_FORMAT_H_
#define HLAB_CLI_FORMAT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "hlab/v1/client_service.pb.h"
#include "hlab/v1/run.pb.h"
#include "hlab/v1/sweep.pb.h"
#include "hlab/v1/worker.pb.h"

namespace hlab::cli {

enum class OutputFormat { kTable, kJson, kCsv };

// "table", "json" or "csv"; InvalidArgument naming --format otherwise.
absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text);

// One value of a row.
struct Cell {
  enum class Kind { kNull, kInt, kDouble, kText };
  Kind kind = Kind::kNull;
  int64_t int_value = 0;
  double double_value = 0;
  std::string text;

  static Cell Null() { return Cell(); }
  static Cell Int(int64_t v);
  static Cell Double(double v);
  static Cell Text(std::string v);
};

struct Rows {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;  // each as wide as `columns`
};

// A cell of a Query result: NULL, an integer, a double, text, or a blob as
// SQL's x'...' hex literal.
Cell QueryCell(const v1::QueryValue& value);

// `message` as indented JSON with the proto's field names (what --json
// prints); false if it cannot be printed.
bool WriteProtoJson(const google::protobuf::Message& message,
                    std::ostream& out);

void WriteRows(const Rows& rows, OutputFormat format, std::ostream& out);

// One CSV field, quoted when needed.
std::string CsvField(absl::string_view text);

// A double as the shortest decimal that reads back exactly ("0.1", "3e+20").
std::string ExactDouble(double value);

// A count in short human form: 999, 1.2K, 3.4M, 5.6G, 7.8T.
std::string HumanCount(double value);

// A duration in seconds as "45s", "3m12s", "2h05m", "3d04h".
std::string HumanDuration(double seconds);

// "pending", "running", "succeeded", "failed", "cancelled".
std::string RunStateName(v1::RunState state);
// Accepts those names (any case) and the enum names; InvalidArgument
// otherwise.
absl::StatusOr<v1::RunState> ParseRunState(absl::string_view text);
// "running", "succeeded", "incomplete", "cancelled".
std::string SweepStateName(v1::SweepState state);
// What a run is doing, in words: "waiting", "on trunk", "training",
// "decaying", "evaluating", "succeeded", "failed", "cancelled"; "" when
// unspecified (an older coordinator).
std::string RunPhaseName(v1::RunPhase phase);
// "alive", "lost", "draining".
std::string WorkerStateName(v1::WorkerState state);

// The run's live prediction of `target` ("loss", "longppl"): the one of
// the first sweep it lists, else the first; nullptr without one.
const v1::RunPrediction* FindPrediction(const v1::Run& run,
                                        absl::string_view target);
// A prediction as "2.851 [2.802, 2.903]" ("?" for an open side; the value
// alone without an interval).
std::string PredictionText(const v1::RunPrediction& prediction);

}  // namespace hlab::cli

#endif  // HLAB_CLI_FORMAT_H_
