// DecodeAttention (model/kernels/attention_kernel.h): a query attending to a
// KV cache, with the sink as an extra logit column.
#include <cmath>
#include <cstdint>

#include <torch/torch.h>

#include "model/autocast.h"
#include "model/kernels/attention_kernel.h"

namespace hlab::model {

torch::Tensor DecodeAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v,
                              const torch::Tensor& sink) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 &&
                  k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                  q.size(3) == k.size(3) && k.size(1) > 0 &&
                  q.size(1) % k.size(1) == 0,
              "DecodeAttention: q (B, H, Tq, D), k, v (B, Hkv, L, D) with Hkv "
              "dividing H; got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  ScopedAutocastOff autocast_off;
  torch::NoGradGuard no_grad;
  const int64_t b = q.size(0), h = q.size(1), tq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), g = h / hkv, l = k.size(2);
  const torch::ScalarType stat =
      q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  // Query heads grouped by their KV head: (B, Hkv, G * Tq, D).
  const torch::Tensor qg = q.to(stat).reshape({b, hkv, g * tq, d});
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  torch::Tensor scores =
      torch::matmul(qg, k.to(stat).transpose(-2, -1)) * scale;  // (.., L)
  if (sink.defined()) {
    const torch::Tensor sink_column = sink.to(stat)
                                          .view({1, hkv, g, 1, 1})
                                          .expand({b, hkv, g, tq, 1})
                                          .reshape({b, hkv, g * tq, 1});
    scores = torch::cat({scores, sink_column}, -1);
  }
  const torch::Tensor p = torch::softmax(scores, -1).narrow(-1, 0, l);
  return torch::matmul(p, v.to(stat)).view({b, h, tq, d}).to(q.scalar_type());
}

}  // namespace hlab::model
