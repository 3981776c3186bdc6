#include "model/norm.h"

#include <torch/torch.h>

namespace hlab::model {

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                      double eps) {
  const auto stat_dtype =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor xf = x.to(stat_dtype);
  const torch::Tensor inv = torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return (xf * inv * weight.to(stat_dtype)).to(x.scalar_type());
}

torch::Tensor GatedRmsNorm(const torch::Tensor& x, const torch::Tensor& gate,
                           const torch::Tensor& weight, double eps) {
  const auto stat_dtype =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor gated =
      x.to(stat_dtype) * torch::silu(gate.to(stat_dtype));
  return RmsNorm(gated, weight, eps).to(x.scalar_type());
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return RmsNorm(x, weight, eps_);
}

}  // namespace hlab::model
