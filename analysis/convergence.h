// Convergence budgets: from how many training tokens on do two fitted laws
// predict (nearly) the same loss at a given model size?
//
// The study's first claim is that hybrids differ mainly in how fast their
// long-context ability emerges and converge with enough training. For laws
// L1, L2 at model size N, the gap
//   g(D) = |L1(N, D) - L2(N, D)|
// tends to |E1 - E2 + A1/N^alpha1 - A2/N^alpha2| as D grows; the convergence
// budget is the smallest D* >= 1 with g(D) < threshold for every D >= D*.
// In u = ln D the difference of the two B-terms has at most one stationary
// point, so g is piecewise monotone and D* is found exactly by bisection on
// at most two monotone pieces (to relative precision 1e-12).
//
// Thread-safety: pure functions.
//
//   HLAB_ASSIGN_OR_RETURN(ConvergenceBudget budget,
//       TokenBudgetForConvergence(swa_law, full_law, /*n=*/1.2e8,
//                                 /*threshold=*/0.01));
//   if (budget.converges) std::cout << budget.tokens_per_param << "\n";
#ifndef HLAB_ANALYSIS_CONVERGENCE_H_
#define HLAB_ANALYSIS_CONVERGENCE_H_

#include "absl/status/statusor.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

struct ConvergenceBudget {
  // False when the gap as D -> infinity is not below the threshold: the laws
  // never converge at this N (d and tokens_per_param are then +inf).
  bool converges = false;
  double d = 0;                 // D*, in tokens (1 if below at every D >= 1)
  double tokens_per_param = 0;  // D* / N
  double asymptotic_gap = 0;    // the gap's limit as D -> infinity
};

// |L1(n, d) - L2(n, d)|.
double LossGap(const PowerLaw& first, const PowerLaw& second, double n,
               double d);

// InvalidArgument unless n > 0, threshold > 0 and both laws have finite
// coefficients with B >= 0 and beta >= 0.
absl::StatusOr<ConvergenceBudget> TokenBudgetForConvergence(
    const PowerLaw& first, const PowerLaw& second, double n, double threshold);

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_CONVERGENCE_H_
