// Rotary position embedding (RoPE), rotate-half convention (GPT-NeoX, Llama).
//
// For a head vector x of even size D at position t, with x1 = x[:D/2] and
// x2 = x[D/2:] and inverse frequencies f_i = theta^(-2i/D), i < D/2:
//   rope(x)_t = x * cos(t f) + rotate_half(x) * sin(t f),
//   rotate_half(x) = [-x2, x1],  cos/sin repeated over both halves.
// The dot product rope(q)_i . rope(k)_j depends on q, k and i - j only.
//
// The cos/sin tables are computed in fp32 (fp64 for fp64 input) and cached per
// (T, D, theta, dtype, device); the rotation itself is done in that precision
// and the result is returned in x's dtype. On the CPU (float, double,
// bfloat16) the rotation is one pass forward and one backward (one autograd
// node, differentiable once) and the result keeps x's memory order when x is
// dense; elsewhere it is LibTorch ops.
//
// Thread-safe: the table cache is guarded by a mutex.
//
//   // q: (B, H, T, D), D even
//   torch::Tensor q_rot = ApplyRope(q, 10000.0);  // (B, H, T, D)
//   // Decoding: the token at position 37 alone.
//   torch::Tensor q37 = ApplyRopeAt(q_next, 10000.0, 37);  // (B, H, 1, D)
#ifndef HLAB_MODEL_LAYERS_ROPE_H_
#define HLAB_MODEL_LAYERS_ROPE_H_

#include <torch/types.h>

namespace hlab::model {

// x: (B, H, T, D) with D even -> (B, H, T, D) in x's dtype. Position t is the
// index along dimension 2, starting at 0.
torch::Tensor ApplyRope(const torch::Tensor& x, double theta);

// The same for positions offset .. offset + T - 1 (ApplyRope is offset 0),
// for decoding: inference only (not differentiable), tables not cached.
torch::Tensor ApplyRopeAt(const torch::Tensor& x, double theta, int64_t offset);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_ROPE_H_
