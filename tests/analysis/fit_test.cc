#include "analysis/fit.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;
using testing::SyntheticGrid;

void ExpectBitwiseEqual(const FitResult& x, const FitResult& y) {
  EXPECT_EQ(std::memcmp(&x.log_law, &y.log_law, sizeof x.log_law), 0);
  EXPECT_EQ(std::memcmp(&x.objective, &y.objective, sizeof(double)), 0);
  EXPECT_EQ(x.best_start, y.best_start);
  EXPECT_EQ(x.n_starts_at_best, y.n_starts_at_best);
}

TEST(StartGridTest, ChinchillaGridHas4500StartsInEpochsOrder) {
  const StartGrid grid = StartGrid::Chinchilla();
  ASSERT_EQ(grid.size(), 4500u);
  const LogPowerLaw first = grid.At(0);
  EXPECT_EQ(first.alpha, 0);
  EXPECT_EQ(first.a, 0);
  EXPECT_EQ(first.b, 0);
  EXPECT_EQ(first.e, -1);
  // b is the innermost axis, alpha the outermost.
  EXPECT_EQ(grid.At(1).b, 5);
  EXPECT_EQ(grid.At(6).a, 5);
  EXPECT_EQ(grid.At(900).alpha, 0.5);
  const LogPowerLaw last = grid.At(4499);
  EXPECT_EQ(last.alpha, 2);
  EXPECT_EQ(last.beta, 2);
  EXPECT_EQ(last.e, 1);
  EXPECT_EQ(last.a, 25);
  EXPECT_EQ(last.b, 25);
  EXPECT_TRUE(grid.OnEdge(0));
  // alpha=0.5 beta=0.5 e=-0.5 a=5 b=5 is interior on every axis.
  size_t interior = 0;
  for (size_t i = 0; i < grid.size(); ++i) interior += !grid.OnEdge(i);
  EXPECT_EQ(interior, 3u * 3 * 3 * 4 * 4);
}

TEST(StartGridTest, ValidateRejectsEmptyAndNonFiniteAxes) {
  StartGrid grid = StartGrid::Chinchilla();
  grid.beta.clear();
  EXPECT_NE(grid.Validate().message().find("'beta' is empty"),
            absl::string_view::npos);
  grid = StartGrid::Chinchilla();
  grid.a.push_back(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(grid.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FitPowerLawTest, RecoversTheTrueLawWithoutNoise) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  auto fit = FitPowerLaw(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  // Tolerance: 1e-6 relative on every coefficient.
  EXPECT_NEAR(fit->law.E, kTrueLaw.E, 1e-6 * kTrueLaw.E);
  EXPECT_NEAR(fit->law.A, kTrueLaw.A, 1e-6 * kTrueLaw.A);
  EXPECT_NEAR(fit->law.alpha, kTrueLaw.alpha, 1e-6 * kTrueLaw.alpha);
  EXPECT_NEAR(fit->law.B, kTrueLaw.B, 1e-6 * kTrueLaw.B);
  EXPECT_NEAR(fit->law.beta, kTrueLaw.beta, 1e-6 * kTrueLaw.beta);
  EXPECT_LT(fit->objective, 1e-20);
  EXPECT_LT(fit->gradient_norm, 1e-9);
  EXPECT_EQ(fit->n_points, 30u);
  EXPECT_EQ(fit->n_starts, 4500u);
  EXPECT_GT(fit->n_starts_at_best, 1u);
  for (const std::string& w : fit->warnings) ADD_FAILURE() << w;
}

TEST(FitPowerLawTest, RecoversTheTrueLawWithSmallNoise) {
  // 0.5 % multiplicative log-normal noise, fixed seed. Tolerances: E within
  // 5 %, A and B within 40 %, alpha and beta within 0.03 -- with 30 points
  // A and B are weakly determined (they trade off against the exponents and
  // E); the bootstrap test checks the spread is honestly reported.
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.005, 7);
  auto fit = FitPowerLaw(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  std::printf("noisy fit: E=%.5f A=%.2f alpha=%.5f B=%.2f beta=%.5f\n",
              fit->law.E, fit->law.A, fit->law.alpha, fit->law.B,
              fit->law.beta);
  EXPECT_NEAR(fit->law.E, kTrueLaw.E, 0.05 * kTrueLaw.E);
  EXPECT_NEAR(fit->law.A, kTrueLaw.A, 0.4 * kTrueLaw.A);
  EXPECT_NEAR(fit->law.alpha, kTrueLaw.alpha, 0.03);
  EXPECT_NEAR(fit->law.B, kTrueLaw.B, 0.4 * kTrueLaw.B);
  EXPECT_NEAR(fit->law.beta, kTrueLaw.beta, 0.03);
  EXPECT_LT(fit->gradient_norm, 1e-7);
  // The truth cannot beat the optimum.
  const HuberLogObjective objective(points, 1e-3);
  double truth[kNumLogParams];
  ToVector(ToLogPowerLaw(kTrueLaw), truth);
  EXPECT_LE(fit->objective, objective.Evaluate(truth, nullptr));
}

TEST(FitPowerLawTest, ResultDoesNotDependOnTheThreadCount) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.01, 9);
  FitOptions options;
  options.threads = 1;
  auto one = FitPowerLaw(points, options);
  options.threads = 2;
  auto two = FitPowerLaw(points, options);
  ASSERT_TRUE(one.ok() && two.ok());
  ExpectBitwiseEqual(*one, *two);
}

TEST(FitPowerLawTest, RefineFromTheTruthConverges) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  LogPowerLaw start = ToLogPowerLaw(kTrueLaw);
  start.alpha += 0.05;
  start.a += 0.5;
  auto fit = RefinePowerLaw(points, start);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->law.alpha, kTrueLaw.alpha, 1e-6);
  EXPECT_EQ(fit->n_starts, 1u);
}

TEST(FitPowerLawTest, RejectsDegenerateInputNamingThePoint) {
  std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  points[17].d = std::numeric_limits<double>::quiet_NaN();
  auto fit = FitPowerLaw(points);
  ASSERT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fit.status().message().find("point 17: D"),
            absl::string_view::npos);

  points = SyntheticGrid(kTrueLaw, 0.0, 1);
  points[2].loss = -1;
  fit = RefinePowerLaw(points, ToLogPowerLaw(kTrueLaw));
  EXPECT_NE(fit.status().message().find("point 2: loss"),
            absl::string_view::npos);

  points.resize(4);
  fit = FitPowerLaw(points);
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fit.status().message().find("at least 5"), absl::string_view::npos);
}

TEST(FitPowerLawTest, RejectsInvalidOptions) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  FitOptions options;
  options.huber_delta = 0;
  EXPECT_EQ(FitPowerLaw(points, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = FitOptions();
  options.grid.e.clear();
  EXPECT_EQ(FitPowerLaw(points, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FitPowerLawTest, WarnsWhenAllPointsShareOneModelSize) {
  // Only D varies: A, alpha and E are not separately identifiable.
  std::vector<ScalingPoint> points;
  for (double d : testing::kGridD) {
    points.push_back({1e8, d, kTrueLaw.Predict(1e8, d)});
  }
  FitOptions options;
  options.grid.alpha = {0.5};  // a small grid keeps this test fast
  options.grid.e = {0.0, 0.5};
  auto fit = FitPowerLaw(points, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  bool distinct_n = false, conditioned = false;
  for (const std::string& w : fit->warnings) {
    distinct_n |= w.find("only 1 distinct N") != std::string::npos;
    conditioned |= w.find("condition number") != std::string::npos;
  }
  EXPECT_TRUE(distinct_n);
  EXPECT_TRUE(conditioned);
  EXPECT_GT(fit->condition_number, 1e8);
  // It still fits the points it has.
  EXPECT_LT(fit->objective, 1e-12);
}

TEST(FitPowerLawTest, WarnsWhenTheBestStartIsOnTheGridEdgeAlone) {
  // A grid whose every start is on the edge (two values per axis) and which
  // does not contain the optimum's exponent range.
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  FitOptions options;
  options.grid.alpha = {1.0, 2.0};
  options.grid.beta = {1.0, 2.0};
  options.grid.e = {0.0, 1.0};
  options.grid.a = {10, 20};
  options.grid.b = {10, 20};
  auto fit = FitPowerLaw(points, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  bool edge = false, range = false;
  for (const std::string& w : fit->warnings) {
    edge |= w.find("edge of the start grid") != std::string::npos;
    range |= w.find("fitted alpha") != std::string::npos;
  }
  EXPECT_TRUE(edge);
  EXPECT_TRUE(range);
  EXPECT_TRUE(fit->best_start_on_edge);
  EXPECT_FALSE(fit->interior_start_reached_best);
}

// A law whose E (0.1, e = -2.3) lies below the start grid's e range
// [-1, 1]: FitPowerLaw warns of it, and AnalyzePowerLaw keeps the warning
// unless the VarPro fit (which searches every E, A, B >= 0) reaches the same
// optimum; then it is a note (PowerLawReport::notes).
// AnalyzePowerLaw's options for the fit and its VarPro check alone.
AnalysisOptions WithoutIntervals() {
  AnalysisOptions options;
  options.bootstrap.resamples = 0;
  options.run_intervals = false;
  return options;
}

TEST(FitPowerLawTest, AnOptimumOutsideTheGridThatVarProConfirmsIsANote) {
  const PowerLaw law = {0.1, 400.0, 0.34, 410.0, 0.28};
  const std::vector<ScalingPoint> points = SyntheticGrid(law, 0.002, 11);
  auto fit = FitPowerLaw(points, FitOptions());
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->outside_grid.size(), 1u);
  EXPECT_NE(fit->outside_grid[0].find("e = ln E"), std::string::npos);
  EXPECT_NEAR(fit->law.E, 0.1, 0.02);

  AnalysisOptions options = WithoutIntervals();
  auto confirmed = AnalyzePowerLaw(points, {}, options);
  ASSERT_TRUE(confirmed.ok()) << confirmed.status();
  ASSERT_TRUE(confirmed->agreement.has_value());
  EXPECT_TRUE(confirmed->agreement->agree) << confirmed->agreement->summary;
  for (const std::string& w : confirmed->warnings) {
    EXPECT_EQ(w.find("start grid"), std::string::npos) << w;
  }
  ASSERT_EQ(confirmed->notes.size(), 1u);
  EXPECT_NE(confirmed->notes[0].find("e = ln E"), std::string::npos);
  EXPECT_NE(confirmed->notes[0].find("VarPro"), std::string::npos);

  options.run_varpro = false;  // nothing confirms it: a warning again
  auto alone = AnalyzePowerLaw(points, {}, options);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->notes.empty());
  EXPECT_EQ(alone->warnings, fit->warnings);
}

// The same rule for an exponent: alpha = 2.5 lies past the start grid's 2
// and inside VarPro's range, which confirms it (with the range's earlier
// end, 2, VarPro stopped at its edge and the fits disagreed).
TEST(FitPowerLawTest, AnExponentPastTheGridThatVarProConfirmsIsANote) {
  const PowerLaw law = {1.7, std::pow(1e7, 2.5), 2.5, 410.0, 0.28};
  const std::vector<ScalingPoint> points = SyntheticGrid(law, 0.002, 11);
  AnalysisOptions options = WithoutIntervals();
  auto report = AnalyzePowerLaw(points, {}, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->agreement.has_value());
  EXPECT_TRUE(report->agreement->agree) << report->agreement->summary;
  EXPECT_NEAR(report->fit.law.alpha, 2.5, 0.05);
  EXPECT_TRUE(report->warnings.empty())
      << ::testing::PrintToString(report->warnings);
  // alpha's note, and a = ln A's (40.3, past the grid's 25) beside it.
  bool alpha_noted = false;
  for (const std::string& note : report->notes) {
    alpha_noted |= note.find("fitted alpha") != std::string::npos;
    EXPECT_NE(note.find("VarPro"), std::string::npos) << note;
  }
  EXPECT_TRUE(alpha_noted) << ::testing::PrintToString(report->notes);
}

}  // namespace
}  // namespace hlab::analysis
