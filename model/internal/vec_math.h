// Element helpers for the raw-memory loops of model/ (fused attention,
// fused element-wise ops): a vectorisable exp and sigmoid, and the
// attribute that compiles a loop for AVX-512, AVX2 and the baseline. No
// LibTorch here. Private to model/.
//
// Thread-safety: pure functions.
//
//   HLAB_VECTOR_CLONES void ExpShifted(float* x, int64_t n, float s) {
//   #pragma omp simd
//     for (int64_t i = 0; i < n; ++i) x[i] = ExpNonPositive(x[i] - s);
//   }
#ifndef HLAB_MODEL_INTERNAL_VEC_MATH_H_
#define HLAB_MODEL_INTERNAL_VEC_MATH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "model/internal/blas.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

// On x86-64 a function with this attribute is compiled for AVX-512, AVX2 and
// the baseline, and the loader picks one; elsewhere it is compiled once.
// OpenMP simd pragmas (reductions included) let the compiler vectorise the
// loops without -ffast-math.
#if defined(__x86_64__) && defined(__GNUC__)
#define HLAB_VECTOR_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HLAB_VECTOR_CLONES
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
inline double ExpNonPositive(double x) { return std::exp(x); }

// The logistic function 1 / (1 + exp(-x)), through exp of -|x| only (no
// overflow for any x).
inline float Sigmoid(float x) {
  const float e = ExpNonPositive(-std::fabs(x));
  const float inv = 1.0f / (1.0f + e);
  return x >= 0 ? inv : e * inv;
}
inline double Sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  const double inv = 1.0 / (1.0 + e);
  return x >= 0 ? inv : e * inv;
}

// Whether this CPU has AVX-512F, and AVX512-BF16 with AVX-512BW/VL (false
// off x86-64). Code compiled for them (target "avx512f", or
// "avx512f,avx512bw,avx512vl,avx512bf16") runs only when they say so.
inline bool CpuHasAvx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx512f") != 0;
  return has;
#else
  return false;
#endif
}
inline bool CpuHasAvx512Bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx512bf16") != 0 &&
                          __builtin_cpu_supports("avx512bw") != 0 &&
                          __builtin_cpu_supports("avx512vl") != 0;
  return has;
#else
  return false;
#endif
}

#if defined(__x86_64__) && defined(__GNUC__)
// The lanes [0, min(left, 16)) of a 16-float step: a loop's tail is one
// masked step.
__attribute__((target("avx512f"))) inline __mmask16 TailMask16(int64_t left) {
  return left >= 16 ? __mmask16(0xffff)
                    : static_cast<__mmask16>((1u << left) - 1u);
}

// Rounds v to bf16 (nearest even, vcvtneps2bf16: subnormal inputs flush to
// zero) and stores the lanes in `in` at y.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline void
StoreAsBf16(Bf16* y, __mmask16 in, __m512 v) {
  const __m256bh b = _mm512_cvtneps_pbh(v);
  _mm256_mask_storeu_epi16(y, in, reinterpret_cast<const __m256i&>(b));
}
#endif

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_INTERNAL_VEC_MATH_H_
