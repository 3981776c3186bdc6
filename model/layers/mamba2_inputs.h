// Mamba2Inputs: the Mamba-2 mixer's inputs from its input projection, in one
// pass each way (a custom autograd Function with a hand-written backward that
// recomputes from the projection, so only it is saved). For
// p = [z | x | Bm | Cm | dt] along the last dimension, widths di, di, N, N, H
// (di = H P):
//   z                                     (B, T, di), the gate, as it is
//   k = silu(Bm), q = silu(Cm)            (B, T, N), shared by the heads
//   dt = softplus(dt + dt_bias)           (per head)
//   v = silu(x) dt                        (B, T, H, P)
//   g = -exp(A_log) dt                    (B, H, T)
//   skip = D silu(x)                      (B, T, H, P), the D skip term
// The gradient is one (B, T, width) tensor: no split's concatenation in the
// backward. Replaces silu, softplus, the products with dt, A and D, the
// transposes and their autograd nodes.
//
// Computes in fp32 (fp64 for fp64 p) and returns that dtype, all outputs
// contiguous; p's gradient comes back in p's dtype. CPU tensors of fp32, fp64
// or bf16 take the fused pass; other devices and dtypes the same ATen ops.
// Thread-safe: a pure function (rows split across the intra-op threads).
//
//   Mamba2InputTensors in = Mamba2Inputs(p, H, N, a_log, dt_bias, d_skip);
//   // ScalarGla(in.q.unsqueeze(1), in.k.unsqueeze(1), in.v.transpose(1, 2),
//   //           in.g, 1.0) + in.skip.transpose(1, 2) ...
#ifndef HLAB_MODEL_LAYERS_MAMBA2_INPUTS_H_
#define HLAB_MODEL_LAYERS_MAMBA2_INPUTS_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model {

struct Mamba2InputTensors {
  torch::Tensor z;        // (B, T, di)
  torch::Tensor q, k;     // (B, T, N)
  torch::Tensor v, skip;  // (B, T, H, P)
  torch::Tensor g;        // (B, H, T)
};

// p: (B, T, 2 * heads * P + 2 * state + heads) with a contiguous last
// dimension (others are copied); a_log, dt_bias, d_skip: (heads).
// Differentiable in all four.
Mamba2InputTensors Mamba2Inputs(const torch::Tensor& p, int64_t heads,
                                int64_t state, const torch::Tensor& a_log,
                                const torch::Tensor& dt_bias,
                                const torch::Tensor& d_skip);

// The same as ATen ops (the path for other devices, and a reference in
// tests).
Mamba2InputTensors Mamba2InputsWithAten(const torch::Tensor& p, int64_t heads,
                                        int64_t state,
                                        const torch::Tensor& a_log,
                                        const torch::Tensor& dt_bias,
                                        const torch::Tensor& d_skip);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_MAMBA2_INPUTS_H_
