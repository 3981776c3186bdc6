// The scoring loop every TokenScorer over a LibTorch model shares
// (ModelScorer for a HybridLM, LlamaScorer for a Hugging Face Llama):
// sequences of equal length batched into one forward pass of at most
// kBatchTokens tokens, each scored by the model's own per-token NLL (which
// bounds its logits: model/kernels/linear_cross_entropy.h), and the greedy
// next token.
//
// Thread-safety: as safe as `nll` and `logits`; the functions keep no state.
//
//   NllFn nll = [&](const torch::Tensor& in, const torch::Tensor& target) {
//     return m->token_nll(in, target);
//   };
//   auto scores = ScoreBatchWith(nll, device, sequences);
#ifndef HLAB_EVAL_INTERNAL_SCORING_H_
#define HLAB_EVAL_INTERNAL_SCORING_H_

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "absl/status/statusor.h"

namespace hlab::eval::internal {

// ids: (B, n) int64 on the model's device -> logits (B, m, V) whose last
// position is the last id's (m = n, or 1: the last position alone), any
// float dtype, run in inference mode.
using LogitsFn = std::function<torch::Tensor(const torch::Tensor& ids)>;

// inputs, targets: (B, n) int64 on the model's device -> -log p(target)
// (B, n), fp32, run in inference mode.
using NllFn = std::function<torch::Tensor(const torch::Tensor& inputs,
                                          const torch::Tensor& targets)>;

// TokenScorer::ScoreBatch's contract (eval/token_scorer_interface.h).
std::vector<std::vector<float>> ScoreBatchWith(
    const NllFn& nll, torch::Device device,
    const std::vector<std::vector<int32_t>>& sequences);

// TokenScorer::NextToken's contract; InvalidArgument for an empty prefix.
absl::StatusOr<int32_t> NextTokenWith(const LogitsFn& logits,
                                      torch::Device device,
                                      const std::vector<int32_t>& prefix);

}  // namespace hlab::eval::internal

#endif  // HLAB_EVAL_INTERNAL_SCORING_H_
