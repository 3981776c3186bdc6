// The block loops of model/kernels/attention_kernel.cc on raw memory: one query
// block's online softmax (forward) and its FlashAttention-2 backward, with
// the block matmuls as direct row-major GEMM calls and the softmax, masking
// and dS arithmetic as plain loops over each row, in place in one scratch
// buffer per block. No LibTorch here: attention_kernel.cc hands in pointers
// and strides and keeps the ATen loops for what this cannot run (devices
// other than the CPU, or a process without the GEMM entry points).
//
// Element types: float and double compute and accumulate in their own type;
// Bf16 inputs multiply through oneDNN's bf16 x bf16 -> fp32 GEMM, so the
// scores, statistics and gradient accumulators are fp32 with one rounding
// to bf16 per block (P and dS, as the next matmul's input).
//
// Thread-safety: the functions are pure apart from writing their outputs
// and scratch; run them concurrently on disjoint output rows, each thread
// with its own scratch (dK and dV accumulators per thread as well).
//
//   internal::AttentionLoopShape shape;
//   shape.g = 2;
//   shape.d = 64;
//   shape.window = 128;
//   internal::AttentionScratch<float> scratch(rows, keys, /*backward=*/false);
//   internal::AttentionForwardBlock<float>(shape, block, 0, n, q, k, v, sink,
//                                          out, lse, scratch);
#ifndef HLAB_MODEL_CPU_FUSED_ATTENTION_H_
#define HLAB_MODEL_CPU_FUSED_ATTENTION_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "model/cpu/blas.h"

namespace hlab::model::internal {

// Whether the GEMM entry points for T were found in this process (OpenBLAS's
// cblas_sgemm / cblas_dgemm, oneDNN's dnnl_gemm_bf16bf16f32; LibTorch loads
// both on Debian). Thread-safe.
template <typename T>
bool FusedAttentionAvailable();

// A batch of row-major matrices: element (n, r, c) at
// data[n * batch + r * row + c]. Columns are contiguous.
template <typename T>
struct Matrices {
  T* data = nullptr;
  int64_t batch = 0;
  int64_t row = 0;
  T* at(int64_t n, int64_t r) const { return data + n * batch + r * row; }
};

// Sizes shared by every block of a call. Rows are query positions times G
// (row t * G + g is query head g of the KV group at position t).
struct AttentionLoopShape {
  int64_t g = 1;       // query heads per KV head
  int64_t d = 0;       // head dim
  int64_t window = 0;  // 0: causal; w > 0: the last w keys
  double scale = 1;    // of the scores: s = scale q . k (1/sqrt(D))
};

// One query block [query_start, query_start + query_size) (positions) and the
// key blocks (start, size) it visits, in order.
struct AttentionBlockPlan {
  int64_t query_start = 0;
  int64_t query_size = 0;
  std::vector<std::pair<int64_t, int64_t>> keys;
};

// Per-thread scratch for blocks of up to `rows` x `keys`.
template <typename T>
struct AttentionScratch {
  using A = AccumOf<T>;
  AttentionScratch(int64_t rows, int64_t keys, bool backward);
  std::vector<A> scores;    // S, then P (rows x keys)
  std::vector<A> grads;     // dP, then dS (backward)
  std::vector<T> lowered;   // P or dS in T, for Bf16 only
  std::vector<A> max, sum;  // per row (forward)
};

// Forward of query block `block` of matrices [n0, n0 + n): q (N, T*G, D),
// unscaled (the products take shape.scale); k, v (N, T, D); sink (N, rows)
// per-row sink logits of the block (row r of matrix i at sink.at(i, 0)[r]) or
// data == nullptr for none. Writes the block's rows of out (N, T*G, D)
// normalised, and of lse (N, T*G) (row stride ignored, use batch).
template <typename T>
void AttentionForwardBlock(const AttentionLoopShape& shape,
                           const AttentionBlockPlan& block, int64_t n0,
                           int64_t n, Matrices<const T> q, Matrices<const T> k,
                           Matrices<const T> v, Matrices<const AccumOf<T>> sink,
                           Matrices<AccumOf<T>> out, Matrices<AccumOf<T>> lse,
                           AttentionScratch<T>& scratch);

// Backward of the same block: dO (N, T*G, D) in T; lse and drow =
// rowsum(dO * O) (N, T*G). Writes the block's rows of dq (N, T*G, D), which
// need no zeroing, and adds into dk, dv (N, T, D), accumulators; all in
// the accumulator type, with respect to the unscaled q and k.
template <typename T>
void AttentionBackwardBlock(const AttentionLoopShape& shape,
                            const AttentionBlockPlan& block, int64_t n0,
                            int64_t n, Matrices<const T> q, Matrices<const T> k,
                            Matrices<const T> v, Matrices<const T> dout,
                            Matrices<const AccumOf<T>> lse,
                            Matrices<const AccumOf<T>> drow,
                            Matrices<AccumOf<T>> dq, Matrices<AccumOf<T>> dk,
                            Matrices<AccumOf<T>> dv,
                            AttentionScratch<T>& scratch);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_FUSED_ATTENTION_H_
