#include "analysis/convergence.h"

#include <cmath>

#include <gtest/gtest.h>

namespace hlab::analysis {
namespace {

// The last D on a fine log grid where the gap is at or above the threshold:
// a brute-force check of TokenBudgetForConvergence.
double LastDAboveThreshold(const PowerLaw& l1, const PowerLaw& l2, double n,
                           double threshold) {
  double last = 1;
  for (double u = 0; u <= 80; u += 1e-4) {
    if (LossGap(l1, l2, n, std::exp(u)) >= threshold) last = std::exp(u);
  }
  return last;
}

TEST(ConvergenceTest, SameExponentMatchesTheClosedForm) {
  // Same E, A, alpha, beta; B differs by 300: gap = 300 D^-0.3, so
  // D* = (300 / 0.01)^(1/0.3).
  const PowerLaw l1 = {1.7, 400, 0.34, 700, 0.3};
  const PowerLaw l2 = {1.7, 400, 0.34, 400, 0.3};
  auto budget = TokenBudgetForConvergence(l1, l2, 1e8, 0.01);
  ASSERT_TRUE(budget.ok()) << budget.status();
  const double expected = std::pow(300 / 0.01, 1 / 0.3);
  EXPECT_TRUE(budget->converges);
  EXPECT_NEAR(budget->d, expected, 1e-9 * expected);
  EXPECT_NEAR(budget->tokens_per_param, expected / 1e8, 1e-9 * expected / 1e8);
  EXPECT_NEAR(budget->asymptotic_gap, 0, 1e-15);
}

TEST(ConvergenceTest, AsymptoticGapShrinksTheBand) {
  // E differs by 0.004 and the B-terms add 200 D^-0.3 on the same side:
  // gap = 0.004 + 200 D^-0.3 < 0.01 iff D > (200 / 0.006)^(1/0.3).
  const PowerLaw l1 = {1.704, 400, 0.34, 600, 0.3};
  const PowerLaw l2 = {1.700, 400, 0.34, 400, 0.3};
  auto budget = TokenBudgetForConvergence(l1, l2, 3e8, 0.01);
  ASSERT_TRUE(budget.ok());
  const double expected = std::pow(200 / 0.006, 1 / 0.3);
  EXPECT_NEAR(budget->d, expected, 1e-9 * expected);
  EXPECT_NEAR(budget->asymptotic_gap, 0.004, 1e-12);
}

TEST(ConvergenceTest, DifferentExponentsMatchABruteForceScan) {
  // B-terms that cross: the gap dips to zero, rises again, then decays --
  // the last crossing is the answer, not the first.
  const PowerLaw l1 = {1.7, 400, 0.34, 2000, 0.35};
  const PowerLaw l2 = {1.7, 400, 0.34, 300, 0.25};
  for (double threshold : {0.05, 0.01, 0.002}) {
    auto budget = TokenBudgetForConvergence(l1, l2, 1e8, threshold);
    ASSERT_TRUE(budget.ok());
    const double brute = LastDAboveThreshold(l1, l2, 1e8, threshold);
    EXPECT_NEAR(std::log(budget->d), std::log(brute), 2e-4)
        << "threshold " << threshold;
    EXPECT_LT(LossGap(l1, l2, 1e8, budget->d * 1.001), threshold);
  }
}

TEST(ConvergenceTest, NeverConvergesWhenTheAsymptoticGapIsTooLarge) {
  const PowerLaw l1 = {1.75, 400, 0.34, 410, 0.28};
  const PowerLaw l2 = {1.70, 400, 0.34, 410, 0.28};
  auto budget = TokenBudgetForConvergence(l1, l2, 1e8, 0.01);
  ASSERT_TRUE(budget.ok());
  EXPECT_FALSE(budget->converges);
  EXPECT_TRUE(std::isinf(budget->d));
  EXPECT_NEAR(budget->asymptotic_gap, 0.05, 1e-12);
}

TEST(ConvergenceTest, IdenticalLawsConvergeAtOnce) {
  const PowerLaw law = {1.7, 400, 0.34, 410, 0.28};
  auto budget = TokenBudgetForConvergence(law, law, 1e8, 1e-6);
  ASSERT_TRUE(budget.ok());
  EXPECT_TRUE(budget->converges);
  EXPECT_EQ(budget->d, 1.0);
}

TEST(ConvergenceTest, RejectsBadArguments) {
  const PowerLaw law = {1.7, 400, 0.34, 410, 0.28};
  EXPECT_EQ(TokenBudgetForConvergence(law, law, 0, 0.01).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenBudgetForConvergence(law, law, 1e8, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  PowerLaw bad = law;
  bad.beta = -0.1;
  EXPECT_NE(TokenBudgetForConvergence(law, bad, 1e8, 0.01)
                .status()
                .message()
                .find("second law"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace hlab::analysis
