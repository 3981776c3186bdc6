// The chunked scalar-GLA kernel (model/kernels/scalar_gla_kernel.h) on the CPU
// as one fused custom autograd Function: per batch-head, one pass over the
// chunks forward and one back, each chunk's decays, scores and products
// computed in cache with direct GEMM calls (model/cpu/blas.h), batch-heads
// split across the intra-op threads. It replaces some twenty broadcast ATen
// ops, their copies of transposed and bf16 inputs, and their autograd nodes per
// call. Private to model/.
//
// Inputs are read through their strides (the last dimension must have stride
// 1, else they are copied), in fp32, fp64 or bf16; the kernel computes in fp32
// (fp64 when any input is fp64). The output is written in v's dtype and laid
// out (B, T, H, dv), returned as the (B, H, T, dv) view, so that a caller's
// transpose(1, 2).reshape to (B, T, H * dv) is free. Saved for the backward:
// the inputs and the state entering each chunk, (B * H, n, dk, dv).
//
// Thread-safety: pure functions of their inputs.
//
//   if (internal::FusedScalarGlaServes(q, k, v, g)) {
//     return internal::FusedChunkedScalarGla(q, k, v, g, scale, chunk,
//                                            /*bf16_products=*/false);
//   }
#ifndef HLAB_MODEL_INTERNAL_SCALAR_GLA_CHUNK_H_
#define HLAB_MODEL_INTERNAL_SCALAR_GLA_CHUNK_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model::internal {

// Whether FusedChunkedScalarGla takes these inputs: CPU tensors of fp32,
// fp64 or bf16, with the GEMM of the compute dtype available.
bool FusedScalarGlaServes(const torch::Tensor& q, const torch::Tensor& k,
                          const torch::Tensor& v, const torch::Tensor& g);

// ChunkedScalarGla's contract (model/kernels/scalar_gla_kernel.h), shapes
// already checked: q, k (B, H or 1, T, dk); v (B, H, T, dv); g (B or 1, H, T);
// chunk > 0. Differentiable in q, k, v and g. With bf16_products and an
// fp32 computation, every chunk product rounds its operands to bf16 (sums,
// decays and the states stay fp32; SmallBf16Gemm,
// model/cpu/small_bf16_gemm.h), forward and backward.
torch::Tensor FusedChunkedScalarGla(const torch::Tensor& q,
                                    const torch::Tensor& k,
                                    const torch::Tensor& v,
                                    const torch::Tensor& g, double scale,
                                    int64_t chunk, bool bf16_products);

// The same as a composition of LibTorch ops (batched matmuls through
// ParallelBaddbmm) under autograd: the path for other devices and dtypes,
// and the fused kernel's second reference in tests. Defined in
// model/scalar_gla_kernel.cc.
torch::Tensor ChunkedScalarGlaWithAten(const torch::Tensor& q,
                                       const torch::Tensor& k,
                                       const torch::Tensor& v,
                                       const torch::Tensor& g, double scale,
                                       int64_t chunk);

// The states entering each chunk, S_0 = 0, S_{i+1} = exp(a_i) S_i + ds_i,
// in matmul form: S_i = sum_{m < i} exp(a_{m+1} + ... + a_{i-1}) ds_m, one
// (n x n) transfer matrix per batch-head times the contributions. A handful
// of large ops (O(n^2 dk dv) work) instead of n sequential steps: the
// composition's scan on devices other than the CPU, where each step would
// be a kernel launch. ds: (B, H, n, dk, dv); log_decay a: (B or 1, H, n),
// <= 0. Returns (B, H, n, dk, dv). Differentiable in both. Defined in
// model/scalar_gla_kernel.cc.
torch::Tensor ScanChunkStatesAsMatmul(const torch::Tensor& ds,
                                      const torch::Tensor& log_decay);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_INTERNAL_SCALAR_GLA_CHUNK_H_
