// Next-token cross-entropy through the LM head without the (N, V) logits:
// the head's product, the log-softmax and the loss are taken a block of rows
// at a time, and the forward takes each block's gradients while its logits
// are at hand (as Liger-Kernel's fused linear cross-entropy does), so no
// product is made twice and nothing of size N x V outlives a block.
//
// Why: at Llama 3's vocabulary (V = 128256) the logits of an 8192-token
// micro-batch are 4.2 GB in fp32, and the plain path keeps about four such
// tensors alive (the product, its fp32 copy, the log-softmax, their
// gradients): 16.9-20.9 GB for a 64-wide model. In blocks of rows the
// logits take LogitsBlockBytes() or less at a time, whatever N and V.
//
// Two forms. On the CPU in fp32 (no autocast) the block is one buffer:
// the head's products are BLAS calls split over the vocabulary (each packs
// only its own columns of the weight), and each row's softmax and gradient
// is one in-place pass (model/cpu/softmax_rows.h), so the logits become
// d loss / d logits where they lie. Elsewhere (CUDA, autocast, fp64) each
// block is ATen's log_softmax and nll_loss with the gradients from
// autograd. docs/performance.md, "The loss at a large vocabulary".
//
// Bits: the results match the plain path to rounding, not bitwise (the
// sums over rows and over the vocabulary run in another order, and the
// CPU form's exp is model/cpu/vec_math.h's). LinearCrossEntropyBlockRows
// and every split are functions of N, d and V alone, never of the thread
// count, so a run's bits stay reproducible and bitwise resume holds; shapes
// whose logits fit in one block take the plain path unchanged.
//
// Thread-safe as LibTorch ops are. Autocast (CPU or CUDA) applies to the
// products as in the plain path; the gradients are taken in the forward,
// under the autocast state the loss was computed with.
//
//   const int64_t rows = LinearCrossEntropyBlockRows(x.size(0), w.size(0));
//   if (rows > 0) loss = LinearCrossEntropy(x, w, targets, rows);
#ifndef HLAB_MODEL_KERNELS_LINEAR_CROSS_ENTROPY_H_
#define HLAB_MODEL_KERNELS_LINEAR_CROSS_ENTROPY_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model {

// The most bytes of fp32 logits one block holds: 256 MiB.
int64_t LogitsBlockBytes();

// Rows per block for n rows of a vocabulary of `vocab`: a multiple of 64,
// at least 64, with rows * vocab * 4 <= LogitsBlockBytes() where that
// allows 64 rows; 0 when all n rows fit in one block (the plain path).
int64_t LinearCrossEntropyBlockRows(int64_t n, int64_t vocab);

// Mean over the rows whose target is not -1 of -log softmax(x w^T)[target],
// fp32 (NaN when every target is -1, as cross_entropy gives). x: (N, d),
// the final norm's output; weight: (V, d), the LM head (or the tied
// embedding); targets: (N,) int64 in [-1, V) (others are refused with a
// c10::Error). Differentiable once with respect to x and weight; with
// gradients on (and x or weight requiring them) the forward also takes
// them, and keeps dx (N, d) and dw (V, d) until the backward.
torch::Tensor LinearCrossEntropy(const torch::Tensor& x,
                                 const torch::Tensor& weight,
                                 const torch::Tensor& targets,
                                 int64_t block_rows);

// Per-row -log softmax(x w^T)[target] without gradients, fp32 (N,), in
// blocks of block_rows (0: one block). Rows whose target is -1 give 0.
torch::Tensor LinearTokenNll(const torch::Tensor& x,
                             const torch::Tensor& weight,
                             const torch::Tensor& targets, int64_t block_rows);

}  // namespace hlab::model

#endif  // HLAB_MODEL_KERNELS_LINEAR_CROSS_ENTROPY_H_
