// RMSNorm, the residual add fused with it, and gated RMSNorm, computed in
// fp32 whatever the input dtype.
//
// LibTorch 1.13 has no rms_norm op: on the CPU (float, double, bfloat16)
// RmsNorm is one fused pass forward and one backward (one autograd node,
// differentiable once; the weight gradient is summed in a fixed order, so
// it does not depend on the thread count); elsewhere it is LibTorch ops.
// Not thread-safe (a module).
//
//   RMSNorm norm(256, 1e-6);
//   torch::Tensor y = norm->forward(x);            // x: (..., 256)
//   auto [h, n] = AddRmsNorm(x, branch, norm->weight, norm->eps());
//   torch::Tensor z = GatedRmsNorm(y, gate, w, eps);  // norm(y silu(gate)) w
#ifndef HLAB_MODEL_LAYERS_NORM_H_
#define HLAB_MODEL_LAYERS_NORM_H_

#include <cstdint>
#include <optional>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace hlab::model {

// y = x * rsqrt(mean(x^2, -1) + eps) * weight, over the last dimension.
// The statistics are fp32 (fp64 for fp64 input); the result has out_dtype,
// x's when unset (bf16 for a bf16 consumer, a linear under autocast, saves
// it a rounding pass with the same values).
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                      double eps,
                      std::optional<torch::ScalarType> out_dtype = {});

// A residual add and the RMSNorm that reads its result.
struct NormedSum {
  torch::Tensor sum;     // x + delta, in x's dtype
  torch::Tensor normed;  // RmsNorm(sum, weight, eps), in out_dtype
};

// x + delta and its RMSNorm, as the composition gives them. On the CPU (x
// fp32 with delta fp32 or bf16 and out_dtype fp32 or bf16, or all fp64) one
// pass each way and one autograd node: the sum is formed row by row as the
// norm reads it, and the backward adds the sum's own gradient (the
// residual stream's, from further on) to the norm's in the same pass and
// writes delta's gradient in delta's dtype, where the composition takes an
// add forward, and an add and a dtype cast back. Elsewhere LibTorch ops.
NormedSum AddRmsNorm(const torch::Tensor& x, const torch::Tensor& delta,
                     const torch::Tensor& weight, double eps,
                     std::optional<torch::ScalarType> out_dtype = {});

// Where a gated RMSNorm applies its gate a = act(gate).
enum class GatedNormOrder {
  // RmsNorm(x * a) * weight: Mamba-2's (norm_before_gate=False).
  kGateThenNorm,
  // RmsNorm(x) * weight * a: GDN's (fla's FusedRMSNormGated), Lightning's.
  kNormThenGate,
};

// The gate's activation.
enum class GateActivation {
  kSilu,     // Mamba-2's and GDN's
  kSigmoid,  // Lightning's output gate
};

struct GatedNormOptions {
  GatedNormOrder order = GatedNormOrder::kGateThenNorm;
  GateActivation activation = GateActivation::kSilu;
  // The result's dtype; x's when unset. bf16 for a bf16 consumer (a linear
  // under autocast) saves it a rounding pass, with the same values.
  std::optional<torch::ScalarType> out_dtype;
};

// The mixers' gated output norm over the last dimension; x and gate have
// the same shape. Statistics and arithmetic in fp32 (fp64 for fp64 input).
// On the CPU (x and gate fp32 or bf16, or both fp64) one fused pass each
// way, differentiable once, with a weight gradient summed in a fixed order;
// elsewhere LibTorch ops.
torch::Tensor GatedRmsNorm(const torch::Tensor& x, const torch::Tensor& gate,
                           const torch::Tensor& weight, double eps,
                           const GatedNormOptions& options = {});

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  // x: (..., dim) -> (..., dim)
  torch::Tensor forward(const torch::Tensor& x);
  double eps() const { return eps_; }

  torch::Tensor weight;  // (dim), initialised to 1

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_NORM_H_
