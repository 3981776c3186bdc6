// The intra-chunk element-wise and product steps of the composed chunked
// gated-delta kernel (internal::ChunkedGatedDeltaComposed,
// model/kernels/gated_delta_kernel.cc: the path for devices other than the CPU,
// and the fused CPU kernel's second reference in tests), each one custom
// autograd Function with a hand-written backward on the CPU (raw loops and
// direct GEMM calls, chunks split across the intra-op threads) and LibTorch ops
// elsewhere. Private to model/.
//
// Shapes: rows = batch * heads * chunks, C = chunk length;
// q, k: (rows, C, dk); v: (rows, C, dv); beta, cum: (rows, C), cum the
// log-decay since the start of the chunk. fp32 or fp64, all the same dtype.
//
// Thread-safety: pure functions of their inputs.
//
//   const internal::ChunkInputs in = internal::MakeChunkInputs(q, k, v, beta,
//                                                              cum);
//   const auto [kk, scores] = internal::DecayedScores(in.kb, q, k, cum);
#ifndef HLAB_MODEL_KERNELS_GATED_DELTA_CHUNK_H_
#define HLAB_MODEL_KERNELS_GATED_DELTA_CHUNK_H_

#include <utility>

#include <torch/types.h>

namespace hlab::model::internal {

// The gated and decayed inputs of the WY form and of the output:
//   kb = beta k,  kbe = beta k exp(cum),  vb = beta v,
//   kd = k exp(cum_C - cum) (keys decayed to the chunk end),  qe = q exp(cum).
struct ChunkInputs {
  torch::Tensor kb, kbe, vb, kd, qe;
};
ChunkInputs MakeChunkInputs(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& beta,
                            const torch::Tensor& cum);

// With D_ij = exp(cum_i - cum_j) for j <= i and 0 above the diagonal, the
// decayed products {(kb k^T) * D, (q k^T) * D}, each (rows, C, C).
std::pair<torch::Tensor, torch::Tensor> DecayedScores(const torch::Tensor& kb,
                                                      const torch::Tensor& q,
                                                      const torch::Tensor& k,
                                                      const torch::Tensor& cum);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_KERNELS_GATED_DELTA_CHUNK_H_
