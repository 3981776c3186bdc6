// BootstrapPowerLaw: percentile bootstrap confidence intervals for
// E, A, alpha, B, beta.
//
// Each resample draws n points with replacement from the n fitted points and
// refits with RefinePowerLaw -- one polished L-BFGS run -- starting from the
// full-data best fit rather than rerunning the whole start grid: the grid
// has already located the basin, and a fixed start keeps 1000 refits cheap
// (Epoch's replication likewise refits every resample from one fixed start).
// A resample whose refit fails is left out and counted in `failed`.
//
// Determinism: resample r draws its indices from its own generator, seeded
// from (seed, r) with SplitMix64 and sampled without std:: distributions
// (whose output is implementation-defined), so the intervals are bitwise the
// same for any thread count and on any standard library.
//
// Thread-safety: reentrant; starts and joins its own threads.
//
//   HLAB_ASSIGN_OR_RETURN(FitResult fit, FitPowerLaw(points, fit_options));
//   BootstrapOptions boot;  // 1000 resamples, 95 %, seed 42
//   HLAB_ASSIGN_OR_RETURN(BootstrapResult ci,
//                         BootstrapPowerLaw(points, fit, fit_options, boot));
//   std::cout << ci.alpha.lower << " .. " << ci.alpha.upper << "\n";
#ifndef HLAB_ANALYSIS_BOOTSTRAP_H_
#define HLAB_ANALYSIS_BOOTSTRAP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "analysis/fit.h"
#include "analysis/power_law.h"

namespace hlab::analysis {

struct BootstrapOptions {
  int resamples = 1000;
  uint64_t seed = 42;
  double confidence = 0.95;  // two-sided percentile interval
  int threads = 1;           // <= 0: one per hardware thread
};

// One coefficient's bootstrap distribution.
struct Interval {
  double lower = 0;  // the (1 - confidence)/2 quantile
  double upper = 0;  // the (1 + confidence)/2 quantile
  double median = 0;
  double std_error = 0;  // standard deviation over the resamples
};

struct BootstrapResult {
  Interval E, A, alpha, B, beta;
  int resamples = 0;  // successful refits the intervals rest on
  int failed = 0;
  double confidence = 0;
  std::vector<PowerLaw> samples;  // one per successful resample, in order
};

// The quantile q in [0, 1] of `sorted` (ascending), interpolating linearly
// between order statistics (R's type 7, NumPy's default).
double Quantile(const std::vector<double>& sorted, double q);

// InvalidArgument as ValidatePoints, or when resamples < 1 or confidence is
// not in (0, 1); FailedPrecondition when every refit fails.
absl::StatusOr<BootstrapResult> BootstrapPowerLaw(
    absl::Span<const ScalingPoint> points, const FitResult& full_fit,
    const FitOptions& fit_options, const BootstrapOptions& options = {});

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_BOOTSTRAP_H_
