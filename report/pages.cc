#include "report/pages.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/claims.h"
#include "report/study_report.h"
#include "report/tables.h"

namespace hlab::report {
namespace {

// What the receptive-field table shows (docs/evaluation.md).
constexpr char kClaimsNote[] =
    "Each of the paper's claims (docs/reproduction.md) beside this sweep's "
    "figures, with the verdict its rule computes from them; intervals are "
    "bootstraps over matched runs (a cell is one scale, one seed and one "
    "D/N; with several seeds, each rule's per-scale figures are per scale "
    "and seed). A claim the sweep's architectures or evaluations cannot "
    "test says what it needs.";

constexpr char kReceptiveFieldNote[] =
    "Each run's validation loss and log(LongPPL) again with its "
    "full-attention layers restricted to the last H keys, and with its "
    "efficient layers restricted instead (overlapping windows of 3H/2, "
    "reset state), minus the unrestricted figures. The paper finds "
    "restricting full attention raises log(LongPPL) far more than "
    "restricting the efficient layers; empty cells: not measured (Full has "
    "no efficient layers).";

constexpr char kMultipleChoiceNote[] =
    "Each run's multiple-choice tasks (lm-evaluation-harness's "
    "conventions, docs/evaluation.md): acc picks the choice of the highest "
    "summed log-likelihood, acc_norm the highest per character of the "
    "choice; stderr is the standard error of the mean over the n "
    "questions.";
constexpr char kRulerNote[] =
    "Each run's newest RULER scores, in [0, 1] (docs/evaluation.md): "
    "ruler_score is the mean string match over the tasks and lengths that "
    "ran, by greedy decoding, ruler_score/<task> each task's (RULER prints "
    "x100). Empty cells: not measured.";

std::string FitsOrigin(const StudyData& study) {
  if (study.fits_origin == "stored") return "fits stored by the coordinator";
  if (study.fits_origin == "computed") return "fits computed by hlab report";
  return "no fits";
}

// A sentence on the fits' CIs, or "" when none has any.
std::string CiNote(const StudyData& study) {
  for (const FitRow& f : study.fits) {
    if (f.fitted && !f.ci.empty() && f.confidence > 0 &&
        f.ci_method == "profile") {
      return absl::StrFormat(
          "Brackets: %.0f%% profile-likelihood confidence intervals "
          "(docs/analysis.md, \"Intervals\"); ? marks an end the data do "
          "not bound.",
          100 * f.confidence);
    }
    if (f.fitted && !f.ci.empty() && f.confidence > 0) {
      return absl::StrFormat(
          "Brackets: %.0f%% bootstrap confidence intervals (%d resamples).",
          100 * f.confidence, f.resamples);
    }
  }
  return "";
}

// Why a figure is not shown, or "" when its SVG exists.
std::string MissingReason(const Plot& plot, const absl::Status& plot_status) {
  if (!plot.scripted) return plot.note;
  if (plot.svg) return "";
  return absl::StrCat("not drawn (", plot_status.message(),
                      "); draw it with: gnuplot ", plot.name, ".gp");
}

const char kStyle[] = R"css(
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1700px; }
h1 { font-size: 1.5em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; max-width: 60em; }
.note { background: #fff6d5; padding: 0.4em 0.8em; border-left: 4px solid #e0b000; }
code, pre { background: #f6f6f6; padding: 0.1em 0.3em; }
)css";

}  // namespace

std::string SummaryLine(const StudyData& study) {
  const int succeeded = static_cast<int>(
      std::count_if(study.runs.begin(), study.runs.end(),
                    [](const RunRow& r) { return r.succeeded(); }));
  // Early stop: PREDICTED runs were never trained; no fit reads them.
  const int predicted = static_cast<int>(
      std::count_if(study.runs.begin(), study.runs.end(),
                    [](const RunRow& r) { return r.state == "PREDICTED"; }));
  const std::string stopped =
      predicted > 0 ? absl::StrCat(" (measured), ", predicted,
                                   " predicted (stopped early, not in the "
                                   "fits)")
                    : std::string();
  return absl::StrCat("sweep ", study.sweep_name, " (id ", study.sweep_id,
                      ") from ", study.source, ": ", study.runs.size(),
                      " runs, ", succeeded, " succeeded", stopped, "; ",
                      FitsOrigin(study));
}

std::string ReportMarkdown(const StudyData& study,
                           const std::vector<Plot>& plots,
                           const absl::Status& plot_status) {
  std::string md = absl::StrCat("# hlab report: sweep ", study.sweep_name,
                                "\n\n", SummaryLine(study), ".\n\n");
  for (const std::string& note : study.notes) {
    absl::StrAppend(&md, "> Note: ", note, "\n\n");
  }
  absl::StrAppend(&md, "## The paper's claims\n\n", kClaimsNote, "\n\n",
                  TableToMarkdown(ClaimsTable(EvaluateClaims(study))), "\n");
  md += "## Figures\n\n";
  for (const Plot& plot : plots) {
    absl::StrAppend(&md, "### ", plot.title, "\n\n");
    const std::string missing = MissingReason(plot, plot_status);
    if (!missing.empty()) {
      absl::StrAppend(&md, "*", missing, "*\n\n");
      continue;
    }
    absl::StrAppend(&md, "![", plot.title, "](", plot.name, ".svg)\n\n",
                    plot.caption, ". Script: ", plot.name, ".gp",
                    plot.png ? absl::StrCat("; PNG: ", plot.name, ".png") : "",
                    ".\n\n");
  }
  md += "## Fitted laws: L(N, D) = E + A/N^alpha + B/D^beta\n\n";
  const std::vector<std::string> laws = LawLines(study);
  if (laws.empty()) md += "No fits.\n";
  for (const std::string& line : laws) absl::StrAppend(&md, "- ", line, "\n");
  md += "\n";
  // Folded as in the page (GitHub and most Markdown viewers render the
  // HTML block; the table inside stays Markdown).
  if (!study.fits.empty()) {
    absl::StrAppend(&md,
                    "<details><summary>Each fit's coefficients with their "
                    "intervals, warnings and notes</summary>\n\n",
                    TableToMarkdown(FitsDisplayTable(study)), "\n",
                    CiNote(study), " All columns: fits.csv.\n\n</details>\n\n");
  }
  const Table rf = ReceptiveFieldTable(study);
  if (!rf.rows.empty()) {
    absl::StrAppend(&md, "## Receptive-field constraint (appendix D.1)\n\n",
                    kReceptiveFieldNote, "\n\n", TableToMarkdown(rf),
                    "\nFull precision: receptive_field.csv.\n\n");
  }
  const Table mc = MultipleChoiceTable(study);
  if (!mc.rows.empty()) {
    absl::StrAppend(&md, "## Multiple-choice tasks\n\n", kMultipleChoiceNote,
                    "\n\n", TableToMarkdown(mc),
                    "\nFull precision: multiple_choice.csv.\n\n");
  }
  const Table ruler = RulerTable(study);
  if (!ruler.rows.empty()) {
    absl::StrAppend(&md, "## RULER\n\n", kRulerNote, "\n\n",
                    TableToMarkdown(ruler), "\nFull precision: ruler.csv.\n\n");
  }
  absl::StrAppend(&md, "## Runs\n\n");
  if (!study.runs.empty()) {
    absl::StrAppend(&md, TableToMarkdown(RunsTable(study)),
                    "\nFull precision: runs.csv.\n");
  } else {
    md += "No runs.\n";
  }
  return md;
}

std::string IndexHtml(const StudyData& study, const std::vector<Plot>& plots,
                      const absl::Status& plot_status) {
  const std::string title = "hlab report: sweep " + study.sweep_name;
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>",
      HtmlEscape(title), "</title>\n<style>", kStyle,
      "</style>\n</head>\n<body>\n<h1>", HtmlEscape(title), "</h1>\n<p>",
      HtmlEscape(SummaryLine(study)), ".</p>\n");
  for (const std::string& note : study.notes) {
    absl::StrAppend(&html, "<p class=\"note\">", HtmlEscape(note), "</p>\n");
  }
  absl::StrAppend(&html, "<h2>The paper's claims</h2>\n<p>",
                  HtmlEscape(kClaimsNote), "</p>\n",
                  TableToHtml(ClaimsTable(EvaluateClaims(study))));
  html += "<h2>Figures</h2>\n";
  for (const Plot& plot : plots) {
    absl::StrAppend(&html, "<h3 id=\"", plot.name, "\">",
                    HtmlEscape(plot.title), "</h3>\n");
    const std::string missing = MissingReason(plot, plot_status);
    if (!missing.empty()) {
      absl::StrAppend(&html, "<p class=\"note\">", HtmlEscape(missing),
                      "</p>\n");
      continue;
    }
    absl::StrAppend(&html, "<figure><a href=\"", plot.name,
                    ".svg\"><img src=\"", plot.name, ".svg\" alt=\"",
                    HtmlEscape(plot.title), "\"></a>\n<figcaption>",
                    HtmlEscape(plot.caption), ". Script: <a href=\"", plot.name,
                    ".gp\">", plot.name, ".gp</a>");
    if (plot.png) {
      absl::StrAppend(&html, "; PNG: <a href=\"", plot.name, ".png\">",
                      plot.name, ".png</a>");
    }
    html += ".</figcaption></figure>\n";
  }
  // The laws' diagnostics follow the claims and figures: a line per fit
  // (its law, R^2 and how many warnings), the table of coefficients,
  // intervals, warnings and notes folded under it.
  html +=
      "<h2>Fitted laws: L(N, D) = E + A/N<sup>&alpha;</sup> + "
      "B/D<sup>&beta;</sup></h2>\n<ul>\n";
  for (const std::string& line : LawLines(study)) {
    absl::StrAppend(&html, "<li><code>", HtmlEscape(line), "</code></li>\n");
  }
  html += "</ul>\n";
  if (!study.fits.empty()) {
    absl::StrAppend(
        &html,
        "<details><summary>Each fit's coefficients with their intervals, "
        "warnings and notes</summary>\n",
        TableToHtml(FitsDisplayTable(study)), "<p>", HtmlEscape(CiNote(study)),
        " All columns: <a href=\"fits.csv\">fits.csv</a>.</p>\n</details>\n");
  } else {
    html += "<p>No fits.</p>\n";
  }
  const Table rf = ReceptiveFieldTable(study);
  if (!rf.rows.empty()) {
    absl::StrAppend(&html,
                    "<h2>Receptive-field constraint (appendix D.1)</h2>\n<p>",
                    HtmlEscape(kReceptiveFieldNote), "</p>\n", TableToHtml(rf),
                    "<p>Full precision: <a href=\"receptive_field.csv\">"
                    "receptive_field.csv</a>.</p>\n");
  }
  const Table mc = MultipleChoiceTable(study);
  if (!mc.rows.empty()) {
    absl::StrAppend(&html, "<h2>Multiple-choice tasks</h2>\n<p>",
                    HtmlEscape(kMultipleChoiceNote), "</p>\n", TableToHtml(mc),
                    "<p>Full precision: <a href=\"multiple_choice.csv\">"
                    "multiple_choice.csv</a>.</p>\n");
  }
  const Table ruler = RulerTable(study);
  if (!ruler.rows.empty()) {
    absl::StrAppend(&html, "<h2>RULER</h2>\n<p>", HtmlEscape(kRulerNote),
                    "</p>\n", TableToHtml(ruler),
                    "<p>Full precision: <a href=\"ruler.csv\">ruler.csv</a>."
                    "</p>\n");
  }
  html += "<h2>Runs</h2>\n";
  if (!study.runs.empty()) {
    absl::StrAppend(&html, TableToHtml(RunsTable(study)),
                    "<p>Full precision: <a href=\"runs.csv\">runs.csv</a>; "
                    "Markdown: <a href=\"report.md\">report.md</a>.</p>\n");
  } else {
    html += "<p>No runs.</p>\n";
  }
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace hlab::report
