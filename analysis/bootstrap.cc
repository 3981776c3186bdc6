#include "analysis/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "analysis/internal/parallel.h"

namespace hlab::analysis {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A uniform index in [0, n) from the SplitMix64 sequence (modulo bias below
// n / 2^64).
size_t DrawIndex(uint64_t* state, size_t n) {
  *state += 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(SplitMix64(*state) % n);
}

Interval Summarise(std::vector<double> values, double confidence) {
  std::sort(values.begin(), values.end());
  Interval out;
  out.lower = Quantile(values, 0.5 * (1 - confidence));
  out.upper = Quantile(values, 0.5 * (1 + confidence));
  out.median = Quantile(values, 0.5);
  double mean = 0;
  for (double v : values) mean += v;
  mean /= values.size();
  double ss = 0;
  for (double v : values) ss += (v - mean) * (v - mean);
  out.std_error = values.size() > 1 ? std::sqrt(ss / (values.size() - 1)) : 0.0;
  return out;
}

}  // namespace

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::nan("");
  const double h = q * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - lo) * (sorted[hi] - sorted[lo]);
}

absl::StatusOr<BootstrapResult> BootstrapPowerLaw(
    absl::Span<const ScalingPoint> points, const FitResult& full_fit,
    const FitOptions& fit_options, const BootstrapOptions& options) {
  if (auto s = ValidatePoints(points); !s.ok()) return s;
  if (options.resamples < 1) {
    return absl::InvalidArgumentError("bootstrap resamples must be >= 1");
  }
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return absl::InvalidArgumentError("bootstrap confidence must be in (0, 1)");
  }
  const size_t n = points.size();
  std::vector<std::optional<PowerLaw>> fits(options.resamples);
  internal::ParallelFor(fits.size(), options.threads, [&](size_t r) {
    uint64_t state = SplitMix64(options.seed ^ SplitMix64(r));
    std::vector<ScalingPoint> resample(n);
    for (size_t i = 0; i < n; ++i) {
      resample[i] = points[DrawIndex(&state, n)];
    }
    auto refit = RefinePowerLaw(resample, full_fit.log_law, fit_options);
    if (refit.ok()) fits[r] = refit->law;
  });

  BootstrapResult result;
  result.confidence = options.confidence;
  std::vector<double> e, a, alpha, b, beta;
  for (const std::optional<PowerLaw>& fit : fits) {
    if (!fit.has_value()) {
      ++result.failed;
      continue;
    }
    result.samples.push_back(*fit);
    e.push_back(fit->E);
    a.push_back(fit->A);
    alpha.push_back(fit->alpha);
    b.push_back(fit->B);
    beta.push_back(fit->beta);
  }
  result.resamples = static_cast<int>(result.samples.size());
  if (result.samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("all ", options.resamples, " bootstrap refits failed"));
  }
  result.E = Summarise(e, options.confidence);
  result.A = Summarise(a, options.confidence);
  result.alpha = Summarise(alpha, options.confidence);
  result.B = Summarise(b, options.confidence);
  result.beta = Summarise(beta, options.confidence);
  return result;
}

}  // namespace hlab::analysis
