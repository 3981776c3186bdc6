#include "analysis/coverage.h"
#include <time.h>

#include <algorithm>
#include <cmath>

#include "analysis/bootstrap.h"
#include "analysis/internal/parallel.h"

namespace hlab::analysis {
namespace {

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Uniform(uint64_t* state) {  // in (0, 1)
  return ((SplitMix64(state) >> 11) + 0.5) * 0x1.0p-53;
}

double Normal(uint64_t* state) {
  const double u1 = Uniform(state), u2 = Uniform(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

// One dataset's verdicts: covered / unbounded per quantity (E, A, alpha, B,
// beta, then the predictions).
struct Verdicts {
  bool ok = false;
  std::vector<char> covered, unbounded;
  double seconds = 0;
};

void Tally(const std::vector<Verdicts>& all, size_t n_predictions,
           MethodCoverage* out) {
  CoverageCount* coefs[] = {&out->E, &out->A, &out->alpha, &out->B, &out->beta};
  out->predictions.assign(n_predictions, CoverageCount{});
  for (const Verdicts& v : all) {
    if (!v.ok) {
      ++out->failed;
      continue;
    }
    for (size_t q = 0; q < v.covered.size(); ++q) {
      CoverageCount& c = q < 5 ? *coefs[q] : out->predictions[q - 5];
      c.covered += v.covered[q];
      c.unbounded += v.unbounded[q];
      ++c.total;
    }
  }
}

std::vector<double> Truths(const GridShape& shape, const PowerLaw& truth) {
  std::vector<double> out = {truth.E, truth.A, truth.alpha, truth.B,
                             truth.beta};
  for (const PredictionSite& site : shape.predict_at) {
    out.push_back(truth.Predict(site.n, site.d));
  }
  return out;
}

Verdicts ProfileVerdicts(const std::vector<ScalingPoint>& points,
                         const GridShape& shape, const CoverageOptions& options,
                         const std::vector<double>& truths) {
  Verdicts v;
  const double start = ThreadCpuSeconds();
  ProfileOptions profile = options.profile;
  profile.predict_at = shape.predict_at;
  profile.threads = 1;
  auto ci = ProfileLikelihoodIntervals(points, profile);
  v.seconds = ThreadCpuSeconds() - start;
  if (!ci.ok()) return v;
  std::vector<const ProfileInterval*> intervals = {&ci->E, &ci->A, &ci->alpha,
                                                   &ci->B, &ci->beta};
  for (const PredictionInterval& p : ci->predictions) {
    intervals.push_back(&p.interval);
  }
  for (size_t q = 0; q < intervals.size(); ++q) {
    v.covered.push_back(intervals[q]->Contains(truths[q]));
    v.unbounded.push_back(!intervals[q]->bounded_below ||
                          !intervals[q]->bounded_above);
  }
  v.ok = true;
  return v;
}

Verdicts BootstrapVerdicts(const std::vector<ScalingPoint>& points,
                           const GridShape& shape,
                           const CoverageOptions& options,
                           const std::vector<double>& truths, int index) {
  Verdicts v;
  const double start = ThreadCpuSeconds();
  FitOptions fit_options = options.fit;
  fit_options.threads = 1;
  auto fit = FitPowerLaw(points, fit_options);
  if (!fit.ok()) return v;
  BootstrapOptions boot;
  boot.resamples = options.bootstrap_resamples;
  boot.confidence = options.profile.confidence;
  boot.seed = options.seed + static_cast<uint64_t>(index);
  boot.threads = 1;
  auto ci = BootstrapPowerLaw(points, *fit, fit_options, boot);
  v.seconds = ThreadCpuSeconds() - start;
  if (!ci.ok()) return v;
  std::vector<Interval> intervals = {ci->E, ci->A, ci->alpha, ci->B, ci->beta};
  for (const PredictionSite& site : shape.predict_at) {
    std::vector<double> predicted;
    for (const PowerLaw& law : ci->samples) {
      predicted.push_back(law.Predict(site.n, site.d));
    }
    std::sort(predicted.begin(), predicted.end());
    const double tail = 0.5 * (1 - boot.confidence);
    intervals.push_back(
        {Quantile(predicted, tail), Quantile(predicted, 1 - tail), 0, 0});
  }
  for (size_t q = 0; q < intervals.size(); ++q) {
    v.covered.push_back(intervals[q].lower <= truths[q] &&
                        truths[q] <= intervals[q].upper);
    v.unbounded.push_back(0);
  }
  v.ok = true;
  return v;
}

}  // namespace

std::vector<ScalingPoint> SyntheticDataset(const GridShape& shape,
                                           const PowerLaw& truth,
                                           double noise_sigma, uint64_t seed,
                                           int index) {
  uint64_t state = seed;
  state = SplitMix64(&state) ^ static_cast<uint64_t>(index);
  state = SplitMix64(&state);
  std::vector<ScalingPoint> points;
  for (double n : shape.n) {
    for (double d : shape.d) {
      const double z = Normal(&state);
      points.push_back({n, d, truth.Predict(n, d) * std::exp(noise_sigma * z)});
    }
  }
  return points;
}

absl::StatusOr<CoverageResult> MeasureIntervalCoverage(
    const GridShape& shape, const CoverageOptions& options) {
  if (shape.n.size() * shape.d.size() < 6) {
    return absl::InvalidArgumentError(
        "the coverage grid needs at least 6 points");
  }
  if (options.datasets < 1 || !(options.noise_sigma >= 0)) {
    return absl::InvalidArgumentError(
        "coverage needs datasets >= 1 and noise_sigma >= 0");
  }
  const std::vector<double> truths = Truths(shape, options.truth);
  std::vector<Verdicts> profile(options.datasets), bootstrap(options.datasets);
  internal::ParallelFor(options.datasets, options.threads, [&](size_t i) {
    const int index = static_cast<int>(i);
    const std::vector<ScalingPoint> points = SyntheticDataset(
        shape, options.truth, options.noise_sigma, options.seed, index);
    profile[i] = ProfileVerdicts(points, shape, options, truths);
    if (options.bootstrap_resamples > 0) {
      bootstrap[i] = BootstrapVerdicts(points, shape, options, truths, index);
    }
  });
  CoverageResult result;
  Tally(profile, shape.predict_at.size(), &result.profile);
  for (const Verdicts& v : profile) result.seconds_profile += v.seconds;
  if (options.bootstrap_resamples > 0) {
    result.bootstrap.emplace();
    Tally(bootstrap, shape.predict_at.size(), &*result.bootstrap);
    for (const Verdicts& v : bootstrap) result.seconds_bootstrap += v.seconds;
  }
  return result;
}

}  // namespace hlab::analysis
