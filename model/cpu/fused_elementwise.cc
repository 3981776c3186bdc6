#include "model/cpu/fused_elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/cpu/vec_math.h"

namespace hlab::model::internal {
namespace {

// The float and double bodies, inlined into one function per type (and per
// vector target on x86-64, see HLAB_VECTOR_CLONES).

template <typename T>
inline __attribute__((always_inline)) void RmsNormForwardImpl(
    const T* x, const T* w, int64_t rows, int64_t d, T eps, T* y, T* rstd) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * d;
    T* yr = y + i * d;
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < d; ++j) {
      const T v = xr[j];
      sum += v * v;
    }
    const T r = T(1) / std::sqrt(sum / static_cast<T>(d) + eps);
    rstd[i] = r;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      yr[j] = xr[j] * r * w[j];
    }
  }
}

template <typename T>
inline __attribute__((always_inline)) void RmsNormBackwardImpl(
    const T* x, const T* w, const T* rstd, const T* dy, int64_t rows, int64_t d,
    T* dx, T* dw) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * d;
    const T* gr = dy + i * d;
    T* dxr = dx + i * d;
    const T r = rstd[i];
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j) {
      dot += gr[j] * w[j] * xr[j];
    }
    const T c = r * r * r * dot / static_cast<T>(d);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      const T xv = xr[j];
      const T gv = gr[j];
      dxr[j] = r * gv * w[j] - xv * c;
      dw[j] += gv * xv * r;
    }
  }
}

// The gate of a gated RMSNorm row and its derivative, from z and
// sig = sigmoid(z): silu(z) = z sig, or sig itself.
template <bool kSilu, typename T>
inline T GateValue(T z, T sig) {
  if constexpr (kSilu) return z * sig;
  return sig;
}
template <bool kSilu, typename T>
inline T GateSlope(T z, T sig) {
  if constexpr (kSilu) return sig * (T(1) + z * (T(1) - sig));
  return sig * (T(1) - sig);
}

// The activation is a template parameter: with it a run-time flag, GCC
// left the backward's loops scalar.
template <bool kSilu, typename T>
inline __attribute__((always_inline)) T GatedRmsNormForwardRowImpl(
    const T* x, const T* z, const T* w, int64_t d, T eps, bool norm_first,
    T* y) {
  T sum = 0;
  if (norm_first) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < d; ++j) sum += x[j] * x[j];
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < d; ++j) {
      const T u = x[j] * GateValue<kSilu>(z[j], Sigmoid(z[j]));
      y[j] = u;
      sum += u * u;
    }
  }
  const T r = T(1) / std::sqrt(sum / static_cast<T>(d) + eps);
  if (norm_first) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      y[j] = x[j] * r * w[j] * GateValue<kSilu>(z[j], Sigmoid(z[j]));
    }
  } else {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) y[j] *= r * w[j];
  }
  return r;
}

template <bool kSilu, typename T>
inline __attribute__((always_inline)) void GatedRmsNormBackwardRowImpl(
    const T* x, const T* z, const T* w, T r, const T* dy, int64_t d,
    bool norm_first, T* dx, T* dz, T* dw) {
  T dot = 0;
  if (norm_first) {
    // y = n a with n = x r w and a the gate: dn = dy a (kept in dx),
    // da = dy n.
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j) {
      const T sig = Sigmoid(z[j]);
      const T dn = dy[j] * GateValue<kSilu>(z[j], sig);
      dz[j] = dy[j] * x[j] * r * w[j] * GateSlope<kSilu>(z[j], sig);
      dx[j] = dn;
      dot += dn * w[j] * x[j];
    }
    const T c = r * r * r * dot / static_cast<T>(d);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      const T dn = dx[j];
      dw[j] += dn * x[j] * r;
      dx[j] = r * dn * w[j] - x[j] * c;
    }
  } else {
    // y = u r w with u = x a: du from RMSNorm's backward, then dx = du a,
    // da = du x. sigmoid(z) is kept in dz between the passes.
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j) {
      const T sig = Sigmoid(z[j]);
      dz[j] = sig;
      dot += dy[j] * w[j] * x[j] * GateValue<kSilu>(z[j], sig);
    }
    const T c = r * r * r * dot / static_cast<T>(d);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      const T sig = dz[j];
      const T a = GateValue<kSilu>(z[j], sig);
      const T u = x[j] * a;
      const T du = r * dy[j] * w[j] - u * c;
      dw[j] += dy[j] * u * r;
      dx[j] = du * a;
      dz[j] = du * x[j] * GateSlope<kSilu>(z[j], sig);
    }
  }
}

template <typename T>
inline __attribute__((always_inline)) void SwiGluForwardImpl(const T* a,
                                                             const T* b,
                                                             int64_t n, T* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T av = a[i];
    y[i] = av * Sigmoid(av) * b[i];
  }
}

template <typename T>
inline __attribute__((always_inline)) void SwiGluBackwardImpl(
    const T* a, const T* b, const T* dy, int64_t n, T* da, T* db) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T av = a[i];
    const T s = Sigmoid(av);
    const T g = dy[i];
    da[i] = g * b[i] * s * (T(1) + av * (T(1) - s));
    db[i] = g * av * s;
  }
}

template <typename T>
inline __attribute__((always_inline)) void RopeRowImpl(const T* x, const T* cos,
                                                       const T* sin,
                                                       int64_t half, T sign,
                                                       T* y) {
#pragma omp simd
  for (int64_t j = 0; j < half; ++j) {
    const T x1 = x[j];
    const T x2 = x[j + half];
    const T s = sign * sin[j];
    y[j] = x1 * cos[j] - x2 * s;
    y[j + half] = x2 * cos[j] + x1 * s;
  }
}

// Element-wise bf16 work goes through float buffers of this many elements.
constexpr int64_t kBf16Chunk = 1024;

}  // namespace

// The bf16 conversions stay out of the arithmetic loops: with them inside,
// GCC did not vectorise the loops.
HLAB_VECTOR_CLONES void AddVectors(const float* x, const float* y, int64_t n,
                                   float* out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

void AddVectors(const double* x, const double* y, int64_t n, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

HLAB_VECTOR_CLONES void WidenBf16(const Bf16* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = static_cast<uint32_t>(x[i].bits) << 16;
    std::memcpy(&y[i], &u, sizeof(u));
  }
}

HLAB_VECTOR_CLONES void NarrowToBf16Portable(const float* x, Bf16* y,
                                             int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], sizeof(u));
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    y[i].bits = static_cast<uint16_t>(x[i] != x[i] ? 0x7fc0u : rounded);
  }
}

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// AVX512-BF16's vcvtneps2bf16: 16 floats per instruction, against ~8 integer
// operations per 8 floats in the portable loop (which perf showed at ~3% of
// a bf16 training step). Same rounding (nearest even); it flushes subnormal
// inputs (|x| < 1.2e-38) to zero and keeps a NaN's payload.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void
NarrowToBf16Native(const float* x, Bf16* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 in = TailMask16(n - i);
    StoreAsBf16(y + i, in, _mm512_maskz_loadu_ps(in, x + i));
  }
}
#endif

}  // namespace

void NarrowToBf16(const float* x, Bf16* y, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512Bf16()) {
    NarrowToBf16Native(x, y, n);
    return;
  }
#endif
  NarrowToBf16Portable(x, y, n);
}

// float gets vector clones; double stays scalar (tests and references only).
#define HLAB_DEFINE_FUSED_ELEMENTWISE(T, ATTR)                                 \
  ATTR void RmsNormForwardRows(const T* x, const T* w, int64_t rows,           \
                               int64_t d, T eps, T* y, T* rstd) {              \
    RmsNormForwardImpl<T>(x, w, rows, d, eps, y, rstd);                        \
  }                                                                            \
  ATTR void RmsNormBackwardRows(const T* x, const T* w, const T* rstd,         \
                                const T* dy, int64_t rows, int64_t d, T* dx,   \
                                T* dw) {                                       \
    RmsNormBackwardImpl<T>(x, w, rstd, dy, rows, d, dx, dw);                   \
  }                                                                            \
  ATTR T GatedRmsNormForwardRow(const T* x, const T* z, const T* w, int64_t d, \
                                T eps, bool norm_first, bool silu, T* y) {     \
    return silu ? GatedRmsNormForwardRowImpl<true, T>(x, z, w, d, eps,         \
                                                      norm_first, y)           \
                : GatedRmsNormForwardRowImpl<false, T>(x, z, w, d, eps,        \
                                                       norm_first, y);         \
  }                                                                            \
  ATTR void GatedRmsNormBackwardRow(const T* x, const T* z, const T* w, T r,   \
                                    const T* dy, int64_t d, bool norm_first,   \
                                    bool silu, T* dx, T* dz, T* dw) {          \
    if (silu) {                                                                \
      GatedRmsNormBackwardRowImpl<true, T>(x, z, w, r, dy, d, norm_first, dx,  \
                                           dz, dw);                            \
    } else {                                                                   \
      GatedRmsNormBackwardRowImpl<false, T>(x, z, w, r, dy, d, norm_first, dx, \
                                            dz, dw);                           \
    }                                                                          \
  }                                                                            \
  ATTR void RopeRow(const T* x, const T* cos, const T* sin, int64_t half,      \
                    T sign, T* y) {                                            \
    RopeRowImpl<T>(x, cos, sin, half, sign, y);                                \
  }

HLAB_DEFINE_FUSED_ELEMENTWISE(float, HLAB_VECTOR_CLONES)
HLAB_DEFINE_FUSED_ELEMENTWISE(double, )

#undef HLAB_DEFINE_FUSED_ELEMENTWISE

HLAB_VECTOR_CLONES void SwiGluForwardPortable(const float* a, const float* b,
                                              int64_t n, float* y) {
  SwiGluForwardImpl<float>(a, b, n, y);
}
HLAB_VECTOR_CLONES void SwiGluBackwardPortable(const float* a, const float* b,
                                               const float* dy, int64_t n,
                                               float* da, float* db) {
  SwiGluBackwardImpl<float>(a, b, dy, n, da, db);
}

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
// SwiGLU's loops in 16 lanes (Sigmoid16, model/cpu/vec_math.h), one
// definition for float and bf16: a bf16 element is widened as it is loaded
// and rounded as it is stored, so a bf16 pass moves half the bytes of a
// float one. Through float buffers, as RmsNorm does, bf16 took longer than
// float (8192 x 704, two threads: 7.4 vs 4.4 ms forward and backward).
#define HLAB_DEFINE_SWIGLU_AVX512(T, TARGET)                                \
  __attribute__((target(TARGET))) void SwiGluForwardAvx512(                 \
      const T* a, const T* b, int64_t n, T* y) {                            \
    for (int64_t i = 0; i < n; i += 16) {                                   \
      const __mmask16 in = TailMask16(n - i);                               \
      const __m512 av = Load16(a + i, in);                                  \
      const __m512 silu = _mm512_mul_ps(av, Sigmoid16(av, in));             \
      Store16(y + i, in, _mm512_mul_ps(silu, Load16(b + i, in)));           \
    }                                                                       \
  }                                                                         \
  __attribute__((target(TARGET))) void SwiGluBackwardAvx512(                \
      const T* a, const T* b, const T* dy, int64_t n, T* da, T* db) {       \
    const __m512 one = _mm512_set1_ps(1.0f);                                \
    for (int64_t i = 0; i < n; i += 16) {                                   \
      const __mmask16 in = TailMask16(n - i);                               \
      const __m512 av = Load16(a + i, in);                                  \
      const __m512 s = Sigmoid16(av, in);                                   \
      const __m512 gs = _mm512_mul_ps(Load16(dy + i, in), s);               \
      const __m512 slope = _mm512_fmadd_ps(av, _mm512_sub_ps(one, s), one); \
      Store16(da + i, in,                                                   \
              _mm512_mul_ps(_mm512_mul_ps(gs, Load16(b + i, in)), slope));  \
      Store16(db + i, in, _mm512_mul_ps(gs, av));                           \
    }                                                                       \
  }

// GCC 12's max, roundscale and widening intrinsics (in Exp16, Load16) trip
// -Wuninitialized where they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
HLAB_DEFINE_SWIGLU_AVX512(float, "avx512f")
HLAB_DEFINE_SWIGLU_AVX512(Bf16, "avx512f,avx512bw,avx512vl,avx512bf16")

// The rotary embedding's row for bf16, widened and rounded in the loop (the
// float buffers cost a pass each way).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void
RopeRowAvx512(const Bf16* x, const float* cos, const float* sin, int64_t half,
              float sign, Bf16* y) {
  const __m512 vsign = _mm512_set1_ps(sign);
  for (int64_t j = 0; j < half; j += 16) {
    const __mmask16 in = TailMask16(half - j);
    const __m512 x1 = Load16(x + j, in);
    const __m512 x2 = Load16(x + j + half, in);
    const __m512 c = Load16(cos + j, in);
    const __m512 s = _mm512_mul_ps(vsign, Load16(sin + j, in));
    Store16(y + j, in, _mm512_fmsub_ps(x1, c, _mm512_mul_ps(x2, s)));
    Store16(y + j + half, in, _mm512_fmadd_ps(x2, c, _mm512_mul_ps(x1, s)));
  }
}
#pragma GCC diagnostic pop

#undef HLAB_DEFINE_SWIGLU_AVX512
#endif

}  // namespace

void SwiGluForward(const float* a, const float* b, int64_t n, float* y) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512()) {
    SwiGluForwardAvx512(a, b, n, y);
    return;
  }
#endif
  SwiGluForwardPortable(a, b, n, y);
}

void SwiGluBackward(const float* a, const float* b, const float* dy, int64_t n,
                    float* da, float* db) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512()) {
    SwiGluBackwardAvx512(a, b, dy, n, da, db);
    return;
  }
#endif
  SwiGluBackwardPortable(a, b, dy, n, da, db);
}

void SwiGluForward(const double* a, const double* b, int64_t n, double* y) {
  SwiGluForwardImpl<double>(a, b, n, y);
}

void SwiGluBackward(const double* a, const double* b, const double* dy,
                    int64_t n, double* da, double* db) {
  SwiGluBackwardImpl<double>(a, b, dy, n, da, db);
}

// bf16: widen to float, run the float loop, round once.

void RmsNormForwardRows(const Bf16* x, const float* w, int64_t rows, int64_t d,
                        float eps, Bf16* y, float* rstd) {
  std::vector<float> xf(d), yf(d);
  for (int64_t i = 0; i < rows; ++i) {
    WidenBf16(x + i * d, xf.data(), d);
    RmsNormForwardRows(xf.data(), w, 1, d, eps, yf.data(), rstd + i);
    NarrowToBf16(yf.data(), y + i * d, d);
  }
}

void RmsNormBackwardRows(const Bf16* x, const float* w, const float* rstd,
                         const Bf16* dy, int64_t rows, int64_t d, Bf16* dx,
                         float* dw) {
  std::vector<float> xf(d), gf(d), dxf(d);
  for (int64_t i = 0; i < rows; ++i) {
    WidenBf16(x + i * d, xf.data(), d);
    WidenBf16(dy + i * d, gf.data(), d);
    RmsNormBackwardRows(xf.data(), w, rstd + i, gf.data(), 1, d, dxf.data(),
                        dw);
    NarrowToBf16(dxf.data(), dx + i * d, d);
  }
}

void SwiGluForward(const Bf16* a, const Bf16* b, int64_t n, Bf16* y) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512Bf16()) {
    SwiGluForwardAvx512(a, b, n, y);
    return;
  }
#endif
  float af[kBf16Chunk], bf[kBf16Chunk], yf[kBf16Chunk];
  for (int64_t i = 0; i < n; i += kBf16Chunk) {
    const int64_t m = std::min(kBf16Chunk, n - i);
    WidenBf16(a + i, af, m);
    WidenBf16(b + i, bf, m);
    SwiGluForward(af, bf, m, yf);
    NarrowToBf16(yf, y + i, m);
  }
}

void SwiGluBackward(const Bf16* a, const Bf16* b, const Bf16* dy, int64_t n,
                    Bf16* da, Bf16* db) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512Bf16()) {
    SwiGluBackwardAvx512(a, b, dy, n, da, db);
    return;
  }
#endif
  float af[kBf16Chunk], bf[kBf16Chunk], gf[kBf16Chunk], daf[kBf16Chunk],
      dbf[kBf16Chunk];
  for (int64_t i = 0; i < n; i += kBf16Chunk) {
    const int64_t m = std::min(kBf16Chunk, n - i);
    WidenBf16(a + i, af, m);
    WidenBf16(b + i, bf, m);
    WidenBf16(dy + i, gf, m);
    SwiGluBackward(af, bf, gf, m, daf, dbf);
    NarrowToBf16(daf, da + i, m);
    NarrowToBf16(dbf, db + i, m);
  }
}

void RopeRow(const Bf16* x, const float* cos, const float* sin, int64_t half,
             float sign, Bf16* y) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512Bf16()) {
    RopeRowAvx512(x, cos, sin, half, sign, y);
    return;
  }
#endif
  constexpr int64_t kStack = 512;
  float xs[kStack], ys[kStack];
  std::vector<float> xv, yv;
  float *xf = xs, *yf = ys;
  if (2 * half > kStack) {
    xv.resize(2 * half);
    yv.resize(2 * half);
    xf = xv.data();
    yf = yv.data();
  }
  WidenBf16(x, xf, 2 * half);
  RopeRow(xf, cos, sin, half, sign, yf);
  NarrowToBf16(yf, y, 2 * half);
}

}  // namespace hlab::model::internal
