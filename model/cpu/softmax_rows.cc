#include "model/cpu/softmax_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "model/cpu/vec_math.h"

namespace hlab::model::internal {
namespace {

// x[j] = exp(x[j] - shift) on [lo, hi), 0 elsewhere in [0, size); returns
// the sum.
HLAB_VECTOR_CLONES float ExpRowPortable(float* x, int64_t lo, int64_t hi,
                                        int64_t size, float shift) {
  float sum = 0;
  for (int64_t j = 0; j < lo; ++j) x[j] = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = lo; j < hi; ++j) {
    x[j] = ExpNonPositive(x[j] - shift);
    sum += x[j];
  }
  for (int64_t j = hi; j < size; ++j) x[j] = 0;
  return sum;
}

#if defined(__x86_64__) && defined(__GNUC__)
// ExpRowPortable's AVX-512 form: Exp16 (model/cpu/vec_math.h) with
// the row's tail as one masked step. Same polynomial, so the same values up
// to the summation order.
//
// GCC 12's own intrinsics (reduce) pass an undefined vector as their unused
// source and trip -Wuninitialized there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) float ExpRowAvx512(float* x, int64_t lo,
                                                      int64_t hi, int64_t size,
                                                      float shift) {
  std::fill(x, x + lo, 0.0f);
  std::fill(x + hi, x + size, 0.0f);
  const __m512 vshift = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = lo; j < hi; j += 16) {
    const __mmask16 in = TailMask16(hi - j);
    const __m512 e =
        Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, x + j), vshift), in);
    _mm512_mask_storeu_ps(x + j, in, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}
#pragma GCC diagnostic pop
#endif

}  // namespace

// GCC 12 leaves an `omp simd reduction(max)` loop scalar (a chain of vmaxss,
// ~4 cycles per element), so the lanes are explicit: kLanes running maxima,
// an element-wise loop that vectorises, then one scalar pass over them.
HLAB_VECTOR_CLONES float RowMax(const float* x, int64_t lo, int64_t hi) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  std::fill_n(lanes, kLanes, -std::numeric_limits<float>::infinity());
  int64_t j = lo;
  for (; j + kLanes <= hi; j += kLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) {
      lanes[l] = lanes[l] < x[j + l] ? x[j + l] : lanes[l];
    }
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; j < hi; ++j) m = std::max(m, x[j]);
  for (int64_t l = 0; l < kLanes; ++l) m = std::max(m, lanes[l]);
  return m;
}
double RowMax(const double* x, int64_t lo, int64_t hi) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = lo; j < hi; ++j) m = std::max(m, x[j]);
  return m;
}

float ExpRow(float* x, int64_t lo, int64_t hi, int64_t size, float shift) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512()) return ExpRowAvx512(x, lo, hi, size, shift);
#endif
  return ExpRowPortable(x, lo, hi, size, shift);
}

double ExpRow(double* x, int64_t lo, int64_t hi, int64_t size, double shift) {
  double sum = 0;
  for (int64_t j = 0; j < lo; ++j) x[j] = 0;
  for (int64_t j = lo; j < hi; ++j) {
    x[j] = std::exp(x[j] - shift);
    sum += x[j];
  }
  for (int64_t j = hi; j < size; ++j) x[j] = 0;
  return sum;
}

HLAB_VECTOR_CLONES void ScaleRow(float* x, int64_t size, float s) {
#pragma omp simd
  for (int64_t j = 0; j < size; ++j) x[j] *= s;
}
void ScaleRow(double* x, int64_t size, double s) {
  for (int64_t j = 0; j < size; ++j) x[j] *= s;
}

float CrossEntropyRow(float* x, int64_t vocab, int64_t target, bool grad,
                      float grad_scale) {
  if (target < 0) {
    if (grad) std::fill(x, x + vocab, 0.0f);
    return 0.0f;
  }
  const float picked = x[target];
  const float max = RowMax(x, 0, vocab);
  const float sum = ExpRow(x, 0, vocab, vocab, max);
  if (grad) {
    ScaleRow(x, vocab, grad_scale / sum);
    x[target] -= grad_scale;
  }
  return max + std::log(sum) - picked;
}

}  // namespace hlab::model::internal
