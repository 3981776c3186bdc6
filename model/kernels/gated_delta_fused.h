// The chunked gated-delta kernel (model/kernels/gated_delta_kernel.h) on the
// CPU as one fused custom autograd Function: per batch-head, one pass over the
// chunks forward and one back, each chunk's decays, WY/UT products,
// triangular inverse and state update computed in per-thread buffers with
// direct GEMM calls (model/cpu/blas.h), batch-heads split across the
// intra-op threads. The backward recomputes a chunk's intermediates from its
// inputs and the state entering it (saved, (B * H, n, dk, dv)): nothing of
// size T x C is stored. It replaces the composition of
// model/kernels/gated_delta_chunk.h, UnitLowerInverse, the batched matmuls
// and the scan (some twelve autograd nodes, each a pass over memory). Private
// to model/.
//
// Inputs are read through their strides (the last dimension must have stride
// 1, else they are copied), in fp32, fp64 or bf16; the kernel computes in fp32
// (fp64 when any input is fp64). The output is written in v's dtype and laid
// out (B, T, H, dv), returned as the (B, H, T, dv) view.
//
// Thread-safety: pure functions of their inputs.
//
//   if (internal::FusedGatedDeltaServes({q, k, v, g, beta})) {
//     return internal::FusedChunkedGatedDelta(q, k, v, g, beta, scale, 32,
//                                             /*bf16_products=*/false);
//   }
#ifndef HLAB_MODEL_KERNELS_GATED_DELTA_FUSED_H_
#define HLAB_MODEL_KERNELS_GATED_DELTA_FUSED_H_

#include <cstdint>
#include <initializer_list>
#include <utility>

#include <torch/types.h>

namespace hlab::model::internal {

// Whether FusedChunkedGatedDelta takes these inputs: CPU tensors of fp32,
// fp64 or bf16, with the GEMM of the compute dtype available.
bool FusedGatedDeltaServes(std::initializer_list<torch::Tensor> inputs);

// ChunkedGatedDelta's contract (model/kernels/gated_delta_kernel.h), shapes
// already checked: q, k (B, H, T, dk); v (B, H, T, dv); g, beta (B, H, T);
// chunk > 0. Differentiable in q, k, v, g and beta. With bf16_products and
// an fp32 computation, every chunk product rounds its operands to bf16
// (sums, decays, the inverse and the states stay fp32; SmallBf16Gemm,
// model/cpu/small_bf16_gemm.h), forward and backward.
torch::Tensor FusedChunkedGatedDelta(const torch::Tensor& q,
                                     const torch::Tensor& k,
                                     const torch::Tensor& v,
                                     const torch::Tensor& g,
                                     const torch::Tensor& beta, double scale,
                                     int64_t chunk, bool bf16_products);

// The same as the composition of the intra-chunk Functions
// (model/kernels/gated_delta_chunk.h), UnitLowerInverse, the batched
// matmuls and the chunk scan: the path for other devices and the fused
// kernel's second reference in tests. Defined in
// model/gated_delta_kernel.cc.
torch::Tensor ChunkedGatedDeltaComposed(const torch::Tensor& q,
                                        const torch::Tensor& k,
                                        const torch::Tensor& v,
                                        const torch::Tensor& g,
                                        const torch::Tensor& beta, double scale,
                                        int64_t chunk);

// The composition's sequential scan over chunks, per batch-head:
//   V'_i = U_i - W_i S_i;   S_{i+1} = d_i S_i + Kd_i^T V'_i;   S_0 = 0.
// u: (BH, n, C, dv); w, kd: (BH, n, C, dk); decay d: (BH, n). Returns the
// states entering each chunk (BH, n, dk, dv) and V' (BH, n, C, dv), both
// differentiable in all four inputs. With direct_gemm, on the CPU with BLAS:
// one autograd node with a hand-written backward of direct GEMM calls;
// otherwise (other devices, or direct_gemm false) explicit loops of ATen ops
// into buffers allocated once, with a written-out backward: a fixed
// sequence of a few kernels per chunk and no autograd node per chunk.
// Defined in model/gated_delta_kernel.cc.
std::pair<torch::Tensor, torch::Tensor> ScanGatedDeltaChunks(
    const torch::Tensor& u, const torch::Tensor& w, const torch::Tensor& kd,
    const torch::Tensor& decay, bool direct_gemm = true);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_KERNELS_GATED_DELTA_FUSED_H_
