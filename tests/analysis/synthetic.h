// Test helpers: points generated from a known law, with reproducible noise.
//
// Not thread-safe to share a SyntheticRng; each test owns its own.
//
//   std::vector<ScalingPoint> points =
//       SyntheticGrid(kTrueLaw, /*noise_sigma=*/0.005, /*seed=*/7);
#ifndef HLAB_TESTS_ANALYSIS_SYNTHETIC_H_
#define HLAB_TESTS_ANALYSIS_SYNTHETIC_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "analysis/power_law.h"

namespace hlab::analysis::testing {

// Chinchilla's published law, rounded: the "true" law of the synthetic tests.
inline const PowerLaw kTrueLaw = {1.7, 400.0, 0.34, 410.0, 0.28};

// The study's shape: 5 model sizes x 6 token budgets.
inline const double kGridN[] = {1e7, 3e7, 1e8, 3e8, 1e9};
inline const double kGridD[] = {2e8, 5e8, 1e9, 2e9, 5e9, 1e10};

// SplitMix64 with Box-Muller normals: the same numbers on every platform
// (std:: distributions are implementation-defined).
class SyntheticRng {
 public:
  explicit SyntheticRng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return ((Next() >> 11) + 0.5) * 0x1.0p-53; }  // (0,1)
  double Normal() {
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

// One point per (N, D) of the grid, loss = law(N, D) * exp(sigma * z).
inline std::vector<ScalingPoint> SyntheticGrid(const PowerLaw& law,
                                               double noise_sigma,
                                               uint64_t seed) {
  SyntheticRng rng(seed);
  std::vector<ScalingPoint> points;
  for (double n : kGridN) {
    for (double d : kGridD) {
      const double noise =
          noise_sigma > 0 ? std::exp(noise_sigma * rng.Normal()) : 1.0;
      points.push_back({n, d, law.Predict(n, d) * noise});
    }
  }
  return points;
}

}  // namespace hlab::analysis::testing

#endif  // HLAB_TESTS_ANALYSIS_SYNTHETIC_H_
