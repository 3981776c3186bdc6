// `hlab report` end to end on databases built with the store API: the demo
// sweep's 48 runs with losses (and log LongPPL) from known laws per
// architecture, with stored fits or without; the tables' rows and values,
// report.md, index.html and the figures gnuplot draws; and the messages for
// a sweep without runs, without LongPPL data, an unknown sweep, an
// unwritable output directory and a missing gnuplot. Plus the figures of a
// study built in memory (a token range too narrow for 1-2-5 tics).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "coordinator/store/store.h"
#include "report/plots.h"
#include "report/row_source.h"
#include "report/study_data.h"
#include "report/study_report.h"
#include "tests/report/report_test_util.h"

namespace hlab::report {
namespace {

namespace fs = std::filesystem;
using testing::Csv;
using testing::Hlab;
using testing::Law;
using testing::LongPplLaw;
using testing::LossLaw;
using testing::Number;
using testing::ReadCsv;
using testing::ReadFile;
using testing::Result;
using testing::SweepOptions;

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "hlab_report_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    db_ = (dir_ / "hlab.db").string();
    auto store = store::Store::Open(db_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  int64_t StoreDemoSweep(const SweepOptions& options) {
    return testing::StoreDemoSweep(*store_, options, &pending_run_);
  }
  void StoreTrueFits(int64_t sweep_id, const std::string& target) {
    testing::StoreTrueFits(*store_, sweep_id, target);
  }

  fs::path Out() const { return dir_ / "report"; }

  fs::path dir_;
  std::string db_;
  std::unique_ptr<store::Store> store_;
  std::string pending_run_;
};

// A law with warnings says so on its line, one with notes only counts
// them; one with neither says nothing.
TEST(LawLinesTest, FlagsFitsWithWarnings) {
  StudyData study;
  FitRow clean;
  clean.arch = "full";
  clean.target = "loss";
  clean.E = 1.6;
  clean.A = 400;
  clean.alpha = 0.34;
  clean.B = 410;
  clean.beta = 0.28;
  clean.r2_fit = 0.99;
  FitRow flagged = clean;
  flagged.arch = "gdn";
  flagged.warnings = {
      "badly conditioned: only 2 distinct N value(s); A and "
      "alpha need at least 3 to be identified",
      "fitted alpha = 3.8e5 lies outside the start grid"};
  FitRow noted = clean;
  noted.arch = "swa-64";
  noted.notes = {"fitted alpha = 2.57 lies outside the start grid's range"};
  study.fits = {clean, flagged, noted};
  const std::vector<std::string> lines = LawLines(study);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].find("warning"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("note"), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("[1 note, no warning; the report's fits table "
                          "lists them]"),
            std::string::npos)
      << lines[2];
  EXPECT_NE(lines[1].find("[2 warnings, the first: badly conditioned: only 2 "
                          "distinct N value(s)"),
            std::string::npos)
      << lines[1];
  EXPECT_NE(lines[1].find("...; the report's fits table lists them]"),
            std::string::npos)
      << lines[1];
}

TEST_F(ReportTest, StoredFitsGiveTablesFiguresAndIndex) {
  const int64_t sweep_id = StoreDemoSweep({});
  StoreTrueFits(sweep_id, "loss");
  StoreTrueFits(sweep_id, "longppl");
  store_.reset();  // the report reads the file, as after a run

  const Result r =
      Hlab({"report", "--db", db_, "--sweep", "demo", "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("full / loss: L(N, D) = 1.6 + 400/N^0.34 + "
                       "410/D^0.28 (R^2 fit 1.0000, verify 0.9990)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find((Out() / "index.html").string()), std::string::npos);
  EXPECT_NE(r.out.find("48 runs, 8 fits, 8 figures"), std::string::npos)
      << r.out;

  // runs.csv: one row per run, values as stored.
  const Csv runs = ReadCsv(Out() / "runs.csv");
  ASSERT_EQ(runs.rows.size(), 48u);
  int pending = 0;
  for (const auto& row : runs.rows) {
    const std::string arch = row[runs.Column("architecture")];
    SCOPED_TRACE(row[runs.Column("run_id")]);
    const double n = Number(row[runs.Column("N")]);
    const double d = Number(row[runs.Column("D")]);
    EXPECT_NEAR(Number(row[runs.Column("D_over_N")]), d / n, 1e-9 * d / n);
    if (row[runs.Column("run_id")] == pending_run_) {
      ++pending;
      EXPECT_EQ(row[runs.Column("state")], "PENDING");
      EXPECT_EQ(row[runs.Column("val_loss")], "");
      continue;
    }
    EXPECT_EQ(row[runs.Column("state")], "SUCCEEDED");
    const double loss = LossLaw(arch)(n, d);
    EXPECT_NEAR(Number(row[runs.Column("val_loss")]), loss, 1e-8 * loss);
    EXPECT_NEAR(Number(row[runs.Column("final_loss")]), loss + 0.5, 1e-8);
    const double lppl = LongPplLaw(arch)(n, d);
    EXPECT_NEAR(Number(row[runs.Column("log_longppl")]), lppl, 1e-8 * lppl);
    EXPECT_EQ(row[runs.Column("niah_accuracy")], arch == "full" ? "0.25" : "");
  }
  EXPECT_EQ(pending, 1);

  // fits.csv: the stored coefficients, CIs, objective and warnings.
  const Csv fits = ReadCsv(Out() / "fits.csv");
  ASSERT_EQ(fits.rows.size(), 8u);
  // By architecture, then loss before longppl.
  EXPECT_EQ(fits.rows[0][fits.Column("architecture")], "full");
  EXPECT_EQ(fits.rows[0][fits.Column("target")], "loss");
  EXPECT_EQ(fits.rows[1][fits.Column("target")], "longppl");
  for (const auto& row : fits.rows) {
    const std::string arch = row[fits.Column("architecture")];
    const std::string target = row[fits.Column("target")];
    SCOPED_TRACE(arch + "/" + target);
    const Law law = target == "loss" ? LossLaw(arch) : LongPplLaw(arch);
    EXPECT_DOUBLE_EQ(Number(row[fits.Column("E")]), law.E);
    EXPECT_DOUBLE_EQ(Number(row[fits.Column("alpha")]), law.alpha);
    EXPECT_DOUBLE_EQ(Number(row[fits.Column("beta_lo")]), law.beta * 0.99);
    if (arch == "gdn") {
      EXPECT_EQ(row[fits.Column("A_hi")], "");  // not finite
    } else {
      EXPECT_DOUBLE_EQ(Number(row[fits.Column("A_hi")]), law.A * 1.01);
    }
    EXPECT_DOUBLE_EQ(Number(row[fits.Column("objective")]), 1e-12);
    EXPECT_DOUBLE_EQ(Number(row[fits.Column("r2_verify")]), 0.999);
    EXPECT_EQ(row[fits.Column("warnings")], "warning of " + arch);
    EXPECT_EQ(row[fits.Column("notes")], "note of " + arch);
  }

  // The figures: scripts, data and SVGs that are real drawings.
  const std::vector<std::string> figures = {"longppl_vs_dn",
                                            "loss_overlaid",
                                            "loss_vs_tokens",
                                            "loss_observed_vs_predicted",
                                            "loss_residuals",
                                            "longppl_vs_tokens",
                                            "longppl_observed_vs_predicted",
                                            "longppl_residuals"};
  const std::string index = ReadFile(Out() / "index.html");
  const std::string md = ReadFile(Out() / "report.md");
  // The claims lead the report, the figures next, then the laws'
  // diagnostics, whose table (warnings, notes) is folded in the page. Claim
  // 2's known answer: every hybrid's law has E 0.1-0.3 above full's,
  // outside the +-0.05 overlap band.
  EXPECT_LT(md.find("## The paper's claims"), md.find("## Figures"));
  EXPECT_LT(md.find("## Figures"), md.find("## Fitted laws"));
  EXPECT_LT(index.find("<h2>The paper's claims</h2>"),
            index.find("<h2>Figures</h2>"));
  EXPECT_LT(index.find("<h2>Figures</h2>"), index.find("<h2>Fitted laws"));
  const size_t folded = index.find("<details><summary>Each fit's");
  ASSERT_NE(folded, std::string::npos);
  EXPECT_LT(index.find("<h2>Fitted laws"), folded);
  EXPECT_LT(folded, index.find("<td>warning of full</td>"));
  EXPECT_LT(index.find("<td>warning of full</td>"),
            index.find("</details>", folded));
  const size_t md_folded = md.find("<details><summary>Each fit's");
  ASSERT_NE(md_folded, std::string::npos);
  EXPECT_LT(md.find("## Fitted laws"), md_folded);
  EXPECT_LT(md_folded, md.find("| warning of full |"));
  EXPECT_LT(md.find("| warning of full |"), md.find("</details>", md_folded));
  EXPECT_NE(md.find("| 2. Hybrids' validation loss overlaps Full's | not "
                    "reproduced | "),
            std::string::npos)
      << md.substr(0, 3000);
  EXPECT_NE(md.find("swa-16 - full: +0.100 [+0.100, +0.100]"),
            std::string::npos);
  EXPECT_NE(index.find("<h2>The paper's claims</h2>"), std::string::npos);
  for (const std::string& name : figures) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(fs::exists(Out() / (name + ".gp")));
    const std::string svg = ReadFile(Out() / (name + ".svg"));
    EXPECT_GT(svg.size(), 10000u);
    EXPECT_NE(svg.find("<svg"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    // gnuplot-nox has the pngcairo terminal: the same script drew a PNG.
    const std::string png = ReadFile(Out() / (name + ".png"));
    EXPECT_GT(png.size(), 10000u);
    EXPECT_EQ(png.substr(1, 3), "PNG");
    EXPECT_NE(index.find("src=\"" + name + ".svg\""), std::string::npos);
    EXPECT_NE(md.find("](" + name + ".svg)"), std::string::npos);
  }
  // index.html references every SVG in the directory, and nothing missing.
  for (const auto& entry : fs::directory_iterator(Out())) {
    if (entry.path().extension() != ".svg") continue;
    EXPECT_NE(index.find("src=\"" + entry.path().filename().string() + "\""),
              std::string::npos)
        << entry.path();
  }
  size_t at = 0;
  while ((at = index.find("src=\"", at)) != std::string::npos) {
    at += 5;
    const std::string file = index.substr(at, index.find('"', at) - at);
    EXPECT_TRUE(fs::exists(Out() / file)) << file;
  }
  EXPECT_NE(index.find("full / loss: L(N, D) = 1.6 + 400/N^0.34"),
            std::string::npos);
  EXPECT_NE(index.find("95% bootstrap confidence intervals (50 resamples)"),
            std::string::npos);
  EXPECT_NE(md.find("| full | loss | 1.6 [1.584, 1.616] |"), std::string::npos)
      << md;
  // No receptive-field results: no section, no file.
  EXPECT_EQ(index.find("Receptive-field"), std::string::npos);
  EXPECT_FALSE(fs::exists(Out() / "receptive_field.csv"));

  // The data behind the residuals: the stored law is the truth, so the
  // prediction is the observation and the residual zero.
  std::ifstream data(Out() / "data" / "loss_swa-16.dat");
  std::string line;
  int points = 0, held_out = 0;
  while (std::getline(data, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 8u) << line;
    EXPECT_NEAR(Number(f[3]), Number(f[2]), 1e-9 * Number(f[2]));
    EXPECT_NEAR(Number(f[4]), 0, 1e-9);
    held_out += f[5] == "1";
    EXPECT_EQ(f[5] == "1", f[6] == "S4") << line;
    ++points;
  }
  EXPECT_EQ(points, 12);
  EXPECT_EQ(held_out, 3);
}

// RULER's scores: a table row per run with its newest scores, one column
// per metric, and the overall score against D.
TEST_F(ReportTest, RulerGetsATableAndAFigureAgainstD) {
  SweepOptions sweep;
  sweep.ruler = true;
  const int64_t sweep_id = StoreDemoSweep(sweep);
  StoreTrueFits(sweep_id, "loss");
  store_.reset();
  const Result r =
      Hlab({"report", "--db", db_, "--sweep", "demo", "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const Csv b = ReadCsv(Out() / "ruler.csv");
  ASSERT_EQ(b.rows.size(), 47u);  // every run but the pending one
  for (const auto& row : b.rows) {
    const double ratio =
        Number(row[b.Column("D")]) / Number(row[b.Column("N")]);
    const double vt = std::min(1.0, ratio / 16.0);
    EXPECT_NEAR(Number(row[b.Column("ruler_score/vt")]), vt, 1e-9);
    EXPECT_EQ(Number(row[b.Column("ruler_score/niah_single_1")]), 1);
    EXPECT_NEAR(Number(row[b.Column("ruler_score")]), (vt + 1) / 2, 1e-9);
  }
  const std::string index = ReadFile(Out() / "index.html");
  EXPECT_NE(index.find("<h2>RULER</h2>"), std::string::npos);
  EXPECT_NE(ReadFile(Out() / "report.md").find("## RULER"), std::string::npos);
  // One figure, of the overall score; full's line at its largest scale,
  // by D.
  EXPECT_TRUE(fs::exists(Out() / "ruler_score.gp"));
  std::istringstream line(ReadFile(Out() / "data" / "ruler_full.dat"));
  std::string text;
  std::vector<double> ds;
  while (std::getline(line, text)) {
    if (text.empty() || text[0] == '#') continue;
    ds.push_back(std::stod(text.substr(0, text.find(' '))));
  }
  ASSERT_GE(ds.size(), 3u);
  EXPECT_TRUE(std::is_sorted(ds.begin(), ds.end()));
  EXPECT_NE(ReadFile(Out() / "ruler_score.svg").find("</svg>"),
            std::string::npos);
  EXPECT_NE(index.find("src=\"ruler_score.svg\""), std::string::npos);
}

TEST_F(ReportTest, MechanismAnalysesGetTheirSectionCsvAndFigures) {
  SweepOptions sweep;
  sweep.receptive_field = true;
  sweep.gradient_profile = true;
  sweep.probing = true;
  sweep.retrieval_heads = true;
  sweep.q_grad = true;
  const int64_t sweep_id = StoreDemoSweep(sweep);
  StoreTrueFits(sweep_id, "loss");
  store_.reset();
  const Result r =
      Hlab({"report", "--db", db_, "--sweep", "demo", "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  const Csv rf = ReadCsv(Out() / "receptive_field.csv");
  ASSERT_EQ(rf.rows.size(), 47u);  // every run but the pending one
  for (const auto& row : rf.rows) {
    const bool full = row[rf.Column("architecture")] == "full";
    EXPECT_EQ(Number(row[rf.Column("full_restricted_delta_log_longppl")]), 1);
    EXPECT_EQ(Number(row[rf.Column("full_restricted_delta_loss")]), 0.01);
    if (full) {
      EXPECT_EQ(row[rf.Column("efficient_restricted_delta_log_longppl")], "");
    } else {
      EXPECT_EQ(
          Number(row[rf.Column("efficient_restricted_delta_log_longppl")]),
          0.1);
    }
  }
  const std::string index = ReadFile(Out() / "index.html");
  EXPECT_NE(index.find("Receptive-field constraint (appendix D.1)"),
            std::string::npos);
  EXPECT_NE(ReadFile(Out() / "report.md")
                .find("## Receptive-field constraint (appendix D.1)"),
            std::string::npos);
  // The gradient profile figure: one line per architecture, drawn.
  const std::string data = ReadFile(Out() / "data" / "gradient_gdn.dat");
  EXPECT_NE(data.find("0.5 16\n1.5 8\n3 4\n6 2\n12 1\n"), std::string::npos)
      << data;
  const std::string svg = ReadFile(Out() / "gradient_profile.svg");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(index.find("src=\"gradient_profile.svg\""), std::string::npos);
  // The probing figure: each layer's accuracy and interval, drawn.
  const std::string probes = ReadFile(Out() / "data" / "probing_full.dat");
  EXPECT_NE(probes.find(
                "0 0.125 0.0625 0.25\n1 0.75 0.625 0.875\n2 0.5 0.375 0.625\n"),
            std::string::npos)
      << probes;
  EXPECT_NE(ReadFile(Out() / "probing.svg").find("</svg>"), std::string::npos);
  EXPECT_NE(index.find("src=\"probing.svg\""), std::string::npos);
  // The retrieval figure: full's three S4 budgets (0.26M, 0.79M and 2.1M
  // tokens, D/N 2.3, 6.9, 18.3: scores 0.29, 0.86, 1) by D, and the
  // formation at the first score >= 0.5.
  std::istringstream heads(ReadFile(Out() / "data" / "retrieval_full.dat"));
  std::vector<std::vector<double>> points;
  std::string line;
  while (std::getline(heads, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<double> p;
    double v;
    while (fields >> v) p.push_back(v);
    points.push_back(p);
  }
  ASSERT_EQ(points.size(), 4u);  // three runs and the formation point
  EXPECT_NEAR(points[0][1], 262144.0 / 114416 / 8, 0.01);
  EXPECT_NEAR(points[1][1], 786432.0 / 114416 / 8, 0.01);
  EXPECT_EQ(points[2][1], 1);
  EXPECT_EQ(points[0][2], 1);  // the top head's layer and head
  EXPECT_EQ(points[0][3], 0);
  EXPECT_EQ(points[3][0], points[1][0]) << "formed at the 0.79M-token run";
  EXPECT_EQ(points[3][1], kRetrievalFormation);
  EXPECT_NE(ReadFile(Out() / "retrieval_heads.svg").find("</svg>"),
            std::string::npos);
  EXPECT_NE(index.find("src=\"retrieval_heads.svg\""), std::string::npos);
  // The Q-gradient figure: the top retrieval head's (l1h0) curve, although
  // l1h1 has the larger mean, and full's formation D dotted.
  EXPECT_EQ(ReadFile(Out() / "data" / "q_grad_full.dat")
                .substr(ReadFile(Out() / "data" / "q_grad_full.dat")
                            .find("# tokens norm\n")),
            "# tokens norm\n100 1\n200 2\n300 3\n");
  const std::string q_script = ReadFile(Out() / "q_grad.gp");
  EXPECT_NE(q_script.find("l1h0 (top retrieval head)"), std::string::npos);
  // Every architecture's scores reach 0.5 at its S4 0.79M run: four arrows.
  size_t arrows = 0;
  for (size_t at = q_script.find("set arrow from "); at != std::string::npos;
       at = q_script.find("set arrow from ", at + 1)) {
    ++arrows;
  }
  EXPECT_EQ(arrows, 4u) << q_script;
  EXPECT_NE(ReadFile(Out() / "q_grad.svg").find("</svg>"), std::string::npos);
  EXPECT_NE(index.find("src=\"q_grad.svg\""), std::string::npos);
}

// evaluation.trajectory's points give the formation figure: per
// architecture the largest scale's run with the most points (ties: the
// largest D), its scores by step, the Q-gradient norm of the best trace's
// top head (l1h0, scored 1 at the end, not the lower traces' l1h1), and the
// formation step.
TEST_F(ReportTest, RetrievalTracedAlongTrainingGetsTheFormationFigure) {
  SweepOptions sweep;
  sweep.retrieval_heads = true;
  sweep.retrieval_trajectory = true;
  sweep.q_grad = true;
  const int64_t sweep_id = StoreDemoSweep(sweep);
  StoreTrueFits(sweep_id, "loss");
  store_.reset();
  const Result r =
      Hlab({"report", "--db", db_, "--sweep", "demo", "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  // Two blocks of (step, value) lines: the scores, then the norms.
  const std::string data = ReadFile(Out() / "data" / "formation_full.dat");
  std::vector<std::vector<std::pair<double, double>>> blocks(1);
  std::istringstream lines(data);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) {
      if (!blocks.back().empty()) blocks.emplace_back();
      continue;
    }
    if (line[0] == '#') continue;
    std::istringstream fields(line);
    double x = 0, y = 0;
    fields >> x >> y;
    blocks.back().emplace_back(x, y);
  }
  using Points = std::vector<std::pair<double, double>>;
  ASSERT_EQ(blocks.size(), 2u) << data;
  EXPECT_EQ(blocks[0],
            (Points{{2, 0.1}, {4, 0.2}, {6, 0.55}, {8, 0.8}, {10, 1}}))
      << data;
  EXPECT_EQ(blocks[1], (Points{{1, 1}, {2, 2}, {3, 3}})) << data;
  EXPECT_NE(data.find("# q_proj gradient norm of l1h0"), std::string::npos);
  const std::string script = ReadFile(Out() / "retrieval_formation.gp");
  EXPECT_NE(script.find("set arrow from 6, graph 0 to 6, graph 1"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("axes x1y2"), std::string::npos) << script;
  EXPECT_NE(ReadFile(Out() / "retrieval_formation.svg").find("</svg>"),
            std::string::npos);
  EXPECT_NE(
      ReadFile(Out() / "index.html").find("src=\"retrieval_formation.svg\""),
      std::string::npos);
}

// A sweep whose retrieval heads were traced only at each run's end has no
// trajectory to draw: no formation figure (the retrieval_heads one stays).
TEST_F(ReportTest, RetrievalTracedOnlyAtTheEndGetsNoFormationFigure) {
  SweepOptions sweep;
  sweep.retrieval_heads = true;
  StoreTrueFits(StoreDemoSweep(sweep), "loss");
  store_.reset();
  const Result r =
      Hlab({"report", "--db", db_, "--sweep", "demo", "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(Out() / "retrieval_heads.gp"));
  EXPECT_FALSE(fs::exists(Out() / "retrieval_formation.gp"));
}

// Through the library, so the fits can start from 32 points near the truth
// instead of Chinchilla's 4500 (`hlab report` has no flag for that; the
// path is the same).
TEST_F(ReportTest, ComputesFitsWhenNoneIsStoredAndSaysLongPplIsMissing) {
  SweepOptions sweep;
  sweep.longppl = false;
  sweep.leave_one_pending = false;
  StoreDemoSweep(sweep);
  store_.reset();
  auto source = DatabaseRowSource::Open(db_);
  ASSERT_TRUE(source.ok()) << source.status();
  StudyOptions options;
  options.bootstrap = 10;
  options.threads = 2;
  options.grid =
      analysis::StartGrid{{0.25, 0.5}, {0.25, 0.5}, {0, 0.5}, {5, 6}, {5, 6}};
  auto study = ReadStudyData(**source, "", options);
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ(study->fits_origin, "computed");
  ASSERT_EQ(study->notes.size(), 1u);
  EXPECT_NE(study->notes[0].find("these were computed by hlab report"),
            std::string::npos)
      << study->notes[0];
  auto written = WriteStudyReport(*study, Out().string(), {});
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(written->plot_status.ok()) << written->plot_status;

  const Csv fits = ReadCsv(Out() / "fits.csv");
  ASSERT_EQ(fits.rows.size(), 8u);  // 4 architectures x (loss, longppl)
  int fitted = 0;
  for (const auto& row : fits.rows) {
    const std::string arch = row[fits.Column("architecture")];
    SCOPED_TRACE(arch);
    if (row[fits.Column("target")] == "longppl") {
      EXPECT_EQ(row[fits.Column("E")], "");
      EXPECT_NE(row[fits.Column("warnings")].find("not fitted: too few points"),
                std::string::npos);
      continue;
    }
    ++fitted;
    EXPECT_NEAR(Number(row[fits.Column("E")]), LossLaw(arch).E, 0.02);
    EXPECT_NEAR(Number(row[fits.Column("alpha")]), 0.34, 0.01);
    EXPECT_GT(Number(row[fits.Column("r2_verify")]), 0.999);
    EXPECT_LE(Number(row[fits.Column("beta_lo")]),
              Number(row[fits.Column("beta_hi")]));
  }
  EXPECT_EQ(fitted, 4);
  // No LongPPL: its figures say so in their place.
  const std::string index = ReadFile(Out() / "index.html");
  const std::string md = ReadFile(Out() / "report.md");
  const std::string note =
      "no log(LongPPL) values in sweep 1 yet: no succeeded run has a "
      "log_longppl (or longppl) eval";
  EXPECT_NE(index.find(note), std::string::npos);
  EXPECT_NE(md.find(note), std::string::npos);
  EXPECT_FALSE(fs::exists(Out() / "longppl_vs_tokens.gp"));
  EXPECT_FALSE(fs::exists(Out() / "longppl_vs_tokens.svg"));
  EXPECT_TRUE(fs::exists(Out() / "loss_residuals.svg"));
  EXPECT_NE(index.find("these were computed by hlab report"),
            std::string::npos);
  // Computed fits carry the calibrated profile-likelihood CIs.
  EXPECT_NE(index.find("95% profile-likelihood confidence intervals"),
            std::string::npos);
  EXPECT_NE(md.find("full / longppl: not fitted"), std::string::npos) << md;
}

// A fit whose N term vanished (alpha ran off) has an A beyond a double's
// range: the coordinator stores it NULL (or inf) with ln A in the details.
// Every place that prints the law shows exp(ln A), never 0 or inf.
TEST_F(ReportTest, AFitWhoseAOverflowedIsShownByItsLog) {
  const int64_t sweep_id = StoreDemoSweep({});
  StoreTrueFits(sweep_id, "loss");
  const std::pair<std::string, double> overflowed[] = {
      {"gdn", std::numeric_limits<double>::quiet_NaN()},  // stored NULL
      {"swa-64", std::numeric_limits<double>::infinity()}};
  for (const auto& [arch, a] : overflowed) {
    store::FitRecord fit;
    fit.sweep_id = sweep_id;
    fit.arch = arch;
    fit.target = "loss";
    fit.e = LossLaw(arch).E;
    fit.a = a;
    fit.alpha = 100;
    fit.b = 410;
    fit.beta = 0.28;
    fit.r2_fit = 0.99;
    fit.n_points = 9;
    fit.details = R"({"A": null, "a": 812.25, "b": 6.0161, "n_points": 9})";
    ASSERT_TRUE(store_->RecordFit(fit, testing::Now()).ok());
  }
  store_.reset();

  const Result r = Hlab({"report", "--db", db_, "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("gdn / loss: L(N, D) = 1.9 + exp(812.2)/N^100 + "
                       "410/D^0.28"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("swa-64 / loss: L(N, D) = 1.8 + exp(812.2)/N^100"),
            std::string::npos)
      << r.out;
  const std::string md = ReadFile(Out() / "report.md");
  const std::string index = ReadFile(Out() / "index.html");
  EXPECT_NE(md.find("| gdn | loss | 1.9 | exp(812.2) | 100 | 410 | 0.28 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("- gdn / loss: L(N, D) = 1.9 + exp(812.2)/N^100"),
            std::string::npos);
  EXPECT_NE(index.find("gdn / loss: L(N, D) = 1.9 + exp(812.2)/N^100"),
            std::string::npos);
  EXPECT_NE(index.find(">exp(812.2)<"), std::string::npos);
  for (const std::string* text : {&r.out, &md, &index}) {
    EXPECT_EQ(text->find(" 0/N^"), std::string::npos);
    EXPECT_EQ(text->find("inf/N^"), std::string::npos);
  }
  // fits.csv: A empty (not a number), log_A exact.
  const Csv fits = ReadCsv(Out() / "fits.csv");
  int seen = 0;
  for (const auto& row : fits.rows) {
    const std::string arch = row[fits.Column("architecture")];
    if (arch != "gdn" && arch != "swa-64") {
      EXPECT_NEAR(Number(row[fits.Column("log_A")]), std::log(400), 1e-9);
      continue;
    }
    ++seen;
    EXPECT_EQ(row[fits.Column("A")], "");
    EXPECT_DOUBLE_EQ(Number(row[fits.Column("log_A")]), 812.25);
    EXPECT_DOUBLE_EQ(Number(row[fits.Column("log_B")]), 6.0161);
  }
  EXPECT_EQ(seen, 2);
  // The figures compute the vanished term from ln A: finite predictions
  // (about E + B/D^beta), and the script has the term in log form.
  std::ifstream data(Out() / "data" / "loss_gdn.dat");
  std::string line;
  int points = 0;
  while (std::getline(data, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 8u) << line;
    const double predicted = Number(f[3]);
    EXPECT_NEAR(predicted, 1.9 + 410 / std::pow(Number(f[1]), 0.28), 1e-3)
        << line;
    ++points;
  }
  EXPECT_GT(points, 0);
  const std::string script = ReadFile(Out() / "loss_vs_tokens.gp");
  EXPECT_NE(script.find("L1(N, D) = E1 + exp(log_A1 - alpha1 * log(N))"),
            std::string::npos);
  EXPECT_NE(script.find("log_A1 = 812.25"), std::string::npos) << script;
}

TEST_F(ReportTest, SweepWithoutRunsSaysSo) {
  SweepOptions options;
  options.runs = false;
  StoreDemoSweep(options);
  store_.reset();
  const Result r = Hlab({"report", "--db", db_, "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: sweep 1 has no runs"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("0 runs, 0 fits, 0 figures"), std::string::npos);
  const Csv runs = ReadCsv(Out() / "runs.csv");
  EXPECT_EQ(runs.header.size(), 11u);
  EXPECT_TRUE(runs.rows.empty());
  EXPECT_NE(ReadFile(Out() / "index.html").find("sweep 1 has no runs"),
            std::string::npos);
}

TEST_F(ReportTest, UnknownSweepAndUnwritableOutputAreOneLineErrors) {
  StoreDemoSweep({});
  store_.reset();
  Result r =
      Hlab({"report", "--db", db_, "--sweep", "nope", "--out", Out().string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no sweep 'nope' in database " + db_), std::string::npos)
      << r.err;
  // The --out directory it made is not left behind.
  EXPECT_FALSE(std::filesystem::exists(Out())) << Out();

  std::ofstream(dir_ / "a-file") << "x";
  r = Hlab({"report", "--db", db_, "--out", (dir_ / "a-file" / "r").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot create the report directory"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("give a writable --out DIR"), std::string::npos);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  r = Hlab({"report", "--db", (dir_ / "missing.db").string(), "--out",
            Out().string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot read database"), std::string::npos) << r.err;
}

TEST_F(ReportTest, MissingGnuplotStillWritesTheTablesAndSaysWhatToInstall) {
  const int64_t sweep_id = StoreDemoSweep({});
  StoreTrueFits(sweep_id, "loss");
  store_.reset();
  const Result r = Hlab({"report", "--db", db_, "--out", Out().string(),
                         "--gnuplot", (dir_ / "no-gnuplot").string()});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("install gnuplot-nox"), std::string::npos) << r.err;
  EXPECT_EQ(ReadCsv(Out() / "runs.csv").rows.size(), 48u);
  EXPECT_EQ(ReadCsv(Out() / "fits.csv").rows.size(), 4u);
  EXPECT_TRUE(fs::exists(Out() / "loss_vs_tokens.gp"));
  EXPECT_FALSE(fs::exists(Out() / "loss_vs_tokens.svg"));
  const std::string index = ReadFile(Out() / "index.html");
  EXPECT_EQ(index.find(".svg\""), std::string::npos);
  EXPECT_NE(index.find("draw it with: gnuplot loss_vs_tokens.gp"),
            std::string::npos);
}

// The library on a study built in memory: one budget per scale, a token
// range too narrow for 1-2-5 tics, still gets labelled tics and drawn.
TEST(ReportPlotsTest, NarrowTokenRangeGetsTicsAtTheDataAndIsDrawn) {
  StudyData study;
  study.sweep_id = 7;
  study.sweep_name = "narrow";
  for (int i = 0; i < 6; ++i) {
    RunRow r;
    r.run_id = "run" + std::to_string(i);
    r.arch = "full";
    r.scale = "S" + std::to_string(i);
    r.state = "SUCCEEDED";
    r.n = 1e5 * (1 + i);
    r.d = 1.3e5 + 5e3 * i;
    r.val_loss = LossLaw("full")(r.n, r.d);
    study.runs.push_back(r);
  }
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hlab_report_narrow_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto plots = WritePlotScripts(study, dir.string());
  ASSERT_TRUE(plots.ok()) << plots.status();
  // The comparisons first: no log(LongPPL) to compare, the losses overlaid.
  ASSERT_EQ(plots->size(), 8u);
  EXPECT_EQ((*plots)[0].name, "longppl_vs_dn");
  EXPECT_FALSE((*plots)[0].scripted);
  EXPECT_NE((*plots)[0].note.find("no succeeded run has a log(LongPPL)"),
            std::string::npos);
  EXPECT_TRUE((*plots)[1].scripted);
  EXPECT_EQ((*plots)[2].name, "loss_vs_tokens");
  EXPECT_TRUE((*plots)[2].scripted);
  EXPECT_FALSE((*plots)[3].scripted);  // no fit: no observed/predicted
  EXPECT_NE((*plots)[3].note.find("no fit of loss"), std::string::npos);
  const std::string gp = ReadFile(dir / "loss_vs_tokens.gp");
  EXPECT_NE(gp.find("set xtics (\"130k\" 130000, \"155k\" 155000)"),
            std::string::npos)
      << gp;
  EXPECT_NE(gp.find("full (no fit)"), std::string::npos);
  PlotOptions options;
  options.png = false;
  ASSERT_TRUE(RenderPlots(dir.string(), options, &*plots).ok());
  EXPECT_TRUE((*plots)[2].svg);
  EXPECT_FALSE((*plots)[2].png);
  EXPECT_GT(ReadFile(dir / "loss_vs_tokens.svg").size(), 5000u);
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

// The paper-style comparisons on a study built in memory: one panel per
// scale, one block per architecture with its points by D/N, and the NoPE
// figure only for a swa-W-nope beside its swa-W (with full).
TEST(ReportPlotsTest, ComparisonFiguresOverlayArchitecturesPerScale) {
  StudyData study;
  study.sweep_id = 8;
  for (const char* arch : {"full", "swa-16", "swa-16-nope", "gdn"}) {
    for (int s = 0; s < 2; ++s) {
      for (double dn : {24.0, 6.0}) {
        RunRow r;
        r.arch = arch;
        r.scale = s == 0 ? "S1" : "S2";
        r.run_id = absl::StrCat(arch, r.scale, dn);
        r.state = "SUCCEEDED";
        r.n = s == 0 ? 1e4 : 4e4;
        r.d = dn * r.n;
        r.val_loss = 2.0 - 0.01 * dn;
        if (std::string(arch) != "gdn" || s == 1) r.log_longppl = 3.0 / dn;
        study.runs.push_back(r);
      }
    }
  }
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hlab_report_compare_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto plots = WritePlotScripts(study, dir.string());
  ASSERT_TRUE(plots.ok()) << plots.status();
  ASSERT_GE(plots->size(), 3u);
  EXPECT_EQ((*plots)[0].name, "longppl_vs_dn");
  EXPECT_EQ((*plots)[1].name, "loss_overlaid");
  EXPECT_EQ((*plots)[2].name, "nope");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE((*plots)[i].scripted) << i;
  // S1 has no gdn log(LongPPL): three blocks, by the sweep's order, by D/N.
  const std::string s1 = ReadFile(dir / "data/longppl_vs_dn_S1.dat");
  EXPECT_NE(s1.find("# full\n6 0.5 fullS16\n24 0.125 fullS124\n"),
            std::string::npos)
      << s1;
  EXPECT_EQ(s1.find("# gdn"), std::string::npos) << s1;
  EXPECT_NE(ReadFile(dir / "data/longppl_vs_dn_S2.dat").find("# gdn"),
            std::string::npos);
  const std::string gp = ReadFile(dir / "longppl_vs_dn.gp");
  EXPECT_NE(gp.find("set multiplot layout 1,2"), std::string::npos) << gp;
  EXPECT_NE(gp.find("\"data/longppl_vs_dn_S1.dat\" index 2 using 1:2"),
            std::string::npos)
      << gp;
  const std::string nope = ReadFile(dir / "nope.gp");
  EXPECT_NE(nope.find("swa-16-nope"), std::string::npos);
  EXPECT_EQ(nope.find("title \"gdn\""), std::string::npos) << nope;
  PlotOptions options;
  options.png = false;
  ASSERT_TRUE(RenderPlots(dir.string(), options, &*plots).ok());
  EXPECT_GT(ReadFile(dir / "nope.svg").size(), 5000u);
  // Without the NoPE variant there is no NoPE figure.
  study.runs.erase(
      std::remove_if(study.runs.begin(), study.runs.end(),
                     [](const RunRow& r) { return r.arch == "swa-16-nope"; }),
      study.runs.end());
  plots = WritePlotScripts(study, dir.string());
  ASSERT_TRUE(plots.ok());
  for (const Plot& p : *plots) EXPECT_NE(p.name, "nope");
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

}  // namespace
}  // namespace hlab::report
