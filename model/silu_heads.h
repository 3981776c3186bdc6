// SiluToHeads: the input activations of the Gated DeltaNet mixer in one pass
// each way: SiLU, the split into heads with the head dimension moved before
// time, and optionally fla's L2 normalisation per head,
//   y[b, h, t, :] = s / sqrt(|s|^2 + 1e-6)  (or s),  s = silu(x[b, t, h, :])
// as a custom autograd Function with a hand-written backward (recomputing s
// from x, so only x is saved). Replaces silu, view, transpose, the norm and
// its autograd nodes, and the copy the kernel's reshape made of the
// transposed view.
//
// Computes in fp32 (fp64 for fp64 input) and returns that dtype; the
// gradient comes back in x's dtype. CPU tensors of fp32, fp64, bf16 or fp16;
// other devices take the same ops in ATen. Thread-safe: a pure function (rows
// split across the intra-op threads).
//
//   // x: (B, T, H * dh), e.g. a projection's output
//   torch::Tensor q = SiluToHeads(x, H, /*l2_normalize=*/true);
//   // q: (B, H, T, dh), contiguous
#ifndef HLAB_MODEL_SILU_HEADS_H_
#define HLAB_MODEL_SILU_HEADS_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model {

// x: (B, T, heads * dh), any strides with a contiguous last dimension
// (others are copied) -> (B, heads, T, dh) contiguous, fp32 or fp64.
torch::Tensor SiluToHeads(const torch::Tensor& x, int64_t heads,
                          bool l2_normalize);

}  // namespace hlab::model

#endif  // HLAB_MODEL_SILU_HEADS_H_
