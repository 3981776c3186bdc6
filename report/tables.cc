#include "report/tables.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace hlab::report {
namespace {

TableCell Text(const std::string& s) { return {s, s}; }

TableCell Number(std::optional<double> v) {
  return {ExactNumber(v), RoundedNumber(v)};
}

std::optional<double> Finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// An integer count such as N or D: printed whole in both forms.
TableCell Count(double v) {
  const std::string s = absl::StrFormat("%.0f", v);
  return {s, s};
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
}

bool LooksNumeric(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' ||
          c == 'e')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string ExactNumber(std::optional<double> value) {
  return value ? absl::StrFormat("%.10g", *value) : std::string();
}

std::string RoundedNumber(std::optional<double> value) {
  return value ? absl::StrFormat("%.4g", *value) : std::string();
}

std::string RoundedCoefficient(double value, double log_value) {
  if (std::isfinite(value)) return RoundedNumber(value);
  if (std::isfinite(log_value)) return absl::StrFormat("exp(%.4g)", log_value);
  return "?";
}

std::string HtmlEscape(const std::string& text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

Table RunsTable(const StudyData& study) {
  Table t;
  t.columns = {"run_id",   "architecture", "scale",        "N",
               "D",        "D_over_N",     "state",        "final_loss",
               "val_loss", "log_longppl",  "niah_accuracy"};
  for (const RunRow& r : study.runs) {
    std::optional<double> ratio;
    if (r.n > 0) ratio = r.d / r.n;
    t.rows.push_back({Text(r.run_id), Text(r.arch), Text(r.scale), Count(r.n),
                      Count(r.d), Number(ratio), Text(r.state),
                      Number(r.train_loss), Number(r.val_loss),
                      Number(r.log_longppl), Number(r.niah_accuracy)});
  }
  return t;
}

Table ReceptiveFieldTable(const StudyData& study) {
  Table t;
  t.columns = {"run_id",
               "architecture",
               "scale",
               "D_over_N",
               "full_restricted_delta_log_longppl",
               "efficient_restricted_delta_log_longppl",
               "full_restricted_delta_loss",
               "efficient_restricted_delta_loss"};
  for (const RunRow& r : study.runs) {
    if (!r.rf_full_delta_loss && !r.rf_efficient_delta_loss &&
        !r.rf_full_delta_log_longppl && !r.rf_efficient_delta_log_longppl) {
      continue;
    }
    std::optional<double> ratio;
    if (r.n > 0) ratio = r.d / r.n;
    t.rows.push_back({Text(r.run_id), Text(r.arch), Text(r.scale),
                      Number(ratio), Number(r.rf_full_delta_log_longppl),
                      Number(r.rf_efficient_delta_log_longppl),
                      Number(r.rf_full_delta_loss),
                      Number(r.rf_efficient_delta_loss)});
  }
  return t;
}

Table MultipleChoiceTable(const StudyData& study) {
  Table t;
  t.columns = {"run_id", "architecture", "scale",    "N",
               "D",      "task",         "n",        "num_fewshot",
               "acc",    "acc_stderr",   "acc_norm", "acc_norm_stderr",
               "step"};
  for (const RunRow& r : study.runs) {
    for (const MultipleChoiceRow& m : study.multiple_choice) {
      if (m.run_id != r.run_id) continue;
      t.rows.push_back({Text(r.run_id), Text(r.arch), Text(r.scale),
                        Number(r.n), Number(r.d), Text(m.task),
                        Text(absl::StrCat(m.n)),
                        Text(absl::StrCat(m.num_fewshot)), Number(m.acc),
                        Number(m.acc_stderr), Number(m.acc_norm),
                        Number(m.acc_norm_stderr), Text(absl::StrCat(m.step))});
    }
  }
  return t;
}

Table RulerTable(const StudyData& study) {
  std::set<std::string> metrics;
  std::map<std::string, std::map<std::string, double>> by_run;
  for (const RulerPoint& p : study.ruler) {
    metrics.insert(p.metric);
    by_run[p.run_id][p.metric] = p.value;
  }
  Table t;
  if (metrics.empty()) return t;
  t.columns = {"run_id", "architecture", "scale", "N", "D"};
  t.columns.insert(t.columns.end(), metrics.begin(), metrics.end());
  for (const RunRow& r : study.runs) {
    auto it = by_run.find(r.run_id);
    if (it == by_run.end()) continue;
    std::vector<TableCell> row = {Text(r.run_id), Text(r.arch), Text(r.scale),
                                  Number(r.n), Number(r.d)};
    for (const std::string& m : metrics) {
      auto v = it->second.find(m);
      row.push_back(Number(v == it->second.end()
                               ? std::nullopt
                               : std::optional<double>(v->second)));
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table FitsTable(const StudyData& study) {
  Table t;
  t.columns = {"architecture", "target"};
  for (const char* name : {"E", "A", "alpha", "B", "beta"}) {
    t.columns.push_back(name);
    t.columns.push_back(absl::StrCat(name, "_lo"));
    t.columns.push_back(absl::StrCat(name, "_hi"));
  }
  for (const char* name : {"log_A", "log_B", "objective", "r2_fit", "r2_verify",
                           "n_points", "warnings", "notes"}) {
    t.columns.push_back(name);
  }
  for (const FitRow& f : study.fits) {
    std::vector<TableCell> row = {Text(f.arch), Text(f.target)};
    const std::pair<const char*, double> coefficients[] = {{"E", f.E},
                                                           {"A", f.A},
                                                           {"alpha", f.alpha},
                                                           {"B", f.B},
                                                           {"beta", f.beta}};
    for (const auto& [name, value] : coefficients) {
      auto ci = f.ci.find(name);
      const bool has_ci = f.fitted && ci != f.ci.end();
      // An A or B that overflowed is empty; log_A / log_B hold it.
      row.push_back(f.fitted ? Number(Finite(value)) : Text(""));
      row.push_back(has_ci ? Number(ci->second.lower) : Text(""));
      row.push_back(has_ci ? Number(ci->second.upper) : Text(""));
    }
    row.push_back(f.fitted ? Number(Finite(f.log_A)) : Text(""));
    row.push_back(f.fitted ? Number(Finite(f.log_B)) : Text(""));
    row.push_back(Number(f.objective));
    row.push_back(Number(f.r2_fit));
    row.push_back(Number(f.r2_verify));
    row.push_back(Count(f.n_points));
    row.push_back(Text(f.fitted ? absl::StrJoin(f.warnings, "; ")
                                : "not fitted: " + f.reason));
    row.push_back(Text(absl::StrJoin(f.notes, "; ")));
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table FitsDisplayTable(const StudyData& study) {
  Table t;
  t.columns = {"architecture", "target",     "E",      "A",
               "alpha",        "B",          "beta",   "objective",
               "R^2 fit",      "R^2 verify", "points", "warnings",
               "notes"};
  for (const FitRow& f : study.fits) {
    std::vector<TableCell> row = {Text(f.arch), Text(f.target)};
    constexpr double kNoLog = std::numeric_limits<double>::quiet_NaN();
    const std::tuple<const char*, double, double> coefficients[] = {
        {"E", f.E, kNoLog},
        {"A", f.A, f.log_A},
        {"alpha", f.alpha, kNoLog},
        {"B", f.B, f.log_B},
        {"beta", f.beta, kNoLog}};
    for (const auto& [name, value, log_value] : coefficients) {
      if (!f.fitted) {
        row.push_back(Text(""));
        continue;
      }
      // An A or B beyond a double's range shows by its log: "exp(812.3)".
      TableCell cell = Number(Finite(value));
      cell.rounded = RoundedCoefficient(value, log_value);
      auto ci = f.ci.find(name);
      if (ci != f.ci.end()) {
        // "?": a bound that is not finite.
        const std::string lower = RoundedNumber(ci->second.lower);
        const std::string upper = RoundedNumber(ci->second.upper);
        absl::StrAppend(&cell.rounded, " [", lower.empty() ? "?" : lower, ", ",
                        upper.empty() ? "?" : upper, "]");
      }
      row.push_back(std::move(cell));
    }
    row.push_back(Number(f.objective));
    row.push_back(Number(f.r2_fit));
    row.push_back(Number(f.r2_verify));
    row.push_back(Count(f.n_points));
    row.push_back(Text(f.fitted ? absl::StrJoin(f.warnings, "; ")
                                : "not fitted: " + f.reason));
    row.push_back(Text(absl::StrJoin(f.notes, "; ")));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string TableToCsv(const Table& table) {
  std::string out;
  std::vector<std::string> fields;
  for (const std::string& c : table.columns) fields.push_back(CsvField(c));
  absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  for (const auto& row : table.rows) {
    fields.clear();
    for (const TableCell& c : row) fields.push_back(CsvField(c.exact));
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  }
  return out;
}

std::string TableToMarkdown(const Table& table) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (const std::string& c : cells) {
      absl::StrAppend(
          &s, " ", absl::StrReplaceAll(c, {{"|", "\\|"}, {"\n", " "}}), " |");
    }
    return s + "\n";
  };
  std::string out = line(table.columns);
  out += "|";
  for (size_t i = 0; i < table.columns.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& row : table.rows) {
    std::vector<std::string> cells;
    for (const TableCell& c : row) cells.push_back(c.rounded);
    out += line(cells);
  }
  return out;
}

std::string TableToHtml(const Table& table) {
  std::string out = "<table>\n<thead><tr>";
  for (const std::string& c : table.columns) {
    absl::StrAppend(&out, "<th>", HtmlEscape(c), "</th>");
  }
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (const TableCell& c : row) {
      absl::StrAppend(&out,
                      LooksNumeric(c.rounded) ? "<td class=\"num\">" : "<td>",
                      HtmlEscape(c.rounded), "</td>");
    }
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n";
  return out;
}

}  // namespace hlab::report
