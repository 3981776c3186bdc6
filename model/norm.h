// RMSNorm and gated RMSNorm, computed in fp32 whatever the input dtype.
//
// LibTorch 1.13 has no rms_norm op: on the CPU (float, double, bfloat16)
// RmsNorm is one fused pass forward and one backward (one autograd node,
// differentiable once; the weight gradient is summed in a fixed order, so
// it does not depend on the thread count); elsewhere it is LibTorch ops.
// Not thread-safe (a module).
//
//   RMSNorm norm(256, 1e-6);
//   torch::Tensor y = norm->forward(x);            // x: (..., 256)
//   torch::Tensor z = GatedRmsNorm(y, gate, w, eps);  // norm(y * silu(gate)) *
//   w
#ifndef HLAB_MODEL_NORM_H_
#define HLAB_MODEL_NORM_H_

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace hlab::model {

// y = x * rsqrt(mean(x^2, -1) + eps) * weight, over the last dimension.
// The statistics are fp32 (fp64 for fp64 input); the result has x's dtype.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                      double eps);

// Mamba-2 / GDN output norm with norm_before_gate=False:
// RmsNorm(x * silu(gate)) * weight.
torch::Tensor GatedRmsNorm(const torch::Tensor& x, const torch::Tensor& gate,
                           const torch::Tensor& weight, double eps);

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  // x: (..., dim) -> (..., dim)
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;  // (dim), initialised to 1

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace hlab::model

#endif  // HLAB_MODEL_NORM_H_
