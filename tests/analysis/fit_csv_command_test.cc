#include "analysis/fit_csv_command.h"
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "analysis/analyze.h"
#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;
using testing::SyntheticGrid;

// A temp file removed at the end of the test.
class TempCsv {
 public:
  explicit TempCsv(const std::string& text) {
    char path[] = "/tmp/hlab-fit-command-test-XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    path_ = path;
    std::ofstream(path_) << text;
  }
  ~TempCsv() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string PointsCsv(const std::vector<ScalingPoint>& points) {
  std::string text = "N,D,loss\n";
  for (const ScalingPoint& p : points) {
    text += absl::StrFormat("%.17g,%.17g,%.17g\n", p.n, p.d, p.loss);
  }
  return text;
}

struct CommandRun {
  int code;
  std::string out, err;
};

CommandRun RunFit(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunFitCommand(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(ParseFitArgsTest, AcceptsBothFlagForms) {
  auto args =
      ParseFitArgs({"--points", "a.csv", "--verify=b.csv", "--bootstrap", "50",
                    "--threads=2", "--json", "--seed", "7"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->points_path, "a.csv");
  EXPECT_EQ(args->verify_path, "b.csv");
  EXPECT_EQ(args->bootstrap, 50);
  EXPECT_EQ(args->threads, 2);
  EXPECT_EQ(args->seed, 7u);
  EXPECT_TRUE(args->json);
  args = ParseFitArgs({"--chinchilla", "c.csv", "--verify-n-above", "1e9"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(args->preprocess, "chinchilla");
  EXPECT_EQ(*args->verify_n_above, 1e9);
}

TEST(ParseFitArgsTest, RejectsBadArgumentsNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    const char* expected;
  };
  const Case cases[] = {
      {{"--points"}, "--points: needs a value"},
      {{"--points", "a.csv", "--bootstrap", "-3"},
       "--bootstrap: expected an integer >= 0, got '-3'"},
      {{"--points", "a.csv", "--threads", "two"}, "--threads: expected"},
      {{"--points", "a.csv", "--verify-n-above", "0"},
       "--verify-n-above: expected a positive number"},
      {{"--points", "a.csv", "--preprocess", "epoch"},
       "--preprocess: expected 'none' or 'chinchilla'"},
      {{"--points", "a.csv", "--frobnicate"},
       "unknown argument '--frobnicate'"},
      {{"--json"}, "missing --points"},
      {{"--points", "a", "--verify", "b", "--verify-n-above", "1"},
       "either --verify or --verify-n-above"},
  };
  for (const Case& c : cases) {
    auto args = ParseFitArgs(c.args);
    ASSERT_FALSE(args.ok());
    EXPECT_NE(args.status().message().find(c.expected), absl::string_view::npos)
        << args.status().message();
  }
}

TEST(RunFitCommandTest, BadInputExitsWithCode2AndOneLine) {
  CommandRun run = RunFit({"--points", "/nonexistent/runs.csv"});
  EXPECT_EQ(run.code, 2);
  EXPECT_EQ(run.err.find("hlab-fit: cannot open '/nonexistent/runs.csv'"), 0u)
      << run.err;
  EXPECT_NE(run.err.find("--help"), std::string::npos);
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);

  TempCsv bad("N,D,loss\n1e8,1e9,3\n1e8,2e9,zero\n");
  run = RunFit({"--points", bad.path()});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find(bad.path() + ":3: column 'loss'"), std::string::npos)
      << run.err;

  TempCsv few("N,D,loss\n1e8,1e9,3\n2e8,2e9,2.9\n");
  run = RunFit({"--points", few.path()});
  EXPECT_EQ(run.code, 2);
  EXPECT_NE(run.err.find("at least 5 points"), std::string::npos);

  run = RunFit({"--bogus"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(run.out.empty());

  EXPECT_EQ(RunFit({"--help"}).code, 0);
  EXPECT_NE(RunFit({"--help"}).out.find("usage: hlab-fit"), std::string::npos);
}

TEST(RunFitCommandTest, JsonWithHeldOutModelSize) {
  TempCsv csv(PointsCsv(SyntheticGrid(kTrueLaw, 0.005, 7)));
  const CommandRun run =
      RunFit({"--points", csv.path(), "--verify-n-above", "5e8", "--bootstrap",
              "20", "--threads", "2", "--json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  for (const char* key :
       {"E", "A", "alpha", "B", "beta", "a", "b", "e", "objective",
        "gradient_norm", "r2_fit", "r2_verify", "n_points", "warnings"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["n_points"], 24);
  EXPECT_EQ(j["n_verify_points"], 6);
  EXPECT_EQ(j["bootstrap"]["resamples"], 20);
  EXPECT_NEAR(j["alpha"].get<double>(), kTrueLaw.alpha, 0.05);
  EXPECT_GT(j["r2_verify"].get<double>(), 0.9);
  EXPECT_EQ(j["verification"]["verify_points"].size(), 6u);
  // Profile intervals: the coefficients, and one per held-out point.
  ASSERT_TRUE(j.contains("intervals"));
  EXPECT_LE(j["intervals"]["alpha"]["lower"].get<double>(), kTrueLaw.alpha);
  EXPECT_GE(j["intervals"]["alpha"]["upper"].get<double>(), kTrueLaw.alpha);
  EXPECT_EQ(j["intervals"]["dof"], 24 - 5);
  ASSERT_EQ(j["intervals"]["predictions"].size(), 6u);
  for (const auto& p : j["verification"]["verify_points"]) {
    EXPECT_LE(p["lower"].get<double>(), p["predicted"].get<double>() * 1.01);
    EXPECT_GE(p["upper"].get<double>(), p["predicted"].get<double>() * 0.99);
  }
  EXPECT_TRUE(j["agreement"]["agree"].get<bool>());
}

TEST(RunFitCommandTest, TextWithAVerificationFile) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  TempCsv fit(PointsCsv({points.begin(), points.begin() + 24}));
  TempCsv verify(PointsCsv({points.begin() + 24, points.end()}));
  const CommandRun run =
      RunFit({"--points", fit.path(), "--verify", verify.path(), "--bootstrap",
              "10", "--threads", "2"});
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* text :
       {"95% CI (10 bootstrap resamples)", "alpha", "final gradient norm",
        "Held-out points: 6", "VarPro cross-check", "agrees"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
  // Without JSON there is no r2_verify key, but the text reports R^2.
  EXPECT_NE(run.out.find("R^2 1.000000"), std::string::npos) << run.out;

  const CommandRun none =
      RunFit({"--points", fit.path(), "--verify-n-above", "1e12"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("nothing is held out"), std::string::npos);
}

TEST(AnalyzePowerLawTest, NamesABadHeldOutPoint) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  std::vector<ScalingPoint> verify = {{2e9, 1e10, 2.0}, {2e9, -1, 2.0}};
  auto report = AnalyzePowerLaw(points, verify);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(report.status().message().find("verify point 1: D = -1"),
            absl::string_view::npos)
      << report.status().message();
}

TEST(AnalyzePowerLawTest, JsonOmitsR2VerifyWithoutHeldOutPoints) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.002, 4);
  AnalysisOptions options;
  options.fit.grid.alpha = {0.5};  // a small grid: this tests the report
  options.fit.grid.e = {0.5};
  options.bootstrap.resamples = 0;
  options.run_intervals = false;
  auto report = AnalyzePowerLaw(points, {}, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->r2_verify.has_value());
  EXPECT_FALSE(report->bootstrap.has_value());
  ASSERT_TRUE(report->varpro.has_value());
  const nlohmann::json j = nlohmann::json::parse(PowerLawReportToJson(*report));
  EXPECT_FALSE(j.contains("r2_verify"));
  EXPECT_FALSE(j.contains("bootstrap"));
  EXPECT_EQ(j["E"].get<double>(), report->E);
  EXPECT_EQ(j["fit"]["n_starts"], 5 * 6 * 6);
  EXPECT_EQ(j["n_points"], 30);
  const std::string text = FormatPowerLawReport(*report);
  EXPECT_EQ(text.find("Held-out"), std::string::npos);
  EXPECT_EQ(text.find("CI"), std::string::npos);
  EXPECT_FALSE(j.contains("intervals"));

  // The profile intervals are on by default.
  options.run_intervals = true;
  report = AnalyzePowerLaw(points, {}, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->intervals.has_value());
  EXPECT_TRUE(report->intervals->alpha.Contains(kTrueLaw.alpha));
  EXPECT_NE(FormatPowerLawReport(*report).find("95% CI (profile likelihood)"),
            std::string::npos);
}

TEST(AnalyzePowerLawTest, FewerThanSixPointsGetNoIntervalsAndAWarning) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.002, 4);
  AnalysisOptions options;
  options.fit.grid.alpha = {0.5};
  options.fit.grid.e = {0.5};
  options.bootstrap.resamples = 0;
  auto report = AnalyzePowerLaw(
      std::vector<ScalingPoint>(points.begin(), points.begin() + 5), {},
      options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->intervals.has_value());
  bool warned = false;
  for (const std::string& w : report->warnings) {
    warned |= w.find("no confidence intervals") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

}  // namespace
}  // namespace hlab::analysis
