// The report's tables: runs (one row per run), fits (one row per
// architecture and target) and the receptive-field changes, built once as text
// cells and written as CSV (full precision, RFC 4180 quoting), Markdown (4
// significant digits) or an HTML <table>.
//
// Runs: run_id, architecture, scale, N, D, D/N, state, final_loss (the
// final training loss), val_loss, log_longppl, niah_accuracy (empty when
// not measured). Fits: architecture, target, E, A, alpha, B, beta, each
// with its bootstrap CI bounds (<name>_lo, <name>_hi; empty when none is
// stored or the bound is not finite), log_A, log_B (ln A, ln B; A or B is
// empty when it overflowed a double, and the display table shows it as
// "exp(ln A)"), objective, r2_fit, r2_verify, n_points, warnings
// ("; "-joined; the reason when not fitted). Receptive field: run_id,
// architecture, scale, D/N and the four restricted-minus-unrestricted
// changes (appendix D.1), for the runs that have any. Multiple choice:
// run_id, architecture, scale, N, D, task, n, num_fewshot, acc,
// acc_stderr, acc_norm, acc_norm_stderr, step (the evals' step).
//
// Thread-safety: pure functions.
//
//   Table runs = RunsTable(study);
//   WriteFile(dir + "/runs.csv", TableToCsv(runs));
//   std::string md = TableToMarkdown(runs);
#ifndef HLAB_REPORT_TABLES_H_
#define HLAB_REPORT_TABLES_H_

#include <optional>
#include <string>
#include <vector>

#include "report/study_data.h"

namespace hlab::report {

// One cell: its text at full precision (CSV) and rounded (Markdown, HTML).
struct TableCell {
  std::string exact;
  std::string rounded;
};

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<TableCell>> rows;
};

Table RunsTable(const StudyData& study);
// Appendix D.1's receptive-field changes, one row per run that has any
// (no rows: the sweep did not evaluate them).
Table ReceptiveFieldTable(const StudyData& study);
// Multiple-choice tasks (eval/multiple_choice.h): one row per run and task
// with scores (no rows: the sweep did not evaluate any).
Table MultipleChoiceTable(const StudyData& study);
// RULER (eval/ruler/ruler.h): one row per run with scores, one column per
// metric (ruler_score, then ruler_score/<task> sorted), the newest score.
Table RulerTable(const StudyData& study);
// Every stored fit: coefficients with CI bounds, ln A, ln B, objective, R^2,
// points, warnings, notes (fits.csv).
Table FitsTable(const StudyData& study);
// The fits for reading (Markdown, HTML): each coefficient with its CI in
// one cell ("0.3412 [0.3301, 0.3519]"; "?" for a bound that is not
// finite), R^2, warnings and notes.
Table FitsDisplayTable(const StudyData& study);

std::string TableToCsv(const Table& table);
// A GitHub-flavoured Markdown table ("|" in cells escaped).
std::string TableToMarkdown(const Table& table);
// An HTML <table> with escaped cells, numbers right-aligned.
std::string TableToHtml(const Table& table);

// Text helpers shared by the writers: a number in full precision ("%.10g")
// or to 4 significant digits; "" for nullopt.
std::string ExactNumber(std::optional<double> value);
std::string RoundedNumber(std::optional<double> value);
// A fit's A or B to 4 significant digits, or, when it overflowed a double,
// by its log: "exp(812.3)"; "?" when neither is known.
std::string RoundedCoefficient(double value, double log_value);
std::string HtmlEscape(const std::string& text);

}  // namespace hlab::report

#endif  // HLAB_REPORT_TABLES_H_
