// Causal softmax attention with GQA, a sliding window and a learnable sink:
// a blockwise (FlashAttention-2 style) kernel for training, and plain
// references for tests and analysis.
//
// Semantics, for query head h at position i and its KV head h / G (G = H /
// Hkv query heads share one KV head):
//   s_ij = q_i . k_j / sqrt(D)    for visible keys j: j <= i, and i - w < j
//                                 when window w > 0 (w keys, itself included)
//   o_i  = sum_j exp(s_ij) v_j / (exp(sink_h) + sum_j exp(s_ij))
// The sink is a per-head logit with no value: it only enlarges the softmax
// denominator (gpt-oss). An undefined sink tensor means no sink.
//
// BlockwiseAttention never materialises a T x T tensor: memory is O(T) for a
// fixed block size, and a window w visits only the key blocks that intersect
// it, so time is O(T * w). It is differentiable (a custom autograd function)
// with respect to q, k, v and sink, once (no double backward).
//
// Precision: matmuls take the input dtype (float64, float32 or bfloat16);
// the softmax statistics (running max, logsumexp, row sums) and the gradient
// accumulators are fp32 (fp64 for fp64 input). CPU autocast is disabled inside
// the kernel, so bf16 q/k/v under autocast give bf16 matmuls. On the CPU the
// block loops are fused (AttentionBlocks::fused_loops): bf16 blocks multiply
// through oneDNN's bf16 x bf16 -> fp32 GEMM, so scores and products stay fp32
// and only P and dS are rounded to bf16, once per block, as the next
// matmul's input.
//
// On CUDA, BlockwiseAttention runs LibTorch's FlashAttention-2 kernels with
// the sink folded into their log-sum-exp when they can take the inputs
// (model/kernels/flash_attention.h; AttentionBlocks::flash).
//
// Threads: BlockwiseAttention spreads its blocks over the intra-op threads
// (at::get_num_threads()) in one parallel region per pass, with ATen ops and
// BLAS single-threaded inside it; on 2 cores this is several times faster
// than letting every small op parallelise itself. While it runs, OpenBLAS
// (when it is the BLAS) is set to one thread process-wide and then restored.
//
// Thread-safe: pure functions of their inputs (but see the OpenBLAS note:
// concurrent calls from several threads may leave OpenBLAS single-threaded).
//
//   // q: (B, H, T, D); k, v: (B, Hkv, T, D); sink: (H)
//   torch::Tensor o = BlockwiseAttention(q, k, v, sink, /*window=*/128);
//   torch::Tensor ref = NaiveAttention(q, k, v, sink, 128);  // same, O(T^2)
//   o.sum().backward();
#ifndef HLAB_MODEL_KERNELS_ATTENTION_KERNEL_H_
#define HLAB_MODEL_KERNELS_ATTENTION_KERNEL_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model {

// Block sizes, in positions, of the blockwise kernel. A query block holds
// `query` positions of every query head of a KV group (G * query rows); key
// blocks hold `key` positions. T need not be a multiple of either.
//
// query = 0 (the default) picks by window and dtype: 32 for 0 < window <=
// 256, else 64, or 128 for bf16. The measurements behind these sizes are in
// docs/performance.md, "Measurements behind defaults in code".
//
// flash: on CUDA, run LibTorch's FlashAttention-2 kernels with the sink
// folded into their log-sum-exp (model/kernels/flash_attention.h) whenever
// they can take the inputs (bf16 or fp16, head dim a multiple of 8 up to
// 256, LibTorch >= 2.6); under CUDA bf16 autocast, fp32 q, k, v are cast to
// bf16 for them, as autocast casts LibTorch's own attention. Off: the
// blockwise ATen loops below, on any device. Ignored on the CPU.
//
// fused_loops: run each block pair as direct GEMM calls (model/cpu/
// blas.h: OpenBLAS for fp32 and fp64, oneDNN's bf16 x bf16 -> fp32 GEMM for
// bf16) and plain row loops for the softmax (model/cpu/
// fused_attention.h), instead of a dozen ATen ops per block. On by default; the
// ATen loop runs when it is off, for non-CPU tensors, or when the GEMM entry
// points are not in the process.
struct AttentionBlocks {
  int64_t query = 0;
  int64_t key = 256;
  bool fused_loops = true;
  bool flash = true;
};

// q: (B, H, T, D); k, v: (B, Hkv, T, D) with H % Hkv == 0; sink: (H) or
// undefined; window: 0 = causal over all previous keys, w > 0 = the last w
// keys. Returns (B, H, T, D) in q's dtype, the transpose of a contiguous
// (B, T, H, D) tensor (out.transpose(1, 2) is contiguous: the output
// projection's input without a copy). q, k and v must share a dtype
// (float64, float32 or bfloat16); sink may have any floating dtype.
torch::Tensor BlockwiseAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v,
                                 const torch::Tensor& sink, int64_t window,
                                 const AttentionBlocks& blocks = {});

// The plain reference with the same contract: full (B, H, T, T) scores in
// fp32 (fp64 for fp64 input), masked_fill(-inf), the sink concatenated as an
// extra logit column, softmax, the column dropped; K/V repeated to H heads.
// Differentiable by ordinary autograd. O(T^2) memory.
torch::Tensor NaiveAttention(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& sink,
                             int64_t window);

// Decoding: the attention of queries that come after every key (a KV cache):
// q: (B, H, Tq, D), k, v: (B, Hkv, L, D), sink (H) or undefined; each query
// sees all L keys (the caller keeps only the visible ones). Scores, softmax
// and products in fp32 (fp64 for fp64 input), autocast off; returns (B, H,
// Tq, D) in q's dtype. Not differentiable (inference).
torch::Tensor DecodeAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v,
                              const torch::Tensor& sink);

// Attention probabilities for analysis at small T: (B, H, T, T) in fp32, with
// the sink's share excluded, so row i sums to 1 - p_sink(i) and is zero for
// invisible keys. Same argument contract as BlockwiseAttention (without v).
// Not differentiable (computed under NoGradGuard).
torch::Tensor AttentionProbabilities(const torch::Tensor& q,
                                     const torch::Tensor& k,
                                     const torch::Tensor& sink, int64_t window);

}  // namespace hlab::model

#endif  // HLAB_MODEL_KERNELS_ATTENTION_KERNEL_H_
