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
#ifndef HLAB_MODEL_CPU_VEC_MATH_H_
#define HLAB_MODEL_CPU_VEC_MATH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "model/cpu/blas.h"

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
// The lanes [0, min(left, 16)) of a 16-float step (none for left <= 0): a
// loop's tail is one masked step.
__attribute__((target("avx512f"))) inline __mmask16 TailMask16(int64_t left) {
  return left >= 16  ? __mmask16(0xffff)
         : left <= 0 ? __mmask16(0)
                     : static_cast<__mmask16>((1u << left) - 1u);
}

// GCC 12's own intrinsics (max, roundscale) pass an undefined vector as
// their unused source and trip -Wuninitialized there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// ExpNonPositive in 16 lanes, written out: the compiler's vectorisation of
// ExpNonPositive took ~27 instructions per 16 elements (clamps as blends,
// the exponent built with integer ops); here 2^n comes from vscalefps and
// the zero below -87 from the same instruction's mask. Same polynomial
// (Cephes' expf, ~2 ulp).
// exp(v) for v <= 0 in 16 lanes (lanes at or below -87 give 0, NaN stays
// NaN), masked to `in`.
__attribute__((target("avx512f"))) inline __m512 Exp16(__m512 v, __mmask16 in) {
  const __m512 floor = _mm512_set1_ps(-87.0f);
  const __mmask16 live = _mm512_mask_cmp_ps_mask(in, v, floor, _CMP_NLE_UQ);
  v = _mm512_max_ps(floor, v);  // NaN passes through
  const __m512 n = _mm512_roundscale_ps(
      _mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r =
      _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f),
                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), v));
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r,
                             _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r),
                    _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(live, p, n);
}

// Sigmoid in 16 lanes (masked to `in`): exp of -|a| only, as Sigmoid.
__attribute__((target("avx512f"))) inline __m512 Sigmoid16(__m512 a,
                                                           __mmask16 in) {
  const __m512 minus_abs = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  const __m512 e = Exp16(minus_abs, in);
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f),
                                   _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __mmask16 negative =
      _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(inv, negative, e, inv);
}
#pragma GCC diagnostic pop

// 16 floats from x, the lanes outside `in` zero; the same from 16 bf16
// (widened exactly).
__attribute__((target("avx512f"))) inline __m512 Load16(const float* x,
                                                        __mmask16 in) {
  return _mm512_maskz_loadu_ps(in, x);
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 Load16(
    const Bf16* x, __mmask16 in) {
  const __m256i bits = _mm256_maskz_loadu_epi16(in, x);
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Rounds v to bf16 (nearest even, vcvtneps2bf16: subnormal inputs flush to
// zero) and stores the lanes in `in` at y.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline void
StoreAsBf16(Bf16* y, __mmask16 in, __m512 v) {
  const __m256bh b = _mm512_cvtneps_pbh(v);
  _mm256_mask_storeu_epi16(y, in, reinterpret_cast<const __m256i&>(b));
}

// Stores the lanes in `in` of v at y: as they are, or rounded to bf16.
__attribute__((target("avx512f"))) inline void Store16(float* y, __mmask16 in,
                                                       __m512 v) {
  _mm512_mask_storeu_ps(y, in, v);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) inline void
Store16(Bf16* y, __mmask16 in, __m512 v) {
  StoreAsBf16(y, in, v);
}
#endif

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_VEC_MATH_H_
