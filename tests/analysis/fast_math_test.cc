#include "analysis/internal/fast_math.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tests/analysis/synthetic.h"

namespace hlab::analysis::internal {
namespace {

// |got - want| in units of the last place of want.
double Ulps(double got, double want) {
  const double ulp = std::nextafter(std::abs(want), INFINITY) - std::abs(want);
  return std::abs(got - want) / ulp;
}

Vec2 Exp(const Vec2& x) {
  Vec2 y;
  VecExp(x, &y);
  return y;
}

Vec2 Log(const Vec2& x) {
  Vec2 y;
  VecLog(x, &y);
  return y;
}

TEST(FastMathTest, ExpWithinOneUlpOfStdExp) {
  testing::SyntheticRng rng(11);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    // Wide range, and the range the objective uses (x <= 0, mostly small).
    const double x0 = -708 + 1417 * rng.Uniform();
    const double x1 = -40 * rng.Uniform();
    const Vec2 y = Exp(Vec2{x0, x1});
    worst =
        std::max({worst, Ulps(y[0], std::exp(x0)), Ulps(y[1], std::exp(x1))});
  }
  EXPECT_LE(worst, 1.0);
}

TEST(FastMathTest, LogWithinOneUlpOfStdLog) {
  testing::SyntheticRng rng(12);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x0 = std::exp(-700 + 1400 * rng.Uniform());
    const double x1 = 1 + 2 * rng.Uniform();  // the objective's range [1, 3]
    const Vec2 y = Log(Vec2{x0, x1});
    worst =
        std::max({worst, Ulps(y[0], std::log(x0)), Ulps(y[1], std::log(x1))});
  }
  EXPECT_LE(worst, 1.0);
}

TEST(FastMathTest, ExactAndClampedValues) {
  const Vec2 one = Exp(Vec2{0.0, -0.0});
  EXPECT_EQ(one[0], 1.0);
  EXPECT_EQ(one[1], 1.0);
  const Vec2 zero = Log(Vec2{1.0, 2.0});
  EXPECT_EQ(zero[0], 0.0);
  EXPECT_DOUBLE_EQ(zero[1], std::log(2.0));
  // Clamped: never 0, subnormal or inf.
  const Vec2 clamped = Exp(Vec2{-1e4, 1e4});
  EXPECT_GT(clamped[0], 0.0);
  EXPECT_TRUE(std::isnormal(clamped[0]));
  EXPECT_TRUE(std::isfinite(clamped[1]));
}

TEST(FastMathTest, FourLanesMatchTwoLanes) {
  // The AVX2 kernel's width; compiled here without AVX, same operations.
  const Vec4 x = {-0.5, -3.25, -700.0, 2.0};
  Vec4 y, z;
  VecExp(x, &y);
  VecLog(y, &z);
  for (int lane = 0; lane < 4; ++lane) {
    EXPECT_EQ(y[lane], Exp(Vec2{x[lane], 0.0})[0]) << lane;
    EXPECT_EQ(z[lane], Log(Vec2{y[lane], 1.0})[0]) << lane;
  }
}

}  // namespace
}  // namespace hlab::analysis::internal
