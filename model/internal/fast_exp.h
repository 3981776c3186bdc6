// ExpNonPositive: exp(x) for x <= 0 in float as plain arithmetic, so that the
// row loops of model/ (fused attention, the GDN input activations) vectorise
// without -ffast-math. Private to model/. Thread-safe (a pure function).
//
//   HLAB_ROW_LOOP void ExpInPlace(float* x, int64_t n) {
//     for (int64_t i = 0; i < n; ++i) x[i] = internal::ExpNonPositive(x[i]);
//   }
#ifndef HLAB_MODEL_INTERNAL_FAST_EXP_H_
#define HLAB_MODEL_INTERNAL_FAST_EXP_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// Row loops (float) are compiled for AVX-512, AVX2 and the baseline on
// x86-64 (the loader picks one); elsewhere for the baseline.
#if defined(__x86_64__) && defined(__GNUC__)
#define HLAB_ROW_LOOP \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HLAB_ROW_LOOP
#endif

namespace hlab::model::internal {

// exp(x) for x <= 0 in float, to ~2 ulp (Cephes' expf: 2^n e^r with
// |r| <= ln2 / 2 and a degree-6 polynomial); 0 below -87.
inline float ExpNonPositive(float x) {
  x = std::max(x, -87.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x <= -87.0f ? 0.0f : p * scale;
}

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_INTERNAL_FAST_EXP_H_
