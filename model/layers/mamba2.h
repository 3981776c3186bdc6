// Mamba2: the Mamba-2 (SSD) mixer with ngroups = 1, computed by the scalar-GLA
// kernel (model/kernels/scalar_gla_kernel.h).
//
// With di = ssm_expand * d, P = ssm_head_dim, Hm = di / P, N = ssm_state:
//   [z (di), xBC (di + 2N), dt (Hm)] = in_proj x
//   xBC = silu(conv(xBC))                  (conv only with spec.short_conv)
//   [x (B, T, Hm, P), Bm (B, T, N), Cm (B, T, N)] = xBC
//   dt = softplus(dt + dt_bias), A = -exp(A_log)            (Hm)
//   y = ScalarGla(q = Cm, k = Bm (shared by heads), v = x * dt, g = dt * A,
//                 scale 1) + D * x                          (B, T, Hm, P)
//   out = out_proj(GatedRmsNorm(y, z, norm_weight))         (B, T, d)
// Parameters: in_proj, out_proj (linear, no bias), A_log, dt_bias, D (Hm),
// norm_weight (di) and, with short conv, conv (depthwise over xBC, with bias,
// kernel spec.conv_size; model/layers/short_conv.h).
//
// Decoding keeps the SSM state of each head, MixerState::recurrent (B, Hm,
// N, P) (model/kernels/recurrent_scan.h), and with short conv the conv's
// last K - 1 inputs, MixerState::conv (B, K - 1, di + 2N).
//
// Not thread-safe (a module).
//
//   auto mixer = std::make_shared<Mamba2>(config, spec);
//   torch::Tensor y = mixer->forward(x);  // x, y: (B, T, d_model)
#ifndef HLAB_MODEL_LAYERS_MAMBA2_H_
#define HLAB_MODEL_LAYERS_MAMBA2_H_

#include <cstdint>

#include <torch/types.h>

#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/layers/mixer.h"
#include "model/layers/recurrent_path.h"
#include "model/layers/short_conv.h"

namespace hlab::model {

// Mamba-2's dt_bias initialisation, also used by Gated DeltaNet: the inverse
// softplus of dt ~ logUniform(1e-3, 0.1), dt clamped at >= 1e-4. (heads), fp32.
torch::Tensor InitDtBias(int64_t heads);

// A_log = log(U(1, 16)): (heads), fp32.
torch::Tensor InitALog(int64_t heads);

class Mamba2 final : public Mixer {
 public:
  // in_proj N(0, init_std); out_proj N(0, ResidualInitStd(config)); A_log,
  // dt_bias as above; D = 1; norm_weight = 1.
  Mamba2(const ModelConfig& config, const MixerSpec& spec);

  // x: (B, T, d_model) -> (B, T, d_model), chunked kernel.
  torch::Tensor forward(const torch::Tensor& x) override;
  // Same with the step-by-step recurrence (tests).
  torch::Tensor forward_reference(const torch::Tensor& x) override;
  torch::Tensor prefill(const torch::Tensor& x, MixerState* state) override;
  torch::Tensor step(const torch::Tensor& x, MixerState* state) override;

  int64_t chunk() const { return chunk_; }

 private:
  torch::Tensor Forward(const torch::Tensor& x, RecurrentPath path,
                        MixerState* state);

  int64_t d_inner_, head_dim_, n_heads_, state_, chunk_;
  double eps_;
  Linear in_proj_{nullptr}, out_proj_{nullptr};
  ShortConv conv_{nullptr};  // null without short conv
  torch::Tensor a_log_, dt_bias_, d_skip_, norm_weight_;  // (Hm) x3, (di)
};

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_MAMBA2_H_
