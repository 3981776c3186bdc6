// Scalar-gated linear attention ("simple GLA"): the kernel shared by
// Lightning attention (constant per-head decay) and Mamba-2 SSD (data-dependent
// decay), in a chunked form for training and a step-by-step form for tests.
//
// Recurrence, per batch element and head, with state S: (dk, dv):
//   S_t = exp(g_t) * S_{t-1} + k_t v_t^T ;  o_t = (scale * q_t)^T S_t
// with log-decays g_t <= 0 and S_{-1} = 0.
//
// Both forms are differentiable with respect to every input. On the CPU the
// chunked form is one fused custom autograd Function
// (model/kernels/scalar_gla_fused.h); elsewhere, and for the recurrent
// form, LibTorch ops under autograd plus the thread-split batched matmuls
// declared below. They run with CPU autocast disabled, compute in fp32 (fp64
// when any input is fp64) and return v's dtype. Called under CPU bf16
// autocast, the fused CPU form multiplies bf16 operands in its chunk
// products (model/cpu/small_bf16_gemm.h: what autocast would make of
// the composition's matmuls), forward and backward; decays, sums and states
// stay fp32.
//
// Thread-safe: pure functions of their inputs.
//
//   // q, k: (B, H, T, dk); v: (B, H, T, dv); g: (B, H, T)
//   torch::Tensor o = ChunkedScalarGla(q, k, v, g, 1.0 / 8.0, 64);
//   torch::Tensor ref = RecurrentScalarGla(q, k, v, g, 1.0 / 8.0);
//   // o, ref: (B, H, T, dv), equal up to rounding.
#ifndef HLAB_MODEL_KERNELS_SCALAR_GLA_KERNEL_H_
#define HLAB_MODEL_KERNELS_SCALAR_GLA_KERNEL_H_

#include <cstdint>
#include <initializer_list>

#include <c10/util/Optional.h>
#include <torch/types.h>

#include "model/autocast.h"

namespace hlab::model {

// Chunked form (fla naive_chunk_simple_gla, mamba ssd_minimal): within each
// chunk of `chunk` tokens the output is computed from the chunk's own products
// and the state entering it; only the per-chunk state recurrence (T / chunk
// steps) is sequential. T need not be a multiple of `chunk`. On the CPU (fp32,
// fp64 or bf16 inputs) one fused autograd Function computes it per batch-head,
// chunk by chunk (model/kernels/scalar_gla_fused.h); elsewhere batched ATen
// matmuls over all chunks at once, and the recurrence over chunks as one
// matmul with a transfer matrix (internal::ScanChunkStatesAsMatmul), so a
// GPU launches a handful of kernels, not a few per chunk.
//
// Shapes. H, the number of heads, is g's; q, k and v may have fewer heads,
// each a divisor of H, input head j serving heads j * H / Hx .. (j + 1) * H /
// Hx - 1 (GQA's grouping), so that Mamba-2 can share B and C across heads,
// Lightning its K/V heads across query heads and its constant decay across the
// batch, without copies:
//   q: (B, Hq, T, dk)   k: (B, Hk, T, dk)   v: (B, Hv, T, dv)
//   g: (B or 1, H, T)
//   returns (B, H, T, dv) in v's dtype. On the CPU it is the transpose of a
//   contiguous (B, T, H, dv) tensor: o.transpose(1, 2) costs no copy.
torch::Tensor ChunkedScalarGla(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& g,
                               double scale, int64_t chunk);

// Step-by-step recurrence over T: the reference for tests. Same contract as
// ChunkedScalarGla; slow (O(T) sequential ops).
torch::Tensor RecurrentScalarGla(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const torch::Tensor& g,
                                 double scale);

// ---------------------------------------------------------------------------
// Helpers shared by the recurrent-mixer kernels
// (model/kernels/gated_delta_kernel.cc uses them too).

using model::ScopedAutocastOff;  // model/autocast.h

// The dtype the kernels compute in: fp64 if any input is fp64, else fp32.
torch::ScalarType KernelComputeDtype(
    std::initializer_list<torch::Tensor> inputs);

// t in fp32, or unchanged if it is fp64: the dtype for gates and decays.
torch::Tensor AtLeastFp32(const torch::Tensor& t);

// Pads dimension 2 (time) of `t` at the end with zeros to length `t_padded`.
torch::Tensor PadTime(const torch::Tensor& t, int64_t t_padded);

// The first `length` steps of dimension 2 (time) of `t`: `t` itself when it
// has no padding (a no-op narrow would still cost a zero-filled gradient
// copy in the backward pass).
torch::Tensor UnpadTime(const torch::Tensor& t, int64_t length);

// (chunk, chunk) bool mask, true strictly above the diagonal (j > i): the
// entries to fill with -inf before exp.
torch::Tensor StrictUpperMask(int64_t chunk, const torch::Device& device);

// Batched matmul out = beta * c + alpha * (a @ b), with a: (N, m, k),
// b: (N, k, n) and c: (N, m, n) (beta is ignored without c). Differentiable
// in a, b and c. In LibTorch builds without MKL (Debian's), torch::bmm runs
// its batch serially, one select + addmm per matrix on one core; this splits
// the batch across the intra-op threads (at::parallel_for, which is
// header-inline OpenMP: parallel only when this library is compiled with
// -fopenmp, serial otherwise) and, on the CPU in fp32 / fp64, calls GEMM
// directly per matrix (model/cpu/blas.h): a and b may be row-major or
// transposed views (strides (.., ld, 1) or (.., 1, ld)), other layouts are
// copied first. Computes in the inputs' dtype, ignoring autocast. Defined
// with UnitLowerInverse in model/batched_matmul.cc.
torch::Tensor ParallelBaddbmm(const c10::optional<torch::Tensor>& c,
                              const torch::Tensor& a, const torch::Tensor& b,
                              double beta, double alpha);
inline torch::Tensor ParallelBmm(const torch::Tensor& a,
                                 const torch::Tensor& b) {
  return ParallelBaddbmm(c10::nullopt, a, b, 0.0, 1.0);
}

// (I + A)^-1 where A is the strict lower triangle of a: (N, C, C); the
// diagonal and upper triangle of a are ignored (and get zero gradient).
// Differentiable; the batch is split across threads. On the CPU in fp32 /
// fp64: forward substitution and a two-GEMM backward per matrix on raw
// memory; elsewhere ATen's triangular solve and batched matmuls.
torch::Tensor UnitLowerInverse(const torch::Tensor& a);

}  // namespace hlab::model

#endif  // HLAB_MODEL_KERNELS_SCALAR_GLA_KERNEL_H_
