#include "eval/gradient_profile.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"

namespace hlab::eval {

absl::StatusOr<GradientProfileResult> ProfileGradients(
    model::HybridLM& model, const std::vector<std::vector<int32_t>>& sequences,
    int64_t batch_sequences) {
  if (sequences.empty()) {
    return absl::InvalidArgumentError("gradient profile: no sequences");
  }
  if (batch_sequences <= 0) {
    return absl::InvalidArgumentError(
        "gradient profile: batch_sequences must be > 0");
  }
  const int64_t t = static_cast<int64_t>(sequences[0].size()) - 1;
  if (t < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient profile: sequences need at least 9 tokens, got ", t + 1));
  }
  for (const auto& s : sequences) {
    if (static_cast<int64_t>(s.size()) != t + 1) {
      return absl::InvalidArgumentError(
          "gradient profile: sequences differ in length");
    }
  }
  const bool was_training = model->is_training();
  model->eval();
  std::vector<double> sums(static_cast<size_t>(t), 0.0);
  const int64_t n = static_cast<int64_t>(sequences.size());
  for (int64_t first = 0; first < n; first += batch_sequences) {
    const int64_t count = std::min(batch_sequences, n - first);
    torch::Tensor tokens = torch::empty({count, t + 1}, torch::kInt64);
    auto acc = tokens.accessor<int64_t, 2>();
    for (int64_t b = 0; b < count; ++b) {
      for (int64_t j = 0; j <= t; ++j) {
        acc[b][j] =
            sequences[static_cast<size_t>(first + b)][static_cast<size_t>(j)];
      }
    }
    // The embeddings are a leaf of their own: the gradient flows to them
    // and not into the embedding table.
    torch::Tensor x;
    {
      torch::NoGradGuard no_grad;
      x = model->embedding(tokens.narrow(1, 0, t));
    }
    x = x.detach().requires_grad_(true);
    const torch::Tensor logits = model->forward_embedded(x);  // (B, T, V)
    const torch::Tensor targets = tokens.select(1, t);        // (B)
    // Sequences are independent: the sum's gradient holds each one's own.
    const torch::Tensor s =
        logits.select(1, t - 1).gather(1, targets.unsqueeze(1)).sum();
    const torch::Tensor grad =
        torch::autograd::grad({s}, {x})[0].to(torch::kFloat64);
    const torch::Tensor norms = grad.norm(2, -1).sum(0);  // (T), by position
    auto norm = norms.accessor<double, 1>();
    for (int64_t d = 0; d < t; ++d)
      sums[static_cast<size_t>(d)] += norm[t - 1 - d];
  }
  if (was_training) model->train();

  GradientProfileResult r;
  r.sequences = n;
  r.distances.resize(static_cast<size_t>(t));
  for (int64_t d = 0; d < t; ++d) {
    r.distances[static_cast<size_t>(d)] =
        sums[static_cast<size_t>(d)] / static_cast<double>(n);
  }
  const int64_t far = (3 * t) / 4;
  for (int64_t d = far; d < t; ++d)
    r.baseline += r.distances[static_cast<size_t>(d)];
  r.baseline /= static_cast<double>(t - far);
  // Bins [0, 1), [1, 2), [2, 4), ...
  for (int64_t from = 0, to = 1; from < t;
       from = to, to = std::min(t, 2 * to)) {
    GradientBin bin{.from = from, .to = to};
    for (int64_t d = from; d < to; ++d)
      bin.g += r.distances[static_cast<size_t>(d)];
    bin.g /= static_cast<double>(to - from);
    bin.ratio = r.baseline > 0 ? bin.g / r.baseline : 0;
    r.bins.push_back(bin);
    if (to == t) break;
  }
  // The first bin from which every bin is within kReachFactor of the floor
  // (t: not even the farthest bin is).
  r.reach = t;
  for (size_t i = r.bins.size(); i-- > 0;) {
    if (r.bins[i].g > kReachFactor * r.baseline) break;
    r.reach = r.bins[i].from;
  }
  return r;
}

}  // namespace hlab::eval
