#include "analysis/verify.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/fit.h"
#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;
using testing::SyntheticGrid;

TEST(VerifyTest, RSquaredMatchesTheDefinition) {
  // Three points with losses 2, 3, 4 (mean 3, SS_tot = 2) and predictions
  // off by +0.1, -0.1, +0.2 (SS_res = 0.06): R^2 = 1 - 0.06/2 = 0.97.
  const PowerLaw law = {2.0, 0.0, 1.0, 0.0, 1.0};  // predicts 2 everywhere
  const std::vector<ScalingPoint> points = {
      {1, 1, 2.1}, {1, 1, 1.9}, {1, 1, 2.2}};
  // mean 2.0667; residuals 0.1, -0.1, 0.2.
  const double mean = (2.1 + 1.9 + 2.2) / 3;
  const double ss_tot = std::pow(2.1 - mean, 2) + std::pow(1.9 - mean, 2) +
                        std::pow(2.2 - mean, 2);
  EXPECT_NEAR(RSquared(law, points), 1 - 0.06 / ss_tot, 1e-12);
  EXPECT_EQ(RSquared(kTrueLaw, SyntheticGrid(kTrueLaw, 0.0, 1)), 1.0);
  EXPECT_TRUE(std::isnan(RSquared(law, {{1, 1, 2.0}})));
  EXPECT_TRUE(std::isnan(RSquared(law, {{1, 1, 2.0}, {2, 2, 2.0}})));
}

TEST(VerifyTest, ExtrapolationToHeldOutModelSizes) {
  // Fit on N <= 3e8, verify on N = 1e9 (6 points), 0.5 % noise.
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.005, 7);
  const PointSplit split = SplitByN(points, 5e8);
  ASSERT_EQ(split.fit.size(), 24u);
  ASSERT_EQ(split.verify.size(), 6u);
  for (const ScalingPoint& p : split.verify) EXPECT_EQ(p.n, 1e9);
  auto fit = FitPowerLaw(split.fit);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const Verification v = VerifyPowerLaw(fit->law, split.fit, split.verify);
  ASSERT_EQ(v.verify_points.size(), 6u);
  ASSERT_TRUE(v.r2_verify.has_value());
  std::printf("held-out R^2 %.4f, mean |rel err| %.4f%%, max %.4f%%\n",
              *v.r2_verify, 100 * *v.mean_abs_relative_error_verify,
              100 * *v.max_abs_relative_error_verify);
  EXPECT_GT(v.r2_fit, 0.99);
  EXPECT_GT(*v.r2_verify, 0.9);
  // Each held-out error is the prediction's, recomputed here.
  double max_abs = 0;
  for (const PointPrediction& p : v.verify_points) {
    const double predicted = fit->law.Predict(p.point.n, p.point.d);
    EXPECT_DOUBLE_EQ(p.predicted, predicted);
    EXPECT_DOUBLE_EQ(p.relative_error,
                     (predicted - p.point.loss) / p.point.loss);
    max_abs = std::max(max_abs, std::abs(p.relative_error));
  }
  EXPECT_DOUBLE_EQ(*v.max_abs_relative_error_verify, max_abs);
  // 0.5 % noise: extrapolation one size up stays within a few percent.
  EXPECT_LT(max_abs, 0.03);
}

TEST(VerifyTest, PerfectLawHasZeroErrors) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  const PointSplit split = SplitByN(points, 5e8);
  const Verification v = VerifyPowerLaw(kTrueLaw, split.fit, split.verify);
  EXPECT_EQ(*v.r2_verify, 1.0);
  EXPECT_LT(*v.max_abs_relative_error_verify, 1e-15);
  EXPECT_LT(v.rmse_fit, 1e-14);
}

TEST(VerifyTest, NoOrOneHeldOutPoint) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  Verification v = VerifyPowerLaw(kTrueLaw, points, {});
  EXPECT_FALSE(v.r2_verify.has_value());
  EXPECT_FALSE(v.max_abs_relative_error_verify.has_value());
  v = VerifyPowerLaw(kTrueLaw, points, {{2e9, 1e10, 2.0}});
  EXPECT_FALSE(v.r2_verify.has_value());  // undefined for one point
  ASSERT_TRUE(v.max_abs_relative_error_verify.has_value());
  EXPECT_NEAR(*v.max_abs_relative_error_verify,
              std::abs(kTrueLaw.Predict(2e9, 1e10) - 2.0) / 2.0, 1e-15);
}

}  // namespace
}  // namespace hlab::analysis
