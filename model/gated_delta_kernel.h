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
// Both forms are differentiable with respect to every input: LibTorch ops
// under autograd, plus the thread-split batched matmuls of
// model/scalar_gla_kernel.h (custom autograd Functions). The chunked form's
// sequential scan over chunks is one custom autograd Function on the CPU,
// with a hand-written backward and direct GEMM calls per chunk
// (model/internal/blas.h), batch-heads split across threads; so are its
// gated inputs and decayed intra-chunk products
// (model/internal/gated_delta_chunk.h). They run with CPU autocast disabled,
// compute in fp32 (fp64 when any input is fp64) and return v's dtype.
//
// Thread-safe: pure functions of their inputs.
//
//   // q, k: (B, H, T, dk) (L2-normalised); v: (B, H, T, dv);
//   // g: (B, H, T) log-decays <= 0; beta: (B, H, T) in (0, 1)
//   torch::Tensor o = ChunkedGatedDelta(q, k, v, g, beta, 1.0 / 8.0, 32);
//   torch::Tensor ref = RecurrentGatedDelta(q, k, v, g, beta, 1.0 / 8.0);
//   // o, ref: (B, H, T, dv), equal up to rounding.
#ifndef HLAB_MODEL_GATED_DELTA_KERNEL_H_
#define HLAB_MODEL_GATED_DELTA_KERNEL_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model {

// Chunked WY/UT form (fla naive_chunk_gated_delta_rule): the intra-chunk
// work, including one batched unit-lower-triangular solve per chunk, runs in
// parallel over all chunks; only the state update (T / chunk steps of two
// small matmuls) is sequential. T is padded to a multiple of `chunk` with
// g = beta = 0, k = v = 0 (steps that change nothing) and sliced back.
//
// Shapes: q, k: (B, H, T, dk); v: (B, H, T, dv); g, beta: (B, H, T).
// Returns (B, H, T, dv) in v's dtype.
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

#endif  // HLAB_MODEL_GATED_DELTA_KERNEL_H_
