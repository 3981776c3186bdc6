#include "model/internal/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "model/internal/fused_elementwise.h"
#include "model/internal/vec_math.h"

namespace hlab::model::internal {
namespace {

// ---------------------------------------------------------------------------
// Row loops. The float versions get vector clones (HLAB_VECTOR_CLONES,
// model/internal/vec_math.h).

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

// x[j] = exp(x[j] - shift) on [lo, hi), 0 elsewhere in [0, size); returns
// the sum.
HLAB_VECTOR_CLONES float ExpRow(float* x, int64_t lo, int64_t hi, int64_t size,
                                float shift) {
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

// ds[j] = p[j] * (ds[j] - drow).
HLAB_VECTOR_CLONES void GradRow(const float* p, float* ds, int64_t size,
                                float drow) {
#pragma omp simd
  for (int64_t j = 0; j < size; ++j) ds[j] = p[j] * (ds[j] - drow);
}
void GradRow(const double* p, double* ds, int64_t size, double drow) {
  for (int64_t j = 0; j < size; ++j) ds[j] = p[j] * (ds[j] - drow);
}

HLAB_VECTOR_CLONES void ScaleRow(float* x, int64_t size, float s) {
#pragma omp simd
  for (int64_t j = 0; j < size; ++j) x[j] *= s;
}
void ScaleRow(double* x, int64_t size, double s) {
  for (int64_t j = 0; j < size; ++j) x[j] *= s;
}

// The block's scores or gradients as the next matmul's input: itself for
// float and double, rounded to bf16 (into scratch.lowered) for Bf16.
template <typename T>
const T* AsInput(const AccumOf<T>* x, int64_t size,
                 AttentionScratch<T>& scratch) {
  if constexpr (std::is_same_v<T, Bf16>) {
    NarrowToBf16(x, scratch.lowered.data(), size);
    return scratch.lowered.data();
  } else {
    (void)size;
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
      // S = Q K^T: (rows, size).
      Gemm(false, true, rows, size, d, A(1), qb, q.row, k.at(i, start), k.row,
           A(0), s, size);
      for (int64_t r = 0; r < rows; ++r) {
        A* row = s + r * size;
        int64_t lo, hi;
        VisibleRange(shape, block.query_start + r / shape.g, start, size, &lo,
                     &hi);
        if (lo == hi) {
          std::fill_n(row, size, A(0));
          continue;
        }
        const A m_new = std::max(m[r], RowMax(row, lo, hi));
        const A alpha = std::exp(m[r] - m_new);
        l[r] = l[r] * alpha + ExpRow(row, lo, hi, size, m_new);
        if (alpha != A(1)) ScaleRow(ob + r * out.row, d, alpha);
        m[r] = m_new;
      }
      // O += P V.
      Gemm(false, false, rows, d, size, A(1), AsInput(s, rows * size, scratch),
           size, v.at(i, start), v.row, A(1), ob, out.row);
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
  A* p = scratch.scores.data();
  A* ds = scratch.grads.data();
  for (int64_t i = n0; i < n0 + n; ++i) {
    const T* qb = q.at(i, row0);
    const T* dob = dout.at(i, row0);
    const A* lse_b = lse.data + i * lse.batch + row0;
    const A* drow_b = drow.data + i * drow.batch + row0;
    A* dqb = dq.at(i, row0);
    for (const auto& [start, size] : block.keys) {
      const T* kb = k.at(i, start);
      const T* vb = v.at(i, start);
      // P = exp(Q K^T - lse), recomputed.
      Gemm(false, true, rows, size, d, A(1), qb, q.row, kb, k.row, A(0), p,
           size);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t lo, hi;
        VisibleRange(shape, block.query_start + r / shape.g, start, size, &lo,
                     &hi);
        ExpRow(p + r * size, lo, hi, size, lse_b[r]);
      }
      // dV += P^T dO.
      Gemm(true, false, size, d, rows, A(1), AsInput(p, rows * size, scratch),
           size, dob, dout.row, A(1), dv.at(i, start), dv.row);
      // dS = P * (dO V^T - rowsum(dO * O)).
      Gemm(false, true, rows, size, d, A(1), dob, dout.row, vb, v.row, A(0), ds,
           size);
      for (int64_t r = 0; r < rows; ++r) {
        GradRow(p + r * size, ds + r * size, size, drow_b[r]);
      }
      const T* ds_in = AsInput(ds, rows * size, scratch);
      // dQ += dS K;  dK += dS^T Q.
      Gemm(false, false, rows, d, size, A(1), ds_in, size, kb, k.row, A(1), dqb,
           dq.row);
      Gemm(true, false, size, d, rows, A(1), ds_in, size, qb, q.row, A(1),
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
