// The plain references of model/kernels/attention_kernel.h: NaiveAttention
// (full T x T scores, ordinary autograd) and AttentionProbabilities (analysis).
#include <cmath>
#include <cstdint>
#include <limits>

#include <torch/torch.h>

#include "model/autocast.h"
#include "model/kernels/attention_args.h"
#include "model/kernels/attention_kernel.h"

namespace hlab::model {
namespace {

using internal::CheckArgs;
using internal::Dims;
using internal::StatType;
using internal::VisibleMask;
using model::ScopedAutocastOff;
using torch::Tensor;

// Softmax probabilities with the sink column: (B, H, T, T + 1) or (B, H, T, T)
// without a sink, in the stat dtype, differentiable.
Tensor NaiveProbabilities(const Tensor& q, const Tensor& k, const Tensor& sink,
                          int64_t window, const Dims& dims) {
  const torch::ScalarType stat = StatType(q.scalar_type());
  const Tensor k_rep = dims.g > 1 ? k.repeat_interleave(dims.g, 1) : k;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dims.d));
  Tensor scores = torch::matmul(q, k_rep.transpose(-2, -1)).to(stat) * scale;
  scores =
      scores.masked_fill(VisibleMask(dims.t, window, q.device()).logical_not(),
                         -std::numeric_limits<double>::infinity());
  if (sink.defined()) {
    scores = torch::cat({scores, sink.to(stat)
                                     .view({1, dims.h, 1, 1})
                                     .expand({dims.b, dims.h, dims.t, 1})},
                        -1);
  }
  return torch::softmax(scores, -1);
}

}  // namespace

namespace internal {

Tensor VisibleMask(int64_t t, int64_t window, const torch::Device& device) {
  const auto options =
      torch::TensorOptions().dtype(torch::kInt64).device(device);
  const Tensor delta = torch::arange(t, options).unsqueeze(0) -
                       torch::arange(t, options).unsqueeze(1);  // j - i
  Tensor visible = delta <= 0;
  if (window > 0) visible.logical_and_(delta > -window);
  return visible;
}

}  // namespace internal

torch::Tensor NaiveAttention(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& sink,
                             int64_t window) {
  ScopedAutocastOff autocast_off;
  const Dims dims = CheckArgs(q, k, v, sink, window);
  const Tensor p =
      NaiveProbabilities(q, k, sink, window, dims).narrow(-1, 0, dims.t);
  const Tensor v_rep = dims.g > 1 ? v.repeat_interleave(dims.g, 1) : v;
  return torch::matmul(p.to(q.scalar_type()), v_rep);
}

torch::Tensor AttentionProbabilities(const torch::Tensor& q,
                                     const torch::Tensor& k,
                                     const torch::Tensor& sink,
                                     int64_t window) {
  ScopedAutocastOff autocast_off;
  torch::NoGradGuard no_grad;
  const Dims dims = CheckArgs(q, k, k, sink, window);
  return NaiveProbabilities(q, k, sink, window, dims)
      .narrow(-1, 0, dims.t)
      .to(torch::kFloat32);
}

}  // namespace hlab::model
