#include "eval/token_scorer.h"

#include <algorithm>

#include <torch/torch.h>

namespace hlab::eval {

std::vector<std::vector<float>> TokenScorer::ScoreBatch(
    const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<std::vector<float>> out;
  out.reserve(sequences.size());
  for (const auto& s : sequences) out.push_back(Score(s));
  return out;
}

std::vector<float> ModelScorer::Score(const std::vector<int32_t>& tokens) {
  return ScoreBatch({tokens}).front();
}

std::vector<std::vector<float>> ModelScorer::ScoreBatch(
    const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<std::vector<float>> out(sequences.size());
  int64_t longest = 0;
  for (const auto& s : sequences) {
    longest = std::max(longest, static_cast<int64_t>(s.size()));
  }
  if (longest < 2) return out;
  // ids: (B, longest), right-padded with token 0 (never seen by the real
  // positions of a causal model; their outputs are dropped).
  const int64_t batch = static_cast<int64_t>(sequences.size());
  std::vector<int64_t> flat(static_cast<size_t>(batch * longest), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const auto& s = sequences[static_cast<size_t>(b)];
    std::copy(s.begin(), s.end(), flat.begin() + b * longest);
  }
  torch::InferenceMode inference;
  model_->eval();
  torch::Tensor ids = torch::from_blob(flat.data(), {batch, longest},
                                       torch::kInt64);  // (B, T+1)
  torch::Tensor logits =
      model_->forward(ids.narrow(1, 0, longest - 1));  // (B, T, V)
  torch::Tensor nll =
      -torch::log_softmax(logits.to(torch::kFloat32), -1)
           .gather(-1, ids.narrow(1, 1, longest - 1).unsqueeze(-1))
           .squeeze(-1)
           .contiguous();  // (B, T)
  const float* data = nll.data_ptr<float>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n =
        static_cast<int64_t>(sequences[static_cast<size_t>(b)].size());
    if (n < 2) continue;
    const float* row = data + b * (longest - 1);
    out[static_cast<size_t>(b)].assign(row, row + n - 1);
  }
  return out;
}

}  // namespace hlab::eval
