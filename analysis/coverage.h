// MeasureIntervalCoverage: how often the 95% intervals cover the truth, on
// synthetic data drawn from a known law on a given grid.
//
// Each dataset puts one point at every (N, D) of the grid with loss =
// truth(N, D) * exp(sigma z), z standard normal, from a SplitMix64 /
// Box-Muller stream seeded by (seed, dataset index): the same numbers on
// every platform and for any thread count. Each dataset is fitted with
// ProfileLikelihoodIntervals (analysis/profile.h) and, when asked, with the
// percentile bootstrap of analysis/bootstrap.h around FitPowerLaw, for
// comparison; each interval is checked against the truth (a coefficient, or
// the true loss at a prediction site).
//
// Thread-safety: reentrant; datasets run on options.threads threads, each
// fit single-threaded, so the counts do not depend on the thread count.
//
//   GridShape shape = {"3x4", {1.28e4, 2.28e4, 5.12e4},
//                      {2.6e5, 5.2e5, 1.0e6, 2.1e6}, {{1.14e5, 2.1e6}}};
//   CoverageOptions options;  // the law, 1% noise, 100 datasets
//   HLAB_ASSIGN_OR_RETURN(CoverageResult c,
//                         MeasureIntervalCoverage(shape, options));
//   std::cout << c.profile.alpha.covered << " of " << c.profile.alpha.total;
#ifndef HLAB_ANALYSIS_COVERAGE_H_
#define HLAB_ANALYSIS_COVERAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/fit.h"
#include "analysis/power_law.h"
#include "analysis/profile.h"

namespace hlab::analysis {

// The fit grid (every N with every D) and the held-out sites to predict.
struct GridShape {
  std::string name;
  std::vector<double> n;
  std::vector<double> d;
  std::vector<PredictionSite> predict_at;
};

struct CoverageOptions {
  // Issue #24's law.
  PowerLaw truth = {1.0, 30.0, 0.35, 60.0, 0.3};
  double noise_sigma = 0.01;  // relative (log-normal) noise
  int datasets = 100;
  uint64_t seed = 1;
  ProfileOptions profile;  // predict_at is taken from the shape
  // Also measure the percentile bootstrap (FitPowerLaw with `fit`, then
  // BootstrapPowerLaw with this many resamples); 0: not measured.
  int bootstrap_resamples = 0;
  FitOptions fit;
  int threads = 1;  // datasets in parallel; <= 0: one per hardware thread
};

// One quantity's intervals over the datasets.
struct CoverageCount {
  int covered = 0;
  int total = 0;
  int unbounded = 0;  // intervals open on at least one side
  double Rate() const { return total > 0 ? double(covered) / total : 0; }
};

struct MethodCoverage {
  CoverageCount E, A, alpha, B, beta;
  std::vector<CoverageCount> predictions;  // as the shape's predict_at
  int failed = 0;  // datasets whose intervals could not be computed
};

struct CoverageResult {
  MethodCoverage profile;
  std::optional<MethodCoverage> bootstrap;
  double seconds_profile = 0;  // summed over datasets (CPU of the fits)
  double seconds_bootstrap = 0;
};

// The points of dataset `index` (see the top comment).
std::vector<ScalingPoint> SyntheticDataset(const GridShape& shape,
                                           const PowerLaw& truth,
                                           double noise_sigma, uint64_t seed,
                                           int index);

// InvalidArgument for an empty grid, fewer than 6 grid points, datasets <
// 1, or a negative noise.
absl::StatusOr<CoverageResult> MeasureIntervalCoverage(
    const GridShape& shape, const CoverageOptions& options = {});

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_COVERAGE_H_
