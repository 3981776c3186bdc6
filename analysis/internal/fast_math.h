// Vectorised exp and log for the fitting objective's inner loop.
//
// Private to analysis/. glibc's scalar exp/log calls keep the compiler from
// vectorising the objective, and GCC turns clamps and selects on doubles
// into branches, so these are written with GCC/Clang vector extensions: no
// calls, tables or branches. Vec2 (two doubles) is one SSE2 or NEON
// register; Vec4 is meant for code compiled for AVX2 only. Vectors are
// passed by reference and results written through pointers: passing 32-byte
// vectors by value from code without AVX changes the ABI (GCC's -Wpsabi).
// Accuracy: within 1 ulp of std::exp / std::log over the documented ranges
// (tests/analysis/fast_math_test.cc). Deterministic: plain IEEE arithmetic
// and integer bit operations (FMA contraction, where the target has FMA,
// changes the last bits).
//
//   Vec2 x = {0.5, -3.0}, y, z;
//   VecExp(x, &y);  // lanes clamped to [-708, 709]: never inf or subnormal
//   VecLog(y, &z);  // lanes must be positive normal numbers
#ifndef HLAB_ANALYSIS_INTERNAL_FAST_MATH_H_
#define HLAB_ANALYSIS_INTERNAL_FAST_MATH_H_

#include <cstdint>

namespace hlab::analysis::internal {

typedef double Vec2 __attribute__((vector_size(16)));
typedef uint64_t UVec2 __attribute__((vector_size(16)));
typedef double Vec4 __attribute__((vector_size(32)));
typedef uint64_t UVec4 __attribute__((vector_size(32)));

template <typename V>
struct VecTraits;
template <>
struct VecTraits<Vec2> {
  using Bits = UVec2;
  static constexpr int kLanes = 2;
};
template <>
struct VecTraits<Vec4> {
  using Bits = UVec4;
  static constexpr int kLanes = 4;
};

// ln 2 split so that k * kLn2Hi is exact for |k| < 2^11 (fdlibm's split).
inline constexpr double kLn2Hi = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;

// exp(x) = 2^k exp(r), k = round(x / ln 2), |r| <= ln(2)/2, and
// exp(r) = 1 + r + r^2 T(r), T(r) = sum_{j=0}^{11} r^j / (j+2)!, evaluated
// with Estrin's scheme (a short dependency chain; truncation < 1e-17).
template <typename V>
inline void VecExp(const V& in, V* out) {
  using Bits = typename VecTraits<V>::Bits;
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52
  const V lo = V{} - 708.0, hi = V{} + 709.0;
  V x = in < lo ? lo : in;
  x = x > hi ? hi : x;
  // Adding the shifter rounds x/ln2 to an integer k held in the low mantissa
  // bits; (bits << 52) is then k << 52 modulo 2^64, the exponent increment.
  const V shifted = x * kLog2e + kShifter;
  const Bits k_bits = (Bits)shifted << 52;
  const V k = shifted - kShifter;
  const V r = (x - k * kLn2Hi) - k * kLn2Lo;
  const V r2 = r * r;
  const V r4 = r2 * r2;
  const V r8 = r4 * r4;
  const V a0 = 1.0 / 2 + r * (1.0 / 6);
  const V a1 = 1.0 / 24 + r * (1.0 / 120);
  const V a2 = 1.0 / 720 + r * (1.0 / 5040);
  const V a3 = 1.0 / 40320 + r * (1.0 / 362880);
  const V a4 = 1.0 / 3628800 + r * (1.0 / 39916800);
  const V a5 = 1.0 / 479001600 + r * (1.0 / 6227020800);
  const V b0 = a0 + a1 * r2;
  const V b1 = a2 + a3 * r2;
  const V b2 = a4 + a5 * r2;
  const V t = (b0 + b1 * r4) + b2 * r8;
  const V p = 1.0 + (r + r2 * t);
  *out = (V)((Bits)p + k_bits);
}

// log(x) = k ln 2 + log(z), z = x / 2^k in [0.705, 1.41), and
// log(z) = 2 atanh(s), s = (z - 1) / (z + 1), |s| <= 0.172, by its series to
// s^21 (Estrin's scheme in w = s^2). Lanes must be positive normal numbers.
template <typename V>
inline void VecLog(const V& x, V* out) {
  using Bits = typename VecTraits<V>::Bits;
  constexpr uint64_t kOff = 0x3fe6955500000000ULL;  // ~0.705
  constexpr uint64_t kBias = 1ULL << 62;
  const Bits ix = (Bits)x;
  // q = k + 1024 with k = floor((ix - kOff) / 2^52), kept non-negative.
  const Bits q = (ix - kOff + kBias) >> 52;
  const V z = (V)(ix - ((q << 52) - kBias));
  // The double 2^52 + q, minus 2^52 + 1024, is k exactly.
  const V k = (V)(q | 0x4330000000000000ULL) - (4503599627370496.0 + 1024.0);
  const V f = z - 1.0;
  const V s = f / (2.0 + f);
  const V w = s * s;
  const V w2 = w * w;
  const V w4 = w2 * w2;
  const V w8 = w4 * w4;
  const V a0 = 1.0 / 3 + w * (1.0 / 5);
  const V a1 = 1.0 / 7 + w * (1.0 / 9);
  const V a2 = 1.0 / 11 + w * (1.0 / 13);
  const V a3 = 1.0 / 15 + w * (1.0 / 17);
  const V a4 = 1.0 / 19 + w * (1.0 / 21);
  const V p = ((a0 + a1 * w2) + (a2 + a3 * w2) * w4) + a4 * w8;
  // 2 atanh(s) = 2s + 2s w p, and 2s = f - s f since s (2 + f) = f.
  const V log_z = f - s * f + 2.0 * s * w * p;
  *out = k * kLn2Hi + (log_z + k * kLn2Lo);
}

}  // namespace hlab::analysis::internal

#endif  // HLAB_ANALYSIS_INTERNAL_FAST_MATH_H_
