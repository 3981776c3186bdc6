#include "model/feed_forward.h"

#include <torch/torch.h>

namespace hlab::model {

SwiGLUImpl::SwiGLUImpl(int64_t d_model, int64_t hidden, double init_std,
                       double out_std) {
  auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  gate_proj = register_module("gate_proj", linear(d_model, hidden));
  up_proj = register_module("up_proj", linear(d_model, hidden));
  down_proj = register_module("down_proj", linear(hidden, d_model));
  torch::NoGradGuard no_grad;
  gate_proj->weight.normal_(0.0, init_std);
  up_proj->weight.normal_(0.0, init_std);
  down_proj->weight.normal_(0.0, out_std);
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  return down_proj(torch::silu(gate_proj(x)) * up_proj(x));
}

}  // namespace hlab::model
