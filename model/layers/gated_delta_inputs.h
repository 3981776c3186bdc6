// GatedDeltaInputs: the Gated DeltaNet mixer's inputs from its one concatenated
// input projection, in one pass each way (a custom autograd Function with a
// hand-written backward that recomputes from the projection, so only it is
// saved):
//   q, k = l2norm(silu(x_q)), l2norm(silu(x_k)) per head (fla's l2norm,
//          s / sqrt(|s|^2 + 1e-6)), each (B, Hqk, T, dh)
//   v = silu(x_v), (B, H, T, dh)
//   beta = sigmoid(x_beta),  g = -exp(A_log) softplus(x_a + dt_bias),
//          each (B, H, T)
// for x = [x_q | x_k | x_v | x_beta | x_a] along the last dimension, widths
// Hqk dh, Hqk dh, H dh, H, H (Hqk divides H: q and k heads shared by groups
// of value heads, or Hqk = H). The gradient is one (B, T, width) tensor: no
// split's concatenation in the backward. Replaces silu, the heads'
// transposes and copies, the norms, sigmoid, softplus and their autograd
// nodes.
//
// Computes in fp32 (fp64 for fp64 x) and returns that dtype, all outputs
// contiguous; x's gradient comes back in x's dtype. CPU tensors of fp32, fp64
// or bf16 take the fused pass; other devices and dtypes the same ATen ops.
// Thread-safe: a pure function (rows split across the intra-op threads).
//
//   // x: (B, T, (2 Hqk + H) dh + 2 H), the projection's output
//   GatedDeltaInputTensors in = GatedDeltaInputs(x, H, Hqk, a_log, dt_bias);
//   // in.q, in.k: (B, Hqk, T, dh); in.v: (B, H, T, dh);
//   // in.beta, in.g: (B, H, T)
#ifndef HLAB_MODEL_LAYERS_GATED_DELTA_INPUTS_H_
#define HLAB_MODEL_LAYERS_GATED_DELTA_INPUTS_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model {

struct GatedDeltaInputTensors {
  torch::Tensor q, k;     // (B, Hqk, T, dh)
  torch::Tensor v;        // (B, H, T, dh)
  torch::Tensor beta, g;  // (B, H, T)
};

// x: (B, T, (2 * qk_heads + heads) * dh + 2 * heads) with a contiguous last
// dimension (others are copied); heads a multiple of qk_heads; a_log,
// dt_bias: (heads). Differentiable in all three.
GatedDeltaInputTensors GatedDeltaInputs(const torch::Tensor& x, int64_t heads,
                                        int64_t qk_heads,
                                        const torch::Tensor& a_log,
                                        const torch::Tensor& dt_bias);

// The same as ATen ops (the path for other devices, and the reference in
// tests).
GatedDeltaInputTensors GatedDeltaInputsWithAten(const torch::Tensor& x,
                                                int64_t heads, int64_t qk_heads,
                                                const torch::Tensor& a_log,
                                                const torch::Tensor& dt_bias);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_GATED_DELTA_INPUTS_H_
