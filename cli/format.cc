#include "cli/format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hlab::cli {
namespace {

constexpr size_t kTableTextWidth = 60;

bool IsNumber(const Cell& c) {
  return c.kind == Cell::Kind::kInt || c.kind == Cell::Kind::kDouble;
}

// Text as one table cell: line breaks and tabs shown as \n and \t, and cut
// to kTableTextWidth bytes (at a UTF-8 character boundary) with "...".
std::string TableCellText(const std::string& text) {
  std::string one_line;
  for (char ch : text) {
    if (ch == '\n') {
      one_line += "\\n";
    } else if (ch == '\r') {
      one_line += "\\r";
    } else if (ch == '\t') {
      one_line += "\\t";
    } else {
      one_line += ch;
    }
  }
  if (one_line.size() <= kTableTextWidth) return one_line;
  size_t cut = kTableTextWidth - 3;
  while (cut > 0 &&
         (static_cast<unsigned char>(one_line[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return one_line.substr(0, cut) + "...";
}

// A cell as the table shows it: doubles with 6 significant digits.
std::string TableText(const Cell& c) {
  switch (c.kind) {
    case Cell::Kind::kNull:
      return "";
    case Cell::Kind::kInt:
      return absl::StrCat(c.int_value);
    case Cell::Kind::kDouble:
      return absl::StrFormat("%.6g", c.double_value);
    case Cell::Kind::kText:
      return TableCellText(c.text);
  }
  return "";
}

std::string CsvText(const Cell& c) {
  switch (c.kind) {
    case Cell::Kind::kNull:
      return "";
    case Cell::Kind::kInt:
      return absl::StrCat(c.int_value);
    case Cell::Kind::kDouble:
      return ExactDouble(c.double_value);
    case Cell::Kind::kText:
      return CsvField(c.text);
  }
  return "";
}

void WriteTable(const Rows& rows, std::ostream& out) {
  const size_t n = rows.columns.size();
  std::vector<size_t> width(n, 0);
  std::vector<bool> numeric(n, false);
  for (size_t i = 0; i < n; ++i) width[i] = rows.columns[i].size();
  std::vector<std::vector<std::string>> texts;
  texts.reserve(rows.rows.size());
  for (const std::vector<Cell>& row : rows.rows) {
    std::vector<std::string>& line = texts.emplace_back();
    for (size_t i = 0; i < n && i < row.size(); ++i) {
      line.push_back(TableText(row[i]));
      width[i] = std::max(width[i], line.back().size());
      if (IsNumber(row[i])) numeric[i] = true;
    }
  }
  auto write_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < n; ++i) {
      const std::string& text = i < cells.size() ? cells[i] : "";
      const std::string pad(width[i] - std::min(width[i], text.size()), ' ');
      if (i > 0) line += "  ";
      line += numeric[i] ? pad + text : text + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  write_line(rows.columns);
  for (const std::vector<std::string>& line : texts) write_line(line);
}

void WriteJson(const Rows& rows, std::ostream& out) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const std::vector<Cell>& row : rows.rows) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (size_t i = 0; i < rows.columns.size(); ++i) {
      const Cell c = i < row.size() ? row[i] : Cell::Null();
      nlohmann::ordered_json& v = object[rows.columns[i]];
      switch (c.kind) {
        case Cell::Kind::kNull:
          v = nullptr;
          break;
        case Cell::Kind::kInt:
          v = c.int_value;
          break;
        case Cell::Kind::kDouble:
          if (std::isfinite(c.double_value)) {
            v = c.double_value;
          } else {
            v = nullptr;
          }
          break;
        case Cell::Kind::kText:
          v = c.text;
          break;
      }
    }
    array.push_back(std::move(object));
  }
  out << array.dump(2, ' ', false,
                    nlohmann::ordered_json::error_handler_t::replace)
      << "\n";
}

void WriteCsv(const Rows& rows, std::ostream& out) {
  std::string line;
  for (size_t i = 0; i < rows.columns.size(); ++i) {
    if (i > 0) line += ",";
    line += CsvField(rows.columns[i]);
  }
  out << line << "\n";
  for (const std::vector<Cell>& row : rows.rows) {
    line.clear();
    for (size_t i = 0; i < rows.columns.size(); ++i) {
      if (i > 0) line += ",";
      if (i < row.size()) line += CsvText(row[i]);
    }
    out << line << "\n";
  }
}

}  // namespace

Cell Cell::Int(int64_t v) {
  Cell c;
  c.kind = Kind::kInt;
  c.int_value = v;
  return c;
}

Cell Cell::Double(double v) {
  Cell c;
  c.kind = Kind::kDouble;
  c.double_value = v;
  return c;
}

Cell Cell::Text(std::string v) {
  Cell c;
  c.kind = Kind::kText;
  c.text = std::move(v);
  return c;
}

absl::StatusOr<OutputFormat> ParseOutputFormat(absl::string_view text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "csv") return OutputFormat::kCsv;
  return absl::InvalidArgumentError(
      absl::StrCat("--format must be table, json or csv, got '", text, "'"));
}

void WriteRows(const Rows& rows, OutputFormat format, std::ostream& out) {
  switch (format) {
    case OutputFormat::kTable:
      WriteTable(rows, out);
      return;
    case OutputFormat::kJson:
      WriteJson(rows, out);
      return;
    case OutputFormat::kCsv:
      WriteCsv(rows, out);
      return;
  }
}

std::string CsvField(absl::string_view text) {
  if (text.find_first_of(",\"\r\n") == absl::string_view::npos) {
    return std::string(text);
  }
  std::string quoted = "\"";
  for (char ch : text) {
    if (ch == '"') quoted += '"';
    quoted += ch;
  }
  quoted += '"';
  return quoted;
}

std::string ExactDouble(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Whole numbers in plain digits ("20", not "2e+01").
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrFormat("%.0f", value);
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

std::string HumanCount(double value) {
  static const char* const kSuffix[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  double v = value;
  while (std::fabs(v) >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  if (i == 0) return absl::StrFormat("%.0f", v);
  // Two calls, not one with a chosen format: clang checks StrFormat's
  // format at compile time and rejects one that is not a constant.
  if (std::fabs(v) < 100) return absl::StrFormat("%.1f%s", v, kSuffix[i]);
  return absl::StrFormat("%.0f%s", v, kSuffix[i]);
}

std::string HumanDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::string RunPhaseName(v1::RunPhase phase) {
  switch (phase) {
    case v1::RUN_PHASE_WAITING:
      return "waiting";
    case v1::RUN_PHASE_TRUNK:
      return "on trunk";
    case v1::RUN_PHASE_TRAINING:
      return "training";
    case v1::RUN_PHASE_DECAYING:
      return "decaying";
    case v1::RUN_PHASE_EVALUATING:
      return "evaluating";
    case v1::RUN_PHASE_SUCCEEDED:
      return "succeeded";
    case v1::RUN_PHASE_FAILED:
      return "failed";
    case v1::RUN_PHASE_CANCELLED:
      return "cancelled";
    case v1::RUN_PHASE_PREDICTED:
      return "predicted";
    default:
      return "";
  }
}

std::string RunStateName(v1::RunState state) {
  switch (state) {
    case v1::RUN_STATE_PENDING:
      return "pending";
    case v1::RUN_STATE_RUNNING:
      return "running";
    case v1::RUN_STATE_SUCCEEDED:
      return "succeeded";
    case v1::RUN_STATE_FAILED:
      return "failed";
    case v1::RUN_STATE_CANCELLED:
      return "cancelled";
    case v1::RUN_STATE_PREDICTED:
      return "predicted";
    default:
      return "unknown";
  }
}

absl::StatusOr<v1::RunState> ParseRunState(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (v1::RunState s : {v1::RUN_STATE_PENDING, v1::RUN_STATE_RUNNING,
                         v1::RUN_STATE_SUCCEEDED, v1::RUN_STATE_FAILED,
                         v1::RUN_STATE_CANCELLED, v1::RUN_STATE_PREDICTED}) {
    if (lower == RunStateName(s) ||
        lower == absl::AsciiStrToLower(v1::RunState_Name(s))) {
      return s;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--state must be pending, running, succeeded, failed, "
                   "cancelled or predicted, got '",
                   text, "'"));
}

std::string SweepStateName(v1::SweepState state) {
  switch (state) {
    case v1::SWEEP_STATE_RUNNING:
      return "running";
    case v1::SWEEP_STATE_SUCCEEDED:
      return "succeeded";
    case v1::SWEEP_STATE_INCOMPLETE:
      return "incomplete";
    case v1::SWEEP_STATE_CANCELLED:
      return "cancelled";
    default:
      return "unknown";
  }
}

std::string WorkerStateName(v1::WorkerState state) {
  switch (state) {
    case v1::WORKER_STATE_ALIVE:
      return "alive";
    case v1::WORKER_STATE_LOST:
      return "lost";
    case v1::WORKER_STATE_DRAINING:
      return "draining";
    default:
      return "unknown";
  }
}

Cell QueryCell(const v1::QueryValue& value) {
  switch (value.value_case()) {
    case v1::QueryValue::kIntValue:
      return Cell::Int(value.int_value());
    case v1::QueryValue::kDoubleValue:
      return Cell::Double(value.double_value());
    case v1::QueryValue::kTextValue:
      return Cell::Text(value.text_value());
    case v1::QueryValue::kBlobValue:
      return Cell::Text(
          absl::StrCat("x'", absl::BytesToHexString(value.blob_value()), "'"));
    default:
      return Cell::Null();
  }
}

bool WriteProtoJson(const google::protobuf::Message& message,
                    std::ostream& out) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.add_whitespace = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options)
           .ok()) {
    return false;
  }
  out << json;
  return true;
}

const v1::RunPrediction* FindPrediction(const v1::Run& run,
                                        absl::string_view target) {
  const v1::RunPrediction* found = nullptr;
  for (const v1::RunPrediction& p : run.predictions()) {
    if (p.target() != target) continue;
    if (run.sweep_ids_size() > 0 && p.sweep_id() == run.sweep_ids(0)) {
      return &p;
    }
    if (found == nullptr) found = &p;
  }
  return found;
}

std::string PredictionText(const v1::RunPrediction& prediction) {
  std::string text = absl::StrFormat("%.4g", prediction.predicted());
  if (!prediction.has_lower() && !prediction.has_upper()) return text;
  auto bound = [](bool has, double v) {
    return has ? absl::StrFormat("%.4g", v) : std::string("?");
  };
  return absl::StrCat(text, " [",
                      bound(prediction.has_lower(), prediction.lower()), ", ",
                      bound(prediction.has_upper(), prediction.upper()), "]");
}

}  // namespace hlab::cli
