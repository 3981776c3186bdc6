// SwiGLU feed-forward block: down(silu(gate(x)) * up(x)), no biases.
//
// Not thread-safe (a module).
//
//   SwiGLU ffn(256, 704, /*init_std=*/0.02, /*out_std=*/0.01);
//   torch::Tensor y = ffn->forward(x);  // x: (B, T, 256) -> (B, T, 256)
#ifndef HLAB_MODEL_LAYERS_FEED_FORWARD_H_
#define HLAB_MODEL_LAYERS_FEED_FORWARD_H_

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "model/layers/linear.h"

namespace hlab::model {

// silu(a) * b, element-wise, in a's dtype. On the CPU (float, double,
// bfloat16) one fused pass forward and one backward, with bf16 results
// rounded once; elsewhere the LibTorch ops. Differentiable once.
torch::Tensor SwiGluProduct(const torch::Tensor& a, const torch::Tensor& b);

class SwiGLUImpl : public torch::nn::Module {
 public:
  // gate_proj, up_proj ~ N(0, init_std); down_proj ~ N(0, out_std).
  SwiGLUImpl(int64_t d_model, int64_t hidden, double init_std, double out_std);
  // x: (..., d_model) -> (..., d_model)
  torch::Tensor forward(const torch::Tensor& x);

  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(SwiGLU);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_FEED_FORWARD_H_
