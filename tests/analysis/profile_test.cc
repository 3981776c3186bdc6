#include "analysis/profile.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "analysis/coverage.h"
#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;
using testing::SyntheticGrid;

// Issue #24's 3 scales x 4 budgets (the demo's N; S4 held out).
GridShape IssueGrid() {
  return {"3x4",
          {12.8e3, 22.8e3, 51.2e3},
          {262144, 524288, 1048576, 2097152},
          {{114e3, 2097152}, {114e3, 8388608}}};
}

TEST(ProfileTest, StudentTQuantileMatchesTables) {
  // Two-sided 95% critical values (any t table; SciPy's t.ppf).
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.706204736, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 4), 2.776445105, 1e-8);
  EXPECT_NEAR(StudentTQuantile(0.975, 7), 2.364624252, 1e-8);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.042272456, 1e-8);
  EXPECT_NEAR(StudentTQuantile(0.95, 10), 1.812461123, 1e-8);
  EXPECT_NEAR(StudentTQuantile(0.025, 7), -2.364624252, 1e-8);
  EXPECT_EQ(StudentTQuantile(0.5, 3), 0);
  EXPECT_TRUE(std::isnan(StudentTQuantile(1.0, 3)));
}

// In the nearly linear regime (30 points, 0.1% noise) the profile interval
// must match the textbook linearised one, estimate +- t * sigma *
// sqrt([(J'J)^-1]_jj), J the Jacobian of the relative residuals: a known
// answer for the threshold and the bound search.
TEST(ProfileTest, MatchesLinearisedIntervalWhenNearlyLinear) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.001, 5);
  auto ci = ProfileLikelihoodIntervals(points);
  ASSERT_TRUE(ci.ok()) << ci.status();
  const PowerLaw& law = ci->least_squares;
  // J'J over (E, A, alpha, B, beta), then its inverse by Gauss-Jordan.
  double m[5][10] = {};
  for (const ScalingPoint& p : points) {
    const double xn = std::pow(p.n, -law.alpha), xd = std::pow(p.d, -law.beta);
    const double j[5] = {1 / p.loss, xn / p.loss,
                         -law.A * std::log(p.n) * xn / p.loss, xd / p.loss,
                         -law.B * std::log(p.d) * xd / p.loss};
    for (int r = 0; r < 5; ++r) {
      for (int c = 0; c < 5; ++c) m[r][c] += j[r] * j[c];
    }
  }
  for (int r = 0; r < 5; ++r) m[r][5 + r] = 1;
  for (int c = 0; c < 5; ++c) {
    int pivot = c;
    for (int r = c + 1; r < 5; ++r) {
      if (std::abs(m[r][c]) > std::abs(m[pivot][c])) pivot = r;
    }
    for (int k = 0; k < 10; ++k) std::swap(m[c][k], m[pivot][k]);
    const double d = m[c][c];
    for (int k = 0; k < 10; ++k) m[c][k] /= d;
    for (int r = 0; r < 5; ++r) {
      if (r == c) continue;
      const double f = m[r][c];
      for (int k = 0; k < 10; ++k) m[r][k] -= f * m[c][k];
    }
  }
  const double t = StudentTQuantile(0.975, ci->dof);
  const std::pair<const ProfileInterval*, int> checks[] = {{&ci->alpha, 2},
                                                           {&ci->beta, 4}};
  for (const auto& [interval, k] : checks) {
    const double half = t * ci->sigma * std::sqrt(m[k][5 + k]);
    EXPECT_NEAR(interval->upper - interval->estimate, half, 0.03 * half) << k;
    EXPECT_NEAR(interval->estimate - interval->lower, half, 0.03 * half) << k;
  }
  // And the intervals hold the truth.
  EXPECT_TRUE(ci->alpha.Contains(kTrueLaw.alpha));
  EXPECT_TRUE(ci->beta.Contains(kTrueLaw.beta));
}

TEST(ProfileTest, CoversTheTruthOnTheIssueGrid) {
  // The issue's measurement, smaller: 20 datasets, 1% noise, 3 x 4. The
  // percentile bootstrap covered E in 14 of 20 there (13 of 20 with these
  // seeds); calibrated 95% intervals miss more than 3 of 20 with
  // probability ~1.6%, and these seeds are fixed.
  CoverageOptions options;
  options.datasets = 20;
  options.threads = 2;
  auto result = MeasureIntervalCoverage(IssueGrid(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  const MethodCoverage& m = result->profile;
  EXPECT_EQ(m.failed, 0);
  const std::pair<const char*, const CoverageCount*> counts[] = {
      {"E", &m.E},
      {"A", &m.A},
      {"alpha", &m.alpha},
      {"B", &m.B},
      {"beta", &m.beta},
      {"pred", &m.predictions[0]},
      {"pred 4xD", &m.predictions[1]}};
  for (const auto& [name, c] : counts) {
    std::printf("%s: %d of %d covered, %d open\n", name, c->covered, c->total,
                c->unbounded);
    EXPECT_EQ(c->total, 20) << name;
    EXPECT_GE(c->covered, 17) << name;
  }
  // Informative, not merely wide: alpha and the predictions are bounded.
  EXPECT_EQ(m.alpha.unbounded, 0);
  EXPECT_EQ(m.predictions[0].unbounded, 0);
}

TEST(ProfileTest, IntervalsNestAndHoldTheEstimate) {
  const std::vector<ScalingPoint> points = SyntheticDataset(
      IssueGrid(), CoverageOptions().truth, 0.01, /*seed=*/3, /*index=*/0);
  ProfileOptions options;
  options.predict_at = IssueGrid().predict_at;
  auto wide = ProfileLikelihoodIntervals(points, options);
  options.confidence = 0.8;
  auto narrow = ProfileLikelihoodIntervals(points, options);
  ASSERT_TRUE(wide.ok() && narrow.ok());
  const std::pair<const ProfileInterval*, const ProfileInterval*> pairs[] = {
      {&wide->E, &narrow->E},
      {&wide->A, &narrow->A},
      {&wide->alpha, &narrow->alpha},
      {&wide->B, &narrow->B},
      {&wide->beta, &narrow->beta},
      {&wide->predictions[0].interval, &narrow->predictions[0].interval}};
  for (const auto& [w, n] : pairs) {
    EXPECT_LE(w->lower, n->lower);
    EXPECT_GE(w->upper, n->upper);
    EXPECT_LE(n->lower, n->estimate);
    EXPECT_GE(n->upper, n->estimate);
  }
  EXPECT_GT(wide->threshold_ratio, narrow->threshold_ratio);
  EXPECT_EQ(wide->dof, 7);
  // The estimate is the least-squares law's prediction.
  EXPECT_DOUBLE_EQ(wide->predictions[0].interval.estimate,
                   wide->least_squares.Predict(114e3, 2097152));
}

// AnalyzePowerLaw's further sites (the coordinator's live predictions of
// unfinished runs) get the same intervals as the profile computes there,
// apart from the held-out points'.
TEST(ProfileTest, AnalyzePowerLawPredictsAtFurtherSites) {
  const GridShape grid = IssueGrid();
  const std::vector<ScalingPoint> points = SyntheticDataset(
      grid, CoverageOptions().truth, 0.01, /*seed=*/3, /*index=*/0);
  const std::vector<ScalingPoint> verify = {
      {114e3, 262144, kTrueLaw.Predict(114e3, 262144)}};
  AnalysisOptions options;
  options.bootstrap.resamples = 0;
  options.run_varpro = false;
  options.fit.grid =
      StartGrid{{0.25, 0.5}, {0.25, 0.5}, {0, 0.5}, {5, 6}, {5, 6}};
  options.predict_at = grid.predict_at;
  auto report = AnalyzePowerLaw(points, verify, options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->intervals.has_value());
  ASSERT_EQ(report->intervals->predictions.size(), 1u);  // held-out only
  ASSERT_EQ(report->predictions.size(), 2u);

  ProfileOptions profile;
  profile.predict_at = {{114e3, 262144}};
  profile.predict_at.insert(profile.predict_at.end(), grid.predict_at.begin(),
                            grid.predict_at.end());
  auto direct = ProfileLikelihoodIntervals(points, profile);
  ASSERT_TRUE(direct.ok()) << direct.status();
  for (size_t i = 0; i < 2; ++i) {
    const ProfileInterval& got = report->predictions[i].interval;
    const ProfileInterval& want = direct->predictions[1 + i].interval;
    EXPECT_EQ(report->predictions[i].site.n, grid.predict_at[i].n);
    EXPECT_EQ(report->predictions[i].site.d, grid.predict_at[i].d);
    EXPECT_EQ(got.estimate, want.estimate);
    EXPECT_EQ(got.lower, want.lower);
    EXPECT_EQ(got.upper, want.upper);
    EXPECT_LT(got.lower, got.upper);
  }
  // Without intervals (5 points) there are no predictions either.
  const std::vector<ScalingPoint> five(points.begin(), points.begin() + 5);
  auto small = AnalyzePowerLaw(five, {}, options);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE(small->predictions.empty());
}

TEST(ProfileTest, FlagsSidesTheDataDoNotBound) {
  // 3 x 3 at 5% noise: E is not bounded away from 0, and on some of these
  // datasets alpha is not bounded above within the search range; then A's
  // upper end is not the data's either.
  GridShape shape = IssueGrid();
  shape.d = {262144, 786432, 2097152};
  int alpha_open = 0;
  for (int i = 0; i < 6; ++i) {
    const std::vector<ScalingPoint> points =
        SyntheticDataset(shape, CoverageOptions().truth, 0.05, 1, i);
    auto ci = ProfileLikelihoodIntervals(points);
    ASSERT_TRUE(ci.ok()) << ci.status();
    EXPECT_FALSE(ci->E.bounded_below);
    EXPECT_EQ(ci->E.lower, 0);
    if (!ci->alpha.bounded_above) {
      ++alpha_open;
      EXPECT_TRUE(std::isinf(ci->alpha.upper));
      EXPECT_FALSE(ci->A.bounded_above);
      EXPECT_TRUE(std::isinf(ci->A.upper));
    }
  }
  EXPECT_GT(alpha_open, 0);
}

TEST(ProfileTest, DeterministicAndIndependentOfThreads) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.01, 9);
  ProfileOptions options;
  options.predict_at = {{3e9, 1e11}};
  options.threads = 1;
  auto one = ProfileLikelihoodIntervals(points, options);
  options.threads = 2;
  auto two = ProfileLikelihoodIntervals(points, options);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->alpha.lower, two->alpha.lower);
  EXPECT_EQ(one->alpha.upper, two->alpha.upper);
  EXPECT_EQ(one->E.upper, two->E.upper);
  EXPECT_EQ(one->predictions[0].interval.lower,
            two->predictions[0].interval.lower);
  // Chinchilla's law on the 5 x 6 grid: every coefficient is bounded.
  for (const ProfileInterval* i :
       {&one->E, &one->A, &one->alpha, &one->B, &one->beta}) {
    EXPECT_TRUE(i->bounded_below && i->bounded_above);
  }
}

TEST(ProfileTest, RejectsBadInput) {
  std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.01, 1);
  ProfileOptions options;
  options.confidence = 1;
  EXPECT_EQ(ProfileLikelihoodIntervals(points, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = {};
  options.predict_at = {{1e9, 0}};
  EXPECT_NE(ProfileLikelihoodIntervals(points, options)
                .status()
                .message()
                .find("prediction site 0"),
            absl::string_view::npos);
  const std::vector<ScalingPoint> five(points.begin(), points.begin() + 5);
  EXPECT_EQ(ProfileLikelihoodIntervals(five).status().code(),
            absl::StatusCode::kFailedPrecondition);
  points[4].loss = -1;
  EXPECT_NE(ProfileLikelihoodIntervals(points).status().message().find(
                "point 4: loss"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace hlab::analysis
