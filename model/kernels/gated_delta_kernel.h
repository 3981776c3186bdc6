// Gated delta rule (Gated DeltaNet), in a chunked WY/UT form for training and
// a step-by-step form for tests.
//
// Recurrence, per batch element and head, with state S: (dk, dv), S_{-1} = 0:
//   S   = exp(g_t) * S
//   u_t = beta_t * (v_t - S^T k_t)
//   S   = S + k_t u_t^T
//   o_t = (scale * q_t)^T S
// i.e. S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T.
//
// Both forms are differentiable with respect to every input. On the CPU
// (fp32, fp64 or bf16 inputs) the chunked form is one fused custom autograd
// Function (model/kernels/gated_delta_fused.h): per batch-head, chunk by
// chunk, with direct GEMM calls (model/cpu/blas.h), batch-heads split
// across threads. Elsewhere it is a composition over all chunks at once:
// custom Functions for the gated inputs and decayed intra-chunk products
// (model/kernels/gated_delta_chunk.h), the batched matmuls and triangular
// inverse of model/kernels/scalar_gla_kernel.h, and the sequential scan over
// chunks. Both run with CPU autocast disabled, compute in fp32 (fp64 when any
// input is fp64) and return v's dtype. Called under CPU bf16 autocast, the
// fused CPU form multiplies bf16 operands in its chunk products
// (model/cpu/small_bf16_gemm.h: what autocast would make of the
// composition's matmuls), forward and backward; decays, sums, the triangular
// inverse and the states stay fp32.
//
// Thread-safe: pure functions of their inputs.
//
//   // q, k: (B, H, T, dk) (L2-normalised); v: (B, H, T, dv);
//   // g: (B, H, T) log-decays <= 0; beta: (B, H, T) in (0, 1)
//   torch::Tensor o = ChunkedGatedDelta(q, k, v, g, beta, 1.0 / 8.0, 32);
//   torch::Tensor ref = RecurrentGatedDelta(q, k, v, g, beta, 1.0 / 8.0);
//   // o, ref: (B, H, T, dv), equal up to rounding.
#ifndef HLAB_MODEL_KERNELS_GATED_DELTA_KERNEL_H_
#define HLAB_MODEL_KERNELS_GATED_DELTA_KERNEL_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model {

// Chunked WY/UT form (fla naive_chunk_gated_delta_rule): within each chunk
// the WY/UT representation comes from one unit-lower-triangular inverse; only
// the state update (T / chunk steps of two small matmuls) is sequential. T
// need not be a multiple of `chunk`.
//
// Shapes: q, k: (B, H, T, dk); v: (B, H, T, dv); g, beta: (B, H, T).
// Returns (B, H, T, dv) in v's dtype; on the CPU the transpose of a
// contiguous (B, T, H, dv) tensor (o.transpose(1, 2) costs no copy).
torch::Tensor ChunkedGatedDelta(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& g,
                                const torch::Tensor& beta, double scale,
                                int64_t chunk);

// Step-by-step recurrence over T: the reference for tests. Same contract as
// ChunkedGatedDelta; slow (O(T) sequential ops).
torch::Tensor RecurrentGatedDelta(const torch::Tensor& q,
                                  const torch::Tensor& k,
                                  const torch::Tensor& v,
                                  const torch::Tensor& g,
                                  const torch::Tensor& beta, double scale);

}  // namespace hlab::model

#endif  // HLAB_MODEL_KERNELS_GATED_DELTA_KERNEL_H_
