// Softmax rows on raw memory: a row's maximum, exp(x - shift) in place
// with its sum, a row scaled, and one row's softmax cross-entropy with its
// gradient. The float forms are vectorised (AVX-512 where the CPU has it,
// else the compiler's AVX2 or baseline clones: see model/cpu/vec_math.h),
// with ExpNonPositive's polynomial (~2 ulp). For the attention kernel's
// online softmax (model/cpu/fused_attention.cc) and the LM head's loss
// (model/kernels/linear_cross_entropy.cc). No LibTorch here. Private to
// model/.
//
// Determinism: a row's result depends on the row and the CPU's features
// (AVX-512 sums in 16 lanes), never on the thread count.
//
// Thread-safety: pure apart from writing the row given; run concurrently on
// disjoint rows.
//
//   float* row = logits + i * vocab;
//   const float loss = internal::CrossEntropyRow(row, vocab, target,
//                                                /*grad=*/true, 1.0f / n);
#ifndef HLAB_MODEL_CPU_SOFTMAX_ROWS_H_
#define HLAB_MODEL_CPU_SOFTMAX_ROWS_H_

#include <cstdint>

namespace hlab::model::internal {

// max(x[lo], ..., x[hi - 1]); -inf for an empty range.
float RowMax(const float* x, int64_t lo, int64_t hi);
double RowMax(const double* x, int64_t lo, int64_t hi);

// x[j] = exp(x[j] - shift) on [lo, hi), 0 elsewhere in [0, size); returns
// the sum. shift must be at least every x[j] in the range.
float ExpRow(float* x, int64_t lo, int64_t hi, int64_t size, float shift);
double ExpRow(double* x, int64_t lo, int64_t hi, int64_t size, double shift);

// x[j] *= s for j in [0, size).
void ScaleRow(float* x, int64_t size, float s);
void ScaleRow(double* x, int64_t size, double s);

// Softmax cross-entropy of the logits x[0, vocab) against `target`:
// returns logsumexp(x) - x[target], or 0 when target is -1 (no target).
// With grad, x becomes grad_scale * (softmax(x) - onehot(target)), the
// gradient of grad_scale times the loss (all zeros without a target);
// without it, x is scratch afterwards. target must be -1 or in [0, vocab).
float CrossEntropyRow(float* x, int64_t vocab, int64_t target, bool grad,
                      float grad_scale);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_SOFTMAX_ROWS_H_
