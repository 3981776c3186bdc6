// LinearisedLaw (analysis/run_selection.h): the target region's linearised
// predictive variance and the reduction one more run brings, checked against
// a law refitted with the run added (Sherman-Morrison must agree with a
// fresh matrix) and against the delta method computed by hand.
#include "analysis/run_selection.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;

std::vector<DesignPoint> Grid(std::vector<double> ns, std::vector<double> ds) {
  std::vector<DesignPoint> out;
  for (double n : ns) {
    for (double d : ds) out.push_back({n, d});
  }
  return out;
}

TEST(RunSelectionTest, ReductionIsTheDropInTargetVariance) {
  const std::vector<DesignPoint> measured =
      Grid({1e7, 3e7, 1e8}, {2e8, 1e9, 5e9});
  const std::vector<DesignPoint> targets = {{1e9, 2e9}, {1e9, 1e10}};
  absl::StatusOr<LinearisedLaw> before =
      LinearisedLaw::Create(kTrueLaw, measured);
  ASSERT_TRUE(before.ok()) << before.status();
  for (const DesignPoint c :
       {DesignPoint{3e8, 2e8}, DesignPoint{1e7, 1e10}, DesignPoint{1e8, 5e9}}) {
    std::vector<DesignPoint> with = measured;
    with.push_back(c);
    absl::StatusOr<LinearisedLaw> after = LinearisedLaw::Create(kTrueLaw, with);
    ASSERT_TRUE(after.ok());
    const double drop =
        before->TargetVariance(targets) - after->TargetVariance(targets);
    const double predicted = before->VarianceReduction(c, targets);
    EXPECT_GT(predicted, 0);
    EXPECT_NEAR(predicted, drop, 1e-6 * before->TargetVariance(targets))
        << "candidate N=" << c.n << " D=" << c.d;
  }
}

TEST(RunSelectionTest, GradientIsTheDerivativeOfLogL) {
  absl::StatusOr<LinearisedLaw> lin =
      LinearisedLaw::Create(kTrueLaw, Grid({1e7, 1e8, 1e9}, {1e9, 1e10}));
  ASSERT_TRUE(lin.ok());
  const DesignPoint p{3e8, 2e9};
  const auto g = lin->Gradient(p);
  // Central differences of ln L in (a, b, e, alpha, beta).
  LogPowerLaw base = ToLogPowerLaw(kTrueLaw);
  double x[kNumLogParams];
  ToVector(base, x);
  for (int k = 0; k < kNumLogParams; ++k) {
    const double h = 1e-6;
    double up[kNumLogParams], down[kNumLogParams];
    std::copy(x, x + kNumLogParams, up);
    std::copy(x, x + kNumLogParams, down);
    up[k] += h;
    down[k] -= h;
    const double numeric = (PredictLog(FromVector(up), p.n, p.d) -
                            PredictLog(FromVector(down), p.n, p.d)) /
                           (2 * h);
    EXPECT_NEAR(g[k], numeric, 1e-7) << "parameter " << k;
  }
}

TEST(RunSelectionTest, WithExactlyFivePointsTheVarianceIsTheDeltaMethods) {
  // Five points in general position determine the five parameters: M =
  // G^T G with G square and invertible, so at a measured point g^T M^-1 g
  // is the hat matrix's diagonal, exactly 1. (Points on a regular pattern
  // in log N and log D can make G singular for this law: the grid
  // (1e7, 2e8), (1e8, 1e9), (1e9, 1e10), (1e7, 1e10), (1e9, 2e8) do: rank
  // 4; the ridge then keeps the undetermined direction's variance finite.)
  const std::vector<DesignPoint> five = {
      {2e7, 3e8}, {5e7, 4e9}, {3e8, 1e9}, {1e9, 6e9}, {6e8, 2e8}};
  absl::StatusOr<LinearisedLaw> lin = LinearisedLaw::Create(kTrueLaw, five);
  ASSERT_TRUE(lin.ok());
  for (const DesignPoint& p : five) {
    EXPECT_NEAR(lin->TargetVariance({p}), 1.0, 1e-6);
  }
}

TEST(RunSelectionTest, ALargerScaleNarrowsAnExtrapolationMore) {
  const std::vector<DesignPoint> measured =
      Grid({1e7, 2e7, 4e7}, {2e8, 1e9, 5e9});
  absl::StatusOr<LinearisedLaw> lin = LinearisedLaw::Create(kTrueLaw, measured);
  ASSERT_TRUE(lin.ok());
  const std::vector<DesignPoint> targets = {{1e9, 1e10}};
  EXPECT_GT(lin->VarianceReduction({1e8, 5e9}, targets),
            lin->VarianceReduction({1e7, 5e9}, targets));
}

TEST(RunSelectionTest, AZeroFloorIsNotAnError) {
  PowerLaw law = kTrueLaw;
  law.E = 0;
  absl::StatusOr<LinearisedLaw> lin =
      LinearisedLaw::Create(law, Grid({1e7, 1e8, 1e9}, {1e9, 1e10}));
  ASSERT_TRUE(lin.ok());
  const double v = lin->TargetVariance({{3e9, 3e10}});
  EXPECT_TRUE(std::isfinite(v));
  EXPECT_GT(v, 0);
}

TEST(RunSelectionTest, BadPointsAndLawsAreRefused) {
  absl::StatusOr<LinearisedLaw> bad =
      LinearisedLaw::Create(kTrueLaw, {{1e7, 1e9}, {-1, 1e9}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("measured point 1"), std::string::npos)
      << bad.status();
  PowerLaw nan_law = kTrueLaw;
  nan_law.alpha = std::nan("");
  EXPECT_FALSE(LinearisedLaw::Create(nan_law, {{1e7, 1e9}}).ok());
}

TEST(RunSelectionTest, IdentifiableNeedsFivePointsThreeScalesTwoBudgets) {
  EXPECT_TRUE(Identifiable(Grid({1, 2, 3}, {10, 20})));
  EXPECT_FALSE(Identifiable(Grid({1, 2}, {10, 20, 30})));  // 2 scales
  EXPECT_TRUE(Identifiable(Grid({1, 2}, {10, 20, 30}), /*min_n_levels=*/2));
  EXPECT_FALSE(Identifiable(Grid({1, 2, 3, 4, 5}, {10})));           // 1 budget
  EXPECT_FALSE(Identifiable({{1, 10}, {2, 20}, {3, 10}, {1, 20}}));  // 4
}

}  // namespace
}  // namespace hlab::analysis
