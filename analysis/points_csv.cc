#include "analysis/points_csv.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hlab::analysis {
namespace {

// Splits one CSV line into fields; a field may be double-quoted, with "" for
// a literal quote. Surrounding whitespace is trimmed.
std::vector<std::string> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back(absl::StripAsciiWhitespace(field));
      field.clear();
    } else {
      field += c;
    }
  }
  fields.emplace_back(absl::StripAsciiWhitespace(field));
  return fields;
}

// The numeric columns `names` of a CSV text, one row per data line.
template <size_t K>
struct Table {
  std::vector<std::array<double, K>> rows;
  std::vector<int> line_numbers;  // 1-based, per row
};

// Reads the columns `names` (matched case-insensitively) of every data row.
// Each value must be a finite number > 0.
template <size_t K>
absl::StatusOr<Table<K>> ParseColumns(absl::string_view text,
                                      absl::string_view source,
                                      const std::array<const char*, K>& names) {
  Table<K> table;
  std::array<size_t, K> column{};
  size_t n_fields = 0;
  bool have_header = false;
  int line_number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    std::vector<std::string> fields = SplitCsvLine(line);
    if (!have_header) {
      // The header: find each wanted column.
      for (size_t k = 0; k < K; ++k) {
        auto it = std::find_if(fields.begin(), fields.end(),
                               [&](const std::string& f) {
                                 return absl::EqualsIgnoreCase(f, names[k]);
                               });
        if (it == fields.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              source, ":", line_number, ": missing column '", names[k],
              "' (header: ", absl::StrJoin(fields, ","), ")"));
        }
        column[k] = static_cast<size_t>(it - fields.begin());
      }
      n_fields = fields.size();
      have_header = true;
      continue;
    }
    if (fields.size() != n_fields) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_number, ": expected ", n_fields,
                       " fields as in the header, got ", fields.size()));
    }
    std::array<double, K> row{};
    for (size_t k = 0; k < K; ++k) {
      const std::string& field = fields[column[k]];
      double value = 0;
      if (!absl::SimpleAtod(field, &value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_number, ": column '", names[k],
                         "': '", field, "' is not a number"));
      }
      if (!std::isfinite(value) || value <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_number, ": column '", names[k],
                         "': ", field, " must be finite and > 0"));
      }
      row[k] = value;
    }
    table.rows.push_back(row);
    table.line_numbers.push_back(line_number);
  }
  if (!have_header) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": empty file; expected a header row"));
  }
  if (table.rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no data rows"));
  }
  return table;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  }
  return text.str();
}

}  // namespace

absl::StatusOr<std::vector<ScalingPoint>> ParsePointsCsv(
    absl::string_view text, absl::string_view source) {
  auto table = ParseColumns<3>(text, source, {"N", "D", "loss"});
  if (!table.ok()) return table.status();
  std::vector<ScalingPoint> points;
  points.reserve(table->rows.size());
  for (const auto& row : table->rows) {
    points.push_back({row[0], row[1], row[2]});
  }
  return points;
}

absl::StatusOr<std::vector<ScalingPoint>> ReadPointsCsv(
    const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParsePointsCsv(*text, path);
}

absl::StatusOr<std::vector<ScalingPoint>> ParseChinchillaCsv(
    absl::string_view text, absl::string_view source, int drop_highest_loss) {
  auto table =
      ParseColumns<3>(text, source, {"Model Size", "Training FLOP", "loss"});
  if (!table.ok()) return table.status();
  const size_t n = table->rows.size();
  if (drop_highest_loss < 0 || static_cast<size_t>(drop_highest_loss) >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": cannot drop ", drop_highest_loss,
                     " highest-loss points of ", n));
  }
  // As the replication: keep the points whose loss is strictly below the
  // drop_highest_loss-th highest loss (ties with it are dropped too).
  std::vector<double> losses;
  losses.reserve(n);
  for (const auto& row : table->rows) losses.push_back(row[2]);
  std::sort(losses.begin(), losses.end());
  const double cutoff = drop_highest_loss == 0
                            ? std::numeric_limits<double>::infinity()
                            : losses[n - drop_highest_loss];
  std::vector<ScalingPoint> points;
  for (size_t i = 0; i < n; ++i) {
    if (!(table->rows[i][2] < cutoff)) continue;
    const double model_size = table->rows[i][0];
    const double flop = table->rows[i][1];
    points.push_back(
        {model_size, flop / (6.0 * model_size), table->rows[i][2]});
  }
  return points;
}

absl::StatusOr<std::vector<ScalingPoint>> ReadChinchillaCsv(
    const std::string& path, int drop_highest_loss) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseChinchillaCsv(*text, path, drop_highest_loss);
}

}  // namespace hlab::analysis
