#include "model/internal/fused_elementwise.h"

#include <cmath>
#include <cstdint>

#include "model/internal/vec_math.h"

namespace hlab::model::internal {
namespace {

// The bodies, inlined into one function per element type (and per vector
// target on x86-64, see HLAB_VECTOR_CLONES).

template <typename T>
inline __attribute__((always_inline)) void RmsNormForwardImpl(
    const T* x, const AccumOf<T>* w, int64_t rows, int64_t d, AccumOf<T> eps,
    T* y, AccumOf<T>* rstd) {
  using A = AccumOf<T>;
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * d;
    T* yr = y + i * d;
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < d; ++j) {
      const A v = LoadAccum(xr[j]);
      sum += v * v;
    }
    const A r = A(1) / std::sqrt(sum / static_cast<A>(d) + eps);
    rstd[i] = r;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      yr[j] = StoreAs<T>(LoadAccum(xr[j]) * r * w[j]);
    }
  }
}

template <typename T>
inline __attribute__((always_inline)) void RmsNormBackwardImpl(
    const T* x, const AccumOf<T>* w, const AccumOf<T>* rstd, const T* dy,
    int64_t rows, int64_t d, T* dx, AccumOf<T>* dw) {
  using A = AccumOf<T>;
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * d;
    const T* gr = dy + i * d;
    T* dxr = dx + i * d;
    const A r = rstd[i];
    A dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j) {
      dot += LoadAccum(gr[j]) * w[j] * LoadAccum(xr[j]);
    }
    const A c = r * r * r * dot / static_cast<A>(d);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) {
      const A xv = LoadAccum(xr[j]);
      const A gv = LoadAccum(gr[j]);
      dxr[j] = StoreAs<T>(r * gv * w[j] - xv * c);
      dw[j] += gv * xv * r;
    }
  }
}

template <typename T>
inline __attribute__((always_inline)) void SwiGluForwardImpl(const T* a,
                                                             const T* b,
                                                             int64_t n, T* y) {
  using A = AccumOf<T>;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const A av = LoadAccum(a[i]);
    y[i] = StoreAs<T>(av * Sigmoid(av) * LoadAccum(b[i]));
  }
}

template <typename T>
inline __attribute__((always_inline)) void SwiGluBackwardImpl(
    const T* a, const T* b, const T* dy, int64_t n, T* da, T* db) {
  using A = AccumOf<T>;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const A av = LoadAccum(a[i]);
    const A s = Sigmoid(av);
    const A g = LoadAccum(dy[i]);
    da[i] = StoreAs<T>(g * LoadAccum(b[i]) * s * (A(1) + av * (A(1) - s)));
    db[i] = StoreAs<T>(g * av * s);
  }
}

template <typename T>
inline __attribute__((always_inline)) void RopeRowImpl(const T* x,
                                                       const AccumOf<T>* cos,
                                                       const AccumOf<T>* sin,
                                                       int64_t half,
                                                       AccumOf<T> sign, T* y) {
  using A = AccumOf<T>;
#pragma omp simd
  for (int64_t j = 0; j < half; ++j) {
    const A x1 = LoadAccum(x[j]);
    const A x2 = LoadAccum(x[j + half]);
    const A s = sign * sin[j];
    y[j] = StoreAs<T>(x1 * cos[j] - x2 * s);
    y[j + half] = StoreAs<T>(x2 * cos[j] + x1 * s);
  }
}

}  // namespace

// float and Bf16 get vector clones; double stays scalar (tests and
// references only).
#define HLAB_DEFINE_FUSED_ELEMENTWISE(T, A, ATTR)                            \
  ATTR void RmsNormForwardRows(const T* x, const A* w, int64_t rows,         \
                               int64_t d, A eps, T* y, A* rstd) {            \
    RmsNormForwardImpl<T>(x, w, rows, d, eps, y, rstd);                      \
  }                                                                          \
  ATTR void RmsNormBackwardRows(const T* x, const A* w, const A* rstd,       \
                                const T* dy, int64_t rows, int64_t d, T* dx, \
                                A* dw) {                                     \
    RmsNormBackwardImpl<T>(x, w, rstd, dy, rows, d, dx, dw);                 \
  }                                                                          \
  ATTR void SwiGluForward(const T* a, const T* b, int64_t n, T* y) {         \
    SwiGluForwardImpl<T>(a, b, n, y);                                        \
  }                                                                          \
  ATTR void SwiGluBackward(const T* a, const T* b, const T* dy, int64_t n,   \
                           T* da, T* db) {                                   \
    SwiGluBackwardImpl<T>(a, b, dy, n, da, db);                              \
  }                                                                          \
  ATTR void RopeRow(const T* x, const A* cos, const A* sin, int64_t half,    \
                    A sign, T* y) {                                          \
    RopeRowImpl<T>(x, cos, sin, half, sign, y);                              \
  }

HLAB_DEFINE_FUSED_ELEMENTWISE(float, float, HLAB_VECTOR_CLONES)
HLAB_DEFINE_FUSED_ELEMENTWISE(double, double, )
HLAB_DEFINE_FUSED_ELEMENTWISE(Bf16, float, HLAB_VECTOR_CLONES)

#undef HLAB_DEFINE_FUSED_ELEMENTWISE

}  // namespace hlab::model::internal
