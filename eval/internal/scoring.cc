#include "eval/internal/scoring.h"

#include <algorithm>
#include <map>

#include <torch/torch.h>

namespace hlab::eval::internal {
namespace {

// Tokens per batched forward in ScoreBatchWith: bounds the activations (the
// logits are bounded by the model's NllFn).
constexpr int64_t kBatchTokens = 65536;

}  // namespace

std::vector<std::vector<float>> ScoreBatchWith(
    const NllFn& nll_fn, torch::Device device,
    const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<std::vector<float>> out(sequences.size());
  // Sequences of equal length share a forward pass.
  std::map<size_t, std::vector<size_t>> by_length;
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (sequences[i].size() >= 2) by_length[sequences[i].size()].push_back(i);
  }
  torch::InferenceMode inference;
  for (const auto& [length, rows] : by_length) {
    const int64_t n = static_cast<int64_t>(length);
    const size_t per_batch =
        static_cast<size_t>(std::max<int64_t>(1, kBatchTokens / n));
    for (size_t begin = 0; begin < rows.size(); begin += per_batch) {
      const size_t end = std::min(rows.size(), begin + per_batch);
      std::vector<int32_t> flat;
      flat.reserve((end - begin) * length);
      for (size_t r = begin; r < end; ++r) {
        const std::vector<int32_t>& s = sequences[rows[r]];
        flat.insert(flat.end(), s.begin(), s.end());
      }
      torch::Tensor ids = torch::tensor(flat, torch::kInt64)
                              .view({static_cast<int64_t>(end - begin), n})
                              .to(device);  // (B, n)
      torch::Tensor nll =
          nll_fn(ids.narrow(1, 0, n - 1), ids.narrow(1, 1, n - 1))
              .to(torch::kCPU, torch::kFloat32)
              .contiguous();  // (B, n-1)
      const float* data = nll.data_ptr<float>();
      for (size_t r = begin; r < end; ++r) {
        const float* row = data + (r - begin) * static_cast<size_t>(n - 1);
        out[rows[r]].assign(row, row + n - 1);
      }
    }
  }
  return out;
}

absl::StatusOr<int32_t> NextTokenWith(const LogitsFn& logits_fn,
                                      torch::Device device,
                                      const std::vector<int32_t>& prefix) {
  if (prefix.empty()) {
    return absl::InvalidArgumentError("NextToken: the prefix is empty");
  }
  torch::InferenceMode inference;
  torch::Tensor ids =
      torch::tensor(prefix, torch::kInt64).unsqueeze(0).to(device);  // (1, n)
  torch::Tensor logits = logits_fn(ids);  // (1, n, V)
  // argmax returns the first maximum: the lowest id on ties.
  return static_cast<int32_t>(logits.select(1, logits.size(1) - 1)
                                  .to(torch::kFloat32)
                                  .argmax(-1)
                                  .item<int64_t>());
}

}  // namespace hlab::eval::internal
