// Next-token cross-entropy through the LM head without the (N, V) logits:
// the head's product, the log-softmax and the loss are taken a block of rows
// at a time, and the backward takes each block's product again (as
// activation checkpointing does) instead of keeping the logits.
//
// Why: at Llama 3's vocabulary (V = 128256) the logits of an 8192-token
// micro-batch are 4.2 GB in fp32, and the plain path keeps about four such
// tensors alive (the product, its fp32 copy, the log-softmax, their
// gradients): 16.9-20.9 GB for a 64-wide model. In blocks of rows the
// logits take LogitsBlockBytes() or less at a time, whatever N and V. The
// forward takes each block's gradients while its logits are at hand (as
// Liger-Kernel's fused linear cross-entropy does), so no product is made
// twice; the cost is the head's weight packed again for each block's
// products, and the weight's gradient summed block by block
// (docs/performance.md, "The loss at a large vocabulary").
//
// Bits: each row's loss and gradient are the plain path's formula (ATen's
// log_softmax and nll_loss over a block of rows; the head's product is
// model/layers/linear.h's, whose blocks are fixed by the shape). What
// differs is the order of the sums over rows (the mean, and the head
// weight's gradient summed block by block), so results match the plain path
// to rounding, not bitwise. LinearCrossEntropyBlockRows is a function of N
// and V alone, never of the thread count or the machine, so a run's bits
// stay reproducible and bitwise resume holds; shapes whose logits fit in one
// block take the plain path unchanged.
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
// embedding); targets: (N,) int64 in [-1, V). Differentiable once with
// respect to x and weight; with gradients on (and x or weight requiring
// them) the forward also takes them, and keeps dx (N, d) and dw (V, d)
// until the backward.
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
