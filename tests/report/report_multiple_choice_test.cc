// `hlab report` on a sweep that evaluated a multiple-choice task: each
// run's newest scores in multiple_choice.csv and the pages, and the task's
// figure of accuracy against D.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/store/store.h"
#include "tests/report/report_test_util.h"

namespace hlab::report {
namespace {

namespace fs = std::filesystem;
using testing::Csv;
using testing::Hlab;
using testing::Number;
using testing::ReadCsv;
using testing::ReadFile;
using testing::Result;
using testing::SweepOptions;

class ReportMultipleChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "hlab_report_mc_XXXXXX";
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
  fs::path Out() const { return dir_ / "report"; }

  fs::path dir_;
  std::string db_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(ReportMultipleChoiceTest, EachRunsTaskScoresAndTheFigureAgainstD) {
  SweepOptions sweep;
  sweep.multiple_choice = true;
  const int64_t sweep_id = testing::StoreDemoSweep(*store_, sweep);
  testing::StoreTrueFits(*store_, sweep_id, "loss");
  store_.reset();
  const Result r =
      Hlab({"report", "--db", db_, "--sweep", "demo", "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;

  const Csv mc = ReadCsv(Out() / "multiple_choice.csv");
  ASSERT_EQ(mc.rows.size(), 47u);  // every run but the pending one
  for (const auto& row : mc.rows) {
    EXPECT_EQ(row[mc.Column("task")], "arc");
    EXPECT_EQ(row[mc.Column("step")], "10");  // the newest, not step 5's 0
    EXPECT_EQ(row[mc.Column("n")], "200");
    EXPECT_EQ(row[mc.Column("num_fewshot")], "5");
    const double ratio =
        Number(row[mc.Column("D")]) / Number(row[mc.Column("N")]);
    const double acc = Number(row[mc.Column("acc")]);
    EXPECT_NEAR(acc, std::min(1.0, ratio / 16), 1e-6);
    EXPECT_NEAR(Number(row[mc.Column("acc_norm")]), acc + 0.05, 1e-9);
    EXPECT_EQ(Number(row[mc.Column("acc_stderr")]), 0.03);
    EXPECT_EQ(Number(row[mc.Column("acc_norm_stderr")]), 0.02);
  }
  EXPECT_NE(ReadFile(Out() / "report.md").find("## Multiple-choice tasks"),
            std::string::npos);
  const std::string index = ReadFile(Out() / "index.html");
  EXPECT_NE(index.find("<h2>Multiple-choice tasks</h2>"), std::string::npos);

  // The figure: per architecture at its largest scale, D ascending, both
  // scores and their stderrs.
  const std::string data = ReadFile(Out() / "data" / "mc_arc_full.dat");
  std::istringstream lines(data);
  std::string line;
  std::vector<std::vector<double>> points;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<double> p(5);
    for (double& v : p) fields >> v;
    points.push_back(p);
  }
  ASSERT_GE(points.size(), 2u) << data;
  for (size_t i = 0; i < points.size(); ++i) {
    EXPECT_NEAR(points[i][3], points[i][1] + 0.05, 1e-9);
    EXPECT_EQ(points[i][2], 0.03);
    EXPECT_EQ(points[i][4], 0.02);
    if (i > 0) {
      EXPECT_GT(points[i][0], points[i - 1][0]);
    }
  }
  const std::string script = ReadFile(Out() / "mc_arc.gp");
  EXPECT_NE(script.find("data/mc_arc_full.dat"), std::string::npos);
  EXPECT_NE(ReadFile(Out() / "mc_arc.svg").find("</svg>"), std::string::npos);
  EXPECT_NE(index.find("src=\"mc_arc.svg\""), std::string::npos);
}

TEST_F(ReportMultipleChoiceTest, ASweepWithoutTasksHasNoSection) {
  testing::StoreTrueFits(*store_, testing::StoreDemoSweep(*store_, {}), "loss");
  store_.reset();
  const Result r =
      Hlab({"report", "--db", db_, "--sweep", "demo", "--out", Out().string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(Out() / "multiple_choice.csv"));
  EXPECT_EQ(ReadFile(Out() / "index.html").find("Multiple-choice"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::report
