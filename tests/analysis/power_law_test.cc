#include "analysis/power_law.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;
using testing::SyntheticGrid;

// The objective written the obvious way with std::exp/std::log: the
// reference for the vectorised HuberLogObjective.
double ReferenceObjective(const std::vector<ScalingPoint>& points,
                          const LogPowerLaw& law, double delta) {
  double total = 0;
  for (const ScalingPoint& p : points) {
    total += Huber(PredictLog(law, p.n, p.d) - std::log(p.loss), delta);
  }
  return total;
}

LogPowerLaw Perturbed(double scale) {
  LogPowerLaw law = ToLogPowerLaw(kTrueLaw);
  law.a += 0.3 * scale;
  law.b -= 0.2 * scale;
  law.e += 0.05 * scale;
  law.alpha += 0.02 * scale;
  law.beta -= 0.01 * scale;
  return law;
}

TEST(PowerLawTest, PredictLogMatchesPredict) {
  const LogPowerLaw log_law = ToLogPowerLaw(kTrueLaw);
  for (double n : {1e6, 1e8, 1e10}) {
    for (double d : {1e8, 1e10, 1e12}) {
      EXPECT_NEAR(std::exp(PredictLog(log_law, n, d)), kTrueLaw.Predict(n, d),
                  1e-12 * kTrueLaw.Predict(n, d));
    }
  }
  // Stable far outside the usual range, where exp(a - alpha ln N) under- or
  // overflows on its own.
  LogPowerLaw extreme = log_law;
  extreme.a = 800;
  EXPECT_TRUE(std::isfinite(PredictLog(extreme, 1e9, 1e9)));
  EXPECT_NEAR(PredictLog(extreme, 1e9, 1e9), 800 - 0.34 * std::log(1e9), 1e-9);
}

TEST(PowerLawTest, LogRoundTrip) {
  const PowerLaw back = ToPowerLaw(ToLogPowerLaw(kTrueLaw));
  EXPECT_DOUBLE_EQ(back.E, kTrueLaw.E);
  EXPECT_DOUBLE_EQ(back.A, kTrueLaw.A);
  EXPECT_DOUBLE_EQ(back.B, kTrueLaw.B);
  double x[kNumLogParams];
  ToVector(ToLogPowerLaw(kTrueLaw), x);
  EXPECT_DOUBLE_EQ(x[kParamAlpha], 0.34);
  EXPECT_DOUBLE_EQ(FromVector(x).beta, 0.28);
}

TEST(PowerLawTest, HuberIsQuadraticThenLinear) {
  EXPECT_DOUBLE_EQ(Huber(0.5e-3, 1e-3), 0.5 * 0.25e-6);
  EXPECT_DOUBLE_EQ(Huber(-1e-3, 1e-3), 0.5e-6);
  EXPECT_DOUBLE_EQ(Huber(0.1, 1e-3), 1e-3 * (0.1 - 0.5e-3));
  EXPECT_DOUBLE_EQ(Huber(-0.1, 1e-3), Huber(0.1, 1e-3));
}

TEST(PowerLawTest, ObjectiveMatchesReferenceForEveryPaddingLength) {
  const std::vector<ScalingPoint> all = SyntheticGrid(kTrueLaw, 0.01, 3);
  // 5..8 points exercise every padding to a multiple of four; 30 the grid.
  for (size_t n : {5u, 6u, 7u, 8u, 30u}) {
    const std::vector<ScalingPoint> points(all.begin(), all.begin() + n);
    const HuberLogObjective objective(points, 1e-3);
    EXPECT_EQ(objective.num_points(), n);
    for (double scale : {0.0, 1.0, -3.0}) {
      const LogPowerLaw law = Perturbed(scale);
      double x[kNumLogParams];
      ToVector(law, x);
      const double expected = ReferenceObjective(points, law, 1e-3);
      EXPECT_NEAR(objective.Evaluate(x, nullptr), expected, 1e-13 * expected)
          << "n=" << n << " scale=" << scale;
      // The portable kernel (the AVX2 one runs above where the CPU has it).
      double g1[kNumLogParams], g2[kNumLogParams];
      EXPECT_NEAR(objective.EvaluatePortable(x, g1), expected,
                  1e-13 * expected);
      objective.Evaluate(x, g2);
      for (int k = 0; k < kNumLogParams; ++k) {
        EXPECT_NEAR(g1[k], g2[k], 1e-12 * std::max(1.0, std::abs(g2[k])));
      }
    }
  }
}

TEST(PowerLawTest, AnalyticGradientMatchesFiniteDifferences) {
  // delta = 0.05 puts some residuals in the quadratic zone and some in the
  // linear one at these parameters.
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.03, 5);
  for (double delta : {1e-3, 0.05}) {
    const HuberLogObjective objective(points, delta);
    for (double scale : {0.5, -1.0}) {
      double x[kNumLogParams], grad[kNumLogParams];
      ToVector(Perturbed(scale), x);
      objective.Evaluate(x, grad);
      for (int k = 0; k < kNumLogParams; ++k) {
        const double h = 1e-6;
        double xp[kNumLogParams], xm[kNumLogParams];
        std::copy(x, x + kNumLogParams, xp);
        std::copy(x, x + kNumLogParams, xm);
        xp[k] += h;
        xm[k] -= h;
        const double numeric = (objective.Evaluate(xp, nullptr) -
                                objective.Evaluate(xm, nullptr)) /
                               (2 * h);
        EXPECT_NEAR(grad[k], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
            << "delta=" << delta << " param " << k;
      }
    }
  }
}

TEST(PowerLawTest, ObjectiveIsZeroAtTheTruthWithoutNoise) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  const HuberLogObjective objective(points, 1e-3);
  double x[kNumLogParams], grad[kNumLogParams];
  ToVector(ToLogPowerLaw(kTrueLaw), x);
  EXPECT_LT(objective.Evaluate(x, grad), 1e-28);
  for (double g : grad) EXPECT_LT(std::abs(g), 1e-13);
  const std::vector<double> r = objective.Residuals(x);
  ASSERT_EQ(r.size(), points.size());
  for (double v : r) EXPECT_LT(std::abs(v), 1e-14);
}

TEST(PowerLawTest, ValidatePointsNamesThePointAndField) {
  std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  EXPECT_TRUE(ValidatePoints(points).ok());

  struct Case {
    size_t index;
    double ScalingPoint::*field;
    double value;
    const char* expected;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Case cases[] = {
      {3, &ScalingPoint::n, 0.0, "point 3: N = 0"},
      {0, &ScalingPoint::n, -1e8, "point 0: N = -1e+08"},
      {7, &ScalingPoint::d, -5.0, "point 7: D = -5"},
      {12, &ScalingPoint::d, inf, "point 12: D = inf"},
      {29, &ScalingPoint::loss, nan, "point 29: loss = nan"},
      {4, &ScalingPoint::loss, 0.0, "point 4: loss = 0"},
      {5, &ScalingPoint::loss, -inf, "point 5: loss = -inf"},
  };
  for (const Case& c : cases) {
    std::vector<ScalingPoint> bad = points;
    bad[c.index].*c.field = c.value;
    const absl::Status status = ValidatePoints(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(c.expected), absl::string_view::npos)
        << status.message();
  }
}

TEST(PowerLawTest, ValidatePointsNeedsFivePoints) {
  const std::vector<ScalingPoint> points = SyntheticGrid(kTrueLaw, 0.0, 1);
  const absl::Status status =
      ValidatePoints(absl::MakeConstSpan(points).subspan(0, 4));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("at least 5 points"),
            absl::string_view::npos);
  EXPECT_NE(status.message().find("got 4"), absl::string_view::npos);
  EXPECT_TRUE(ValidatePoints(absl::MakeConstSpan(points).subspan(0, 5)).ok());
}

}  // namespace
}  // namespace hlab::analysis
