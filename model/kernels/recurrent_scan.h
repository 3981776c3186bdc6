// Recurrent scans with an explicit state: the scalar-GLA and gated-delta
// recurrences of model/kernels/scalar_gla_kernel.h and gated_delta_kernel.h,
// continued from a given state S and leaving the state after the last step
// in it. Decoding uses them (model/layers/mixer.h): over a prompt for the
// state a step starts from, and over one token per step.
//
// Recurrences, per batch element and head, S: (dk, dv):
//   scalar GLA:  S = exp(g_t) S + k_t v_t^T
//   gated delta: S = exp(g_t) S;  S = S + k_t (beta_t (v_t - S^T k_t))^T
//   o_t = (scale q_t)^T S   (both)
// The same order of operations as the recurrent references in those headers.
//
// Inference only (not differentiable). Compute in fp32 (fp64 when any input
// is fp64), ignoring autocast; the state is kept in that dtype. On the CPU
// plain loops over raw memory, batch-heads split across the intra-op
// threads; elsewhere ATen ops per step.
//
// Thread-safe: pure functions of their arguments (the state is the
// caller's).
//
//   torch::Tensor s;  // undefined: starts from zeros
//   ScalarGlaScan({}, k, v, g, 1.0, &s);              // state after a prompt
//   torch::Tensor o = ScalarGlaScan(q1, k1, v1, g1, 1.0, &s);  // one token
#ifndef HLAB_MODEL_KERNELS_RECURRENT_SCAN_H_
#define HLAB_MODEL_KERNELS_RECURRENT_SCAN_H_

#include <torch/types.h>

namespace hlab::model {

// Shapes as ChunkedScalarGla's: q: (B, Hq, T, dk) or undefined (no output
// wanted), k: (B, Hk, T, dk), v: (B, Hv, T, dv), g: (B or 1, H, T), each of
// Hq, Hk, Hv a divisor of H (input head j serves heads j H / Hx ..). *state:
// (B, H, dk, dv) in the compute dtype, or undefined for zeros; replaced by
// the state after step T - 1. Returns o: (B, H, T, dv) in v's dtype, or an
// undefined tensor when q is undefined.
torch::Tensor ScalarGlaScan(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& g,
                            double scale, torch::Tensor* state);

// Shapes as ChunkedGatedDelta's: q (or undefined), k: (B, H, T, dk); v:
// (B, H, T, dv); g, beta: (B, H, T). *state as above.
torch::Tensor GatedDeltaScan(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& g,
                             const torch::Tensor& beta, double scale,
                             torch::Tensor* state);

}  // namespace hlab::model

#endif  // HLAB_MODEL_KERNELS_RECURRENT_SCAN_H_
