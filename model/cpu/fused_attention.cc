#include "model/cpu/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "model/cpu/fused_elementwise.h"
#include "model/cpu/softmax_rows.h"
#include "model/cpu/vec_math.h"

namespace hlab::model::internal {
namespace {

// ---------------------------------------------------------------------------
// Row loops. The float versions get vector clones (HLAB_VECTOR_CLONES,
// model/cpu/vec_math.h).

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's own intrinsics pass an undefined vector as their unused source
// and trip -Wuninitialized there.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// ExpRow (model/cpu/softmax_rows.h) in AVX-512 that also writes the row
// rounded to bf16 into y (zeros outside [lo, hi)), and the fp32 values back
// into x only if keep_fp32: the forward needs only the bf16 P, the backward
// both.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) float
ExpRowToBf16Native(float* x, int64_t lo, int64_t hi, int64_t size, float shift,
                   Bf16* y, bool keep_fp32) {
  if (keep_fp32) {
    std::fill(x, x + lo, 0.0f);
    std::fill(x + hi, x + size, 0.0f);
  }
  std::fill(y, y + lo, Bf16{0});
  std::fill(y + hi, y + size, Bf16{0});
  const __m512 vshift = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = lo; j < hi; j += 16) {
    const __mmask16 in = TailMask16(hi - j);
    const __m512 e =
        Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(in, x + j), vshift), in);
    if (keep_fp32) _mm512_mask_storeu_ps(x + j, in, e);
    StoreAsBf16(y + j, in, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// y = bf16(p * (ds - drow)) over [0, size), one pass.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void
GradRowToBf16Native(const float* p, const float* ds, int64_t size, float drow,
                    Bf16* y) {
  const __m512 vdrow = _mm512_set1_ps(drow);
  for (int64_t j = 0; j < size; j += 16) {
    const __mmask16 in = TailMask16(size - j);
    const __m512 g =
        _mm512_mul_ps(_mm512_maskz_loadu_ps(in, p + j),
                      _mm512_sub_ps(_mm512_maskz_loadu_ps(in, ds + j), vdrow));
    StoreAsBf16(y + j, in, g);
  }
}
#pragma GCC diagnostic pop

#endif

// ds[j] = p[j] * (ds[j] - drow).
HLAB_VECTOR_CLONES void GradRow(const float* p, float* ds, int64_t size,
                                float drow) {
#pragma omp simd
  for (int64_t j = 0; j < size; ++j) ds[j] = p[j] * (ds[j] - drow);
}
void GradRow(const double* p, double* ds, int64_t size, double drow) {
  for (int64_t j = 0; j < size; ++j) ds[j] = p[j] * (ds[j] - drow);
}

// For Bf16 the block's P and dS reach the next matmuls rounded to bf16,
// written by the same pass that computes them (one rounding per element, no
// second pass over the block).

// ExpRow, rounded to bf16 into y; x keeps the fp32 values only if keep_fp32.
float ExpRowToBf16(float* x, int64_t lo, int64_t hi, int64_t size, float shift,
                   Bf16* y, bool keep_fp32) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512Bf16()) {
    return ExpRowToBf16Native(x, lo, hi, size, shift, y, keep_fp32);
  }
#endif
  const float sum = ExpRow(x, lo, hi, size, shift);
  NarrowToBf16(x, y, size);
  return sum;
}

// GradRow, rounded to bf16 into y (ds is scratch afterwards).
void GradRowToBf16(const float* p, float* ds, int64_t size, float drow,
                   Bf16* y) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (CpuHasAvx512Bf16()) {
    GradRowToBf16Native(p, ds, size, drow, y);
    return;
  }
#endif
  GradRow(p, ds, size, drow);
  NarrowToBf16(ds, y, size);
}

// The matmul input of the block's P or dS: the accumulator block itself for
// float and double, its bf16 rounding (scratch.lowered) for Bf16.
template <typename T>
const T* BlockInput(const AccumOf<T>* x, AttentionScratch<T>& scratch) {
  if constexpr (std::is_same_v<T, Bf16>) {
    (void)x;
    return scratch.lowered.data();
  } else {
    (void)scratch;
    return x;
  }
}

// Visible keys of query position `pos` within key block [start, start +
// size), in block coordinates: [*lo, *hi), possibly empty.
void VisibleRange(const AttentionLoopShape& shape, int64_t pos, int64_t start,
                  int64_t size, int64_t* lo, int64_t* hi) {
  const int64_t first = shape.window > 0 ? pos - shape.window + 1 : 0;
  *lo = std::clamp<int64_t>(first - start, 0, size);
  *hi = std::clamp<int64_t>(pos + 1 - start, 0, size);
  if (*hi < *lo) *hi = *lo;
}

}  // namespace

template <typename T>
bool FusedAttentionAvailable() {
  return BlasAvailable<T>();
}

template <typename T>
AttentionScratch<T>::AttentionScratch(int64_t rows, int64_t keys, bool backward)
    : scores(rows * keys), max(rows), sum(rows) {
  if (backward) grads.resize(rows * keys);
  if constexpr (std::is_same_v<T, Bf16>) lowered.resize(rows * keys);
}

template <typename T>
void AttentionForwardBlock(const AttentionLoopShape& shape,
                           const AttentionBlockPlan& block, int64_t n0,
                           int64_t n, Matrices<const T> q, Matrices<const T> k,
                           Matrices<const T> v, Matrices<const AccumOf<T>> sink,
                           Matrices<AccumOf<T>> out, Matrices<AccumOf<T>> lse,
                           AttentionScratch<T>& scratch) {
  using A = AccumOf<T>;
  const int64_t rows = block.query_size * shape.g;
  const int64_t row0 = block.query_start * shape.g;
  const int64_t d = shape.d;
  const A scale = static_cast<A>(shape.scale);
  A* m = scratch.max.data();
  A* l = scratch.sum.data();
  A* s = scratch.scores.data();
  for (int64_t i = n0; i < n0 + n; ++i) {
    const T* qb = q.at(i, row0);
    A* ob = out.at(i, row0);
    for (int64_t r = 0; r < rows; ++r) {
      // The sink is a logit with no value: it starts the max and the sum.
      m[r] = sink.data != nullptr ? sink.at(i, 0)[r] : A(-1e30);
      l[r] = sink.data != nullptr ? A(1) : A(0);
      std::fill_n(ob + r * out.row, d, A(0));
    }
    for (const auto& [start, size] : block.keys) {
      // S = scale Q K^T: (rows, size).
      Gemm(false, true, rows, size, d, scale, qb, q.row, k.at(i, start), k.row,
           A(0), s, size);
      for (int64_t r = 0; r < rows; ++r) {
        A* row = s + r * size;
        int64_t lo, hi;
        VisibleRange(shape, block.query_start + r / shape.g, start, size, &lo,
                     &hi);
        if (lo == hi) {
          if constexpr (std::is_same_v<T, Bf16>) {
            std::fill_n(scratch.lowered.data() + r * size, size, Bf16{0});
          } else {
            std::fill_n(row, size, A(0));
          }
          continue;
        }
        const A m_new = std::max(m[r], RowMax(row, lo, hi));
        const A alpha = std::exp(m[r] - m_new);
        A row_sum;
        if constexpr (std::is_same_v<T, Bf16>) {
          row_sum = ExpRowToBf16(row, lo, hi, size, m_new,
                                 scratch.lowered.data() + r * size,
                                 /*keep_fp32=*/false);
        } else {
          row_sum = ExpRow(row, lo, hi, size, m_new);
        }
        l[r] = l[r] * alpha + row_sum;
        if (alpha != A(1)) ScaleRow(ob + r * out.row, d, alpha);
        m[r] = m_new;
      }
      // O += P V.
      Gemm(false, false, rows, d, size, A(1), BlockInput(s, scratch), size,
           v.at(i, start), v.row, A(1), ob, out.row);
    }
    A* lse_b = lse.data + i * lse.batch + row0;
    for (int64_t r = 0; r < rows; ++r) {
      ScaleRow(ob + r * out.row, d, A(1) / l[r]);
      lse_b[r] = m[r] + std::log(l[r]);
    }
  }
}

template <typename T>
void AttentionBackwardBlock(const AttentionLoopShape& shape,
                            const AttentionBlockPlan& block, int64_t n0,
                            int64_t n, Matrices<const T> q, Matrices<const T> k,
                            Matrices<const T> v, Matrices<const T> dout,
                            Matrices<const AccumOf<T>> lse,
                            Matrices<const AccumOf<T>> drow,
                            Matrices<AccumOf<T>> dq, Matrices<AccumOf<T>> dk,
                            Matrices<AccumOf<T>> dv,
                            AttentionScratch<T>& scratch) {
  using A = AccumOf<T>;
  const int64_t rows = block.query_size * shape.g;
  const int64_t row0 = block.query_start * shape.g;
  const int64_t d = shape.d;
  const A scale = static_cast<A>(shape.scale);
  A* p = scratch.scores.data();
  A* ds = scratch.grads.data();
  for (int64_t i = n0; i < n0 + n; ++i) {
    const T* qb = q.at(i, row0);
    const T* dob = dout.at(i, row0);
    const A* lse_b = lse.data + i * lse.batch + row0;
    const A* drow_b = drow.data + i * drow.batch + row0;
    A* dqb = dq.at(i, row0);
    A dq_beta = A(0);  // the first key block writes dq, the rest add
    for (const auto& [start, size] : block.keys) {
      const T* kb = k.at(i, start);
      const T* vb = v.at(i, start);
      // P = exp(scale Q K^T - lse), recomputed.
      Gemm(false, true, rows, size, d, scale, qb, q.row, kb, k.row, A(0), p,
           size);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t lo, hi;
        VisibleRange(shape, block.query_start + r / shape.g, start, size, &lo,
                     &hi);
        if constexpr (std::is_same_v<T, Bf16>) {
          ExpRowToBf16(p + r * size, lo, hi, size, lse_b[r],
                       scratch.lowered.data() + r * size, /*keep_fp32=*/true);
        } else {
          ExpRow(p + r * size, lo, hi, size, lse_b[r]);
        }
      }
      // dV += P^T dO.
      Gemm(true, false, size, d, rows, A(1), BlockInput(p, scratch), size, dob,
           dout.row, A(1), dv.at(i, start), dv.row);
      // dS = P * (dO V^T - rowsum(dO * O)).
      Gemm(false, true, rows, size, d, A(1), dob, dout.row, vb, v.row, A(0), ds,
           size);
      for (int64_t r = 0; r < rows; ++r) {
        if constexpr (std::is_same_v<T, Bf16>) {
          GradRowToBf16(p + r * size, ds + r * size, size, drow_b[r],
                        scratch.lowered.data() + r * size);
        } else {
          GradRow(p + r * size, ds + r * size, size, drow_b[r]);
        }
      }
      const T* ds_in = BlockInput(ds, scratch);
      // dQ += scale dS K;  dK += scale dS^T Q.
      Gemm(false, false, rows, d, size, scale, ds_in, size, kb, k.row, dq_beta,
           dqb, dq.row);
      dq_beta = A(1);
      Gemm(true, false, size, d, rows, scale, ds_in, size, qb, q.row, A(1),
           dk.at(i, start), dk.row);
    }
  }
}

#define HLAB_INSTANTIATE(T)                                                   \
  template bool FusedAttentionAvailable<T>();                                 \
  template struct AttentionScratch<T>;                                        \
  template void AttentionForwardBlock<T>(                                     \
      const AttentionLoopShape&, const AttentionBlockPlan&, int64_t, int64_t, \
      Matrices<const T>, Matrices<const T>, Matrices<const T>,                \
      Matrices<const AccumOf<T>>, Matrices<AccumOf<T>>, Matrices<AccumOf<T>>, \
      AttentionScratch<T>&);                                                  \
  template void AttentionBackwardBlock<T>(                                    \
      const AttentionLoopShape&, const AttentionBlockPlan&, int64_t, int64_t, \
      Matrices<const T>, Matrices<const T>, Matrices<const T>,                \
      Matrices<const T>, Matrices<const AccumOf<T>>,                          \
      Matrices<const AccumOf<T>>, Matrices<AccumOf<T>>, Matrices<AccumOf<T>>, \
      Matrices<AccumOf<T>>, AttentionScratch<T>&);

HLAB_INSTANTIATE(float)
HLAB_INSTANTIATE(double)
HLAB_INSTANTIATE(Bf16)
#undef HLAB_INSTANTIATE

}  // namespace hlab::model::internal
