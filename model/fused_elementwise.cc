#include "model/internal/fused_elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/internal/vec_math.h"

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
#define HLAB_DEFINE_FUSED_ELEMENTWISE(T, ATTR)                               \
  ATTR void RmsNormForwardRows(const T* x, const T* w, int64_t rows,         \
                               int64_t d, T eps, T* y, T* rstd) {            \
    RmsNormForwardImpl<T>(x, w, rows, d, eps, y, rstd);                      \
  }                                                                          \
  ATTR void RmsNormBackwardRows(const T* x, const T* w, const T* rstd,       \
                                const T* dy, int64_t rows, int64_t d, T* dx, \
                                T* dw) {                                     \
    RmsNormBackwardImpl<T>(x, w, rstd, dy, rows, d, dx, dw);                 \
  }                                                                          \
  ATTR void SwiGluForward(const T* a, const T* b, int64_t n, T* y) {         \
    SwiGluForwardImpl<T>(a, b, n, y);                                        \
  }                                                                          \
  ATTR void SwiGluBackward(const T* a, const T* b, const T* dy, int64_t n,   \
                           T* da, T* db) {                                   \
    SwiGluBackwardImpl<T>(a, b, dy, n, da, db);                              \
  }                                                                          \
  ATTR void RopeRow(const T* x, const T* cos, const T* sin, int64_t half,    \
                    T sign, T* y) {                                          \
    RopeRowImpl<T>(x, cos, sin, half, sign, y);                              \
  }

HLAB_DEFINE_FUSED_ELEMENTWISE(float, HLAB_VECTOR_CLONES)
HLAB_DEFINE_FUSED_ELEMENTWISE(double, )

#undef HLAB_DEFINE_FUSED_ELEMENTWISE

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
