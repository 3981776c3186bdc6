#include "analysis/varpro.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/fit.h"
#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;
using testing::SyntheticGrid;

TEST(VarProTest, RecoversTheTrueLawWithoutNoise) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  for (VarProLoss loss : {VarProLoss::kHuber, VarProLoss::kSquares}) {
    VarProOptions options;
    options.loss = loss;
    auto fit = FitPowerLawVarPro(points, options);
    ASSERT_TRUE(fit.ok()) << fit.status();
    // Tolerance: 1e-5 relative (Nelder-Mead stops at a 1e-9 simplex).
    EXPECT_NEAR(fit->law.E, kTrueLaw.E, 1e-5 * kTrueLaw.E);
    EXPECT_NEAR(fit->law.A, kTrueLaw.A, 1e-5 * kTrueLaw.A);
    EXPECT_NEAR(fit->law.alpha, kTrueLaw.alpha, 1e-5 * kTrueLaw.alpha);
    EXPECT_NEAR(fit->law.B, kTrueLaw.B, 1e-5 * kTrueLaw.B);
    EXPECT_NEAR(fit->law.beta, kTrueLaw.beta, 1e-5 * kTrueLaw.beta);
    EXPECT_EQ(fit->loss, loss);
    EXPECT_TRUE(fit->warnings.empty());
  }
}

// Micro studies give N exponents past 2 (the demo's swa-64 law: 2.57):
// VarPro's range reaches 3, so it finds them instead of stopping at its edge.
TEST(VarProTest, RecoversAnExponentPastTwo) {
  const PowerLaw steep = {1.7, std::pow(1e7, 2.5), 2.5, 410.0, 0.28};
  const std::vector<ScalingPoint> points = SyntheticGrid(steep, 0.0, 1);
  auto fit = FitPowerLawVarPro(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->law.alpha, 2.5, 1e-4);
  EXPECT_NEAR(fit->law.E, 1.7, 1e-4);
  EXPECT_TRUE(fit->warnings.empty()) << ::testing::PrintToString(fit->warnings);
}

TEST(VarProTest, AgreesWithLbfgsOnNoisyData) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.005, 7);
  auto lbfgs = FitPowerLaw(points);
  auto varpro = FitPowerLawVarPro(points);
  ASSERT_TRUE(lbfgs.ok() && varpro.ok());
  const FitAgreement agreement =
      CompareFits(lbfgs->law, varpro->law, points, AgreementTolerance{});
  EXPECT_TRUE(agreement.agree) << agreement.summary;
  // The Huber objective on relative residuals approximates the one on log
  // residuals, so VarPro's law is near-optimal for the L-BFGS objective.
  EXPECT_LE(lbfgs->objective, varpro->log_huber_objective);
  EXPECT_LT(varpro->log_huber_objective, 1.05 * lbfgs->objective);
}

TEST(VarProTest, NonNegativityBoundIsRespectedAndReported) {
  // Data from a law with B = 0: NNLS must not return a negative B.
  PowerLaw no_b = kTrueLaw;
  no_b.B = 0;
  std::vector<ScalingPoint> points = SyntheticGrid(no_b, 0.0, 1);
  // Nudge the losses so unconstrained least squares would prefer B < 0.
  for (ScalingPoint& p : points) p.loss *= 1.0 + 1e-3 * std::log(p.d / 1e9);
  auto fit = FitPowerLawVarPro(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GE(fit->law.B, 0.0);
  EXPECT_GE(fit->law.A, 0.0);
  EXPECT_GE(fit->law.E, 0.0);
  bool reported = false;
  for (const std::string& w : fit->warnings) {
    reported |= w.find("B = 0") != std::string::npos;
  }
  EXPECT_TRUE(reported);
}

TEST(VarProTest, CompareFitsReportsTheDifferences) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  PowerLaw other = kTrueLaw;
  other.alpha += 0.1;
  other.E *= 1.05;
  const FitAgreement agreement =
      CompareFits(kTrueLaw, other, points, AgreementTolerance{});
  EXPECT_FALSE(agreement.agree);
  EXPECT_NEAR(agreement.alpha_diff, 0.1, 1e-12);
  EXPECT_EQ(agreement.beta_diff, 0.0);
  EXPECT_GT(agreement.max_prediction_rdiff, 0.01);
  EXPECT_NE(agreement.summary.find("alpha"), std::string::npos);
  EXPECT_TRUE(
      CompareFits(kTrueLaw, kTrueLaw, points, AgreementTolerance{}).agree);
}

TEST(VarProTest, RejectsBadInput) {
  std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  points[3].n = -1;
  EXPECT_NE(FitPowerLawVarPro(points).status().message().find("point 3: N"),
            absl::string_view::npos);
  points = SyntheticGrid(kTrueLaw, 0.0, 1);
  VarProOptions options;
  options.exponent_max = 0.0;
  EXPECT_EQ(FitPowerLawVarPro(points, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hlab::analysis
