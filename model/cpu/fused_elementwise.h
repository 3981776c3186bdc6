// Raw-memory loops of the fused element-wise ops of model/: RMSNorm (rows),
// the SwiGLU product silu(a) * b, and the rotary embedding's rotation, each
// forward and backward in one pass over memory where LibTorch 1.13 takes
// 4-12 separate ops (and as many temporaries). No LibTorch here: the
// autograd functions in model/layers/norm.cc, model/layers/feed_forward.cc and
// model/layers/rope.cc hand in pointers, split rows over threads, and keep the
// ATen compositions for other devices and dtypes.
//
// Element types float, double and Bf16; arithmetic in AccumOf<T> (float for
// Bf16, whose results are rounded once, to nearest even).
//
// Thread-safety: pure apart from writing their outputs; run them
// concurrently on disjoint rows (RmsNormBackwardRows accumulates into dw:
// give each thread its own).
//
//   std::vector<float> rstd(rows);
//   internal::RmsNormForwardRows(x, w, rows, d, 1e-6f, y, rstd.data());
#ifndef HLAB_MODEL_CPU_FUSED_ELEMENTWISE_H_
#define HLAB_MODEL_CPU_FUSED_ELEMENTWISE_H_

#include <cstdint>

#include "model/cpu/blas.h"

namespace hlab::model::internal {

#define HLAB_FUSED_ELEMENTWISE(T, A)                                           \
  /* RMSNorm of rows x d contiguous rows: r = 1 / sqrt(mean(x^2) + eps),       \
     y = x * r * w; rstd[i] = r. */                                            \
  void RmsNormForwardRows(const T* x, const A* w, int64_t rows, int64_t d,     \
                          A eps, T* y, A* rstd);                               \
  /* Its backward: dx = r (dy w) - x r^3 mean(dy w x); dw += dy x r. */        \
  void RmsNormBackwardRows(const T* x, const A* w, const A* rstd, const T* dy, \
                           int64_t rows, int64_t d, T* dx, A* dw);             \
  /* y = silu(a) * b over n elements. */                                       \
  void SwiGluForward(const T* a, const T* b, int64_t n, T* y);                 \
  /* da = dy b s (1 + a (1 - s)), db = dy a s, with s = sigmoid(a). */         \
  void SwiGluBackward(const T* a, const T* b, const T* dy, int64_t n, T* da,   \
                      T* db);                                                  \
  /* One row of 2 * half elements rotated by the angles whose cos and sin      \
     are given (half each): y_j = x_j c_j - sign x_{j+h} s_j,                  \
     y_{j+h} = x_{j+h} c_j + sign x_j s_j. sign -1 is the inverse rotation     \
     (the backward). */                                                        \
  void RopeRow(const T* x, const A* cos, const A* sin, int64_t half, A sign,   \
               T* y);

HLAB_FUSED_ELEMENTWISE(float, float)
HLAB_FUSED_ELEMENTWISE(double, double)
HLAB_FUSED_ELEMENTWISE(Bf16, float)

#undef HLAB_FUSED_ELEMENTWISE

// One row (d values, float or double) of the mixers' gated RMSNorm
// (GatedRmsNorm, model/layers/norm.h) with gate a = silu(z) (silu) or
// sigmoid(z). norm_first: y = x r w a with r = 1 / sqrt(mean(x^2) + eps); else
// y = u r w with u = x a and r of u. Returns r.
float GatedRmsNormForwardRow(const float* x, const float* z, const float* w,
                             int64_t d, float eps, bool norm_first, bool silu,
                             float* y);
double GatedRmsNormForwardRow(const double* x, const double* z, const double* w,
                              int64_t d, double eps, bool norm_first, bool silu,
                              double* y);
// Its backward for the row's r: dx, dz; dw += the row's weight gradient.
void GatedRmsNormBackwardRow(const float* x, const float* z, const float* w,
                             float r, const float* dy, int64_t d,
                             bool norm_first, bool silu, float* dx, float* dz,
                             float* dw);
void GatedRmsNormBackwardRow(const double* x, const double* z, const double* w,
                             double r, const double* dy, int64_t d,
                             bool norm_first, bool silu, double* dx, double* dz,
                             double* dw);

// out = x + y over n elements (vectorised for float); out may be x or y.
void AddVectors(const float* x, const float* y, int64_t n, float* out);
void AddVectors(const double* x, const double* y, int64_t n, double* out);

// bf16 <-> float over n elements, vectorised; NarrowToBf16 rounds to nearest
// even, as c10::BFloat16 (NaN stays NaN), with AVX512-BF16's conversion
// instruction where the CPU has it (which flushes subnormal inputs, |x| <
// 1.2e-38, to zero).
void WidenBf16(const Bf16* x, float* y, int64_t n);
void NarrowToBf16(const float* x, Bf16* y, int64_t n);
// The loop NarrowToBf16 takes on CPUs without AVX512-BF16 (for tests).
void NarrowToBf16Portable(const float* x, Bf16* y, int64_t n);
// The loops the float SwiGLU takes on CPUs without AVX-512 (for tests; the
// bf16 one there widens to float buffers and runs these).
void SwiGluForwardPortable(const float* a, const float* b, int64_t n, float* y);
void SwiGluBackwardPortable(const float* a, const float* b, const float* dy,
                            int64_t n, float* da, float* db);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_FUSED_ELEMENTWISE_H_
