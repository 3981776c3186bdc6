// Attention through FlashAttention's contract, with hlab's sink folded into
// the log-sum-exp: the GPU form of model/kernels/attention_kernel.h's
// BlockwiseAttention (same semantics: causal, GQA, a window, a sink).
//
// A "core" computes attention without a sink in FlashAttention-2's terms:
//   forward:  (q, k, v, window) -> (o, lse)  with o = softmax(S) V and
//             lse_i = log sum_j exp(s_ij) over the visible keys;
//   backward: (dout, q, k, v, out, lse, window) -> (dq, dk, dv), where the
//             kernel takes D_i = rowsum(dout_i * out_i) from the `out` it is
//             given (that is all it uses `out` for).
// The sink only enlarges the denominator, so the answer is o scaled per row:
//   y_i = o_i * w_i,   w_i = exp(lse_i) / (exp(lse_i) + exp(sink_h))
//                          = sigmoid(lse_i - sink_h),
// and the backward is the core's backward called with dout = w * dy and
// out = y (then D_i = w_i^2 rowsum(dy_i * o_i) is what the sink's column
// needs), plus dsink_h = -sum_i (1 - w_i) rowsum(dy_i * y_i). Derivation:
// docs/models.md, "Attention on a GPU".
//
// Cores:
//   kFlash: LibTorch's own FlashAttention-2 kernels (at::_flash_attention_
//           forward / _backward, window_size_left = w - 1): CUDA tensors in
//           bf16 or fp16, head dim a multiple of 8 up to 256, LibTorch >=
//           2.6 (FlashAttentionServes says whether it can run). Its
//           backward runs in its deterministic mode (dQ summed in a fixed
//           order, not with atomic adds), so a resumed run repeats an
//           uninterrupted one bit for bit, as on the CPU.
//   kDense: the same contract in plain ATen ops with T x T scores in fp32
//           (fp64 for fp64 input): the CPU stand-in the tests check the
//           fold against NaiveAttention with.
//
// Thread-safe: pure functions of their inputs.
//
//   // q: (B, H, T, D); k, v: (B, Hkv, T, D); sink: (H) or undefined
//   if (FlashAttentionServes(q, k, v))
//     o = SinkFoldedAttention(q, k, v, sink, /*window=*/512,
//                             AttentionCore::kFlash);  // (B, H, T, D)
#ifndef HLAB_MODEL_KERNELS_FLASH_ATTENTION_H_
#define HLAB_MODEL_KERNELS_FLASH_ATTENTION_H_

#include <cstdint>

#include <torch/types.h>
#include <torch/version.h>

// at::_flash_attention_forward / _backward with window_size_left and
// window_size_right (and the argument order hlab passes) are LibTorch 2.6's
// and later's; Debian's 1.13 has neither, and only the dense core runs.
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
#define HLAB_TORCH_FLASH_ATTENTION 1
#else
#define HLAB_TORCH_FLASH_ATTENTION 0
#endif

namespace hlab::model {

enum class AttentionCore { kDense, kFlash };

// Whether the kFlash core can run these inputs in this build: LibTorch >=
// 2.6, CUDA tensors, q, k and v all bf16 or all fp16, head dim a multiple of
// 8 and at most 256. (FlashAttention-2 also needs an Ampere or newer GPU;
// on an older one its kernels fail with their own message.)
bool FlashAttentionServes(const torch::Tensor& q, const torch::Tensor& k,
                          const torch::Tensor& v);

// BlockwiseAttention's contract (model/kernels/attention_kernel.h): q: (B,
// H, T, D); k, v: (B, Hkv, T, D); sink: (H) or undefined; window 0 = all
// previous keys, w > 0 = the last w. Returns (B, H, T, D) in q's dtype, the
// transpose of a contiguous (B, T, H, D) tensor. Differentiable in q, k, v
// and sink (a custom autograd function; autocast off inside). kFlash
// requires FlashAttentionServes(q, k, v).
torch::Tensor SinkFoldedAttention(const torch::Tensor& q,
                                  const torch::Tensor& k,
                                  const torch::Tensor& v,
                                  const torch::Tensor& sink, int64_t window,
                                  AttentionCore core);

}  // namespace hlab::model

#endif  // HLAB_MODEL_KERNELS_FLASH_ATTENTION_H_
