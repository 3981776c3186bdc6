#include "report/study_report.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "report/pages.h"
#include "report/tables.h"

namespace hlab::report {
namespace {

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> LawLines(const StudyData& study) {
  std::vector<std::string> lines;
  for (const FitRow& f : study.fits) {
    if (!f.fitted) {
      lines.push_back(
          absl::StrCat(f.arch, " / ", f.target, ": not fitted: ", f.reason));
      continue;
    }
    std::string line =
        absl::StrFormat("%s / %s: L(N, D) = %.4g + %s/N^%.4g + %s/D^%.4g",
                        f.arch, f.target, f.E, RoundedCoefficient(f.A, f.log_A),
                        f.alpha, RoundedCoefficient(f.B, f.log_B), f.beta);
    if (f.r2_fit) absl::StrAppendFormat(&line, " (R^2 fit %.4f", *f.r2_fit);
    if (f.r2_fit && f.r2_verify) {
      absl::StrAppendFormat(&line, ", verify %.4f", *f.r2_verify);
    }
    if (f.r2_fit) line += ")";
    if (!f.warnings.empty()) {
      // A law whose coefficients the data do not determine reads like any
      // other; say so here, not only in the report's table.
      constexpr size_t kMaxShown = 90;
      const std::string& first = f.warnings.front();
      absl::StrAppend(
          &line, " [", f.warnings.size(),
          f.warnings.size() == 1 ? " warning: " : " warnings, the first: ",
          first.size() <= kMaxShown ? first
                                    : first.substr(0, kMaxShown) + "...",
          "; the report's fits table lists them]");
    } else if (!f.notes.empty()) {
      // No warning, but a finding worth a look (an exponent past the start
      // grid that the VarPro fit confirms): counted, not spelled out.
      absl::StrAppend(&line, " [", f.notes.size(),
                      f.notes.size() == 1 ? " note" : " notes",
                      ", no warning; the report's fits table lists them]");
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

absl::Status PrepareReportDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the report directory '", dir,
                     "': ", ec ? ec.message() : "a file of that name exists",
                     "; give a writable --out DIR"));
  }
  const std::string probe = dir + "/.hlab-report-probe";
  if (!WriteFile(probe, "").ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write into the report directory '", dir,
                     "'; give a writable --out DIR"));
  }
  std::filesystem::remove(probe, ec);
  return absl::OkStatus();
}

absl::StatusOr<StudyReport> WriteStudyReport(
    const StudyData& study, const std::string& dir,
    const StudyReportOptions& options) {
  HLAB_RETURN_IF_ERROR(PrepareReportDirectory(dir));
  StudyReport report;
  report.dir = dir;
  report.index_html = dir + "/index.html";
  HLAB_RETURN_IF_ERROR(
      WriteFile(dir + "/runs.csv", TableToCsv(RunsTable(study))));
  HLAB_RETURN_IF_ERROR(
      WriteFile(dir + "/fits.csv", TableToCsv(FitsTable(study))));
  const Table rf = ReceptiveFieldTable(study);
  if (!rf.rows.empty()) {
    HLAB_RETURN_IF_ERROR(
        WriteFile(dir + "/receptive_field.csv", TableToCsv(rf)));
  }
  const Table mc = MultipleChoiceTable(study);
  if (!mc.rows.empty()) {
    HLAB_RETURN_IF_ERROR(
        WriteFile(dir + "/multiple_choice.csv", TableToCsv(mc)));
  }
  const Table ruler = RulerTable(study);
  if (!ruler.rows.empty()) {
    HLAB_RETURN_IF_ERROR(WriteFile(dir + "/ruler.csv", TableToCsv(ruler)));
  }
  HLAB_ASSIGN_OR_RETURN(report.plots, WritePlotScripts(study, dir));
  report.plot_status = RenderPlots(dir, options.plot, &report.plots);
  HLAB_RETURN_IF_ERROR(
      WriteFile(dir + "/report.md",
                ReportMarkdown(study, report.plots, report.plot_status)));
  HLAB_RETURN_IF_ERROR(WriteFile(
      report.index_html, IndexHtml(study, report.plots, report.plot_status)));
  return report;
}

}  // namespace hlab::report
