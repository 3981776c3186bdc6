// GatedDeltaNet: the Gated DeltaNet mixer (Yang et al.; fla
// layers/gated_deltanet.py), computed by the gated-delta kernel
// (model/kernels/gated_delta_kernel.h).
//
// With Hg = GdnHeads(config, spec) value heads and Hqk = GdnQkHeads(config,
// spec) query/key heads (Hqk divides Hg; each q, k head serves Hg / Hqk
// consecutive value heads, as GQA's kv heads serve query heads, and as fla's
// num_heads < num_v_heads), of dk = dv = GdnHeadDim(config, spec):
//   qkv = silu(conv([q_proj x, k_proj x, v_proj x]))   (conv only with
//         spec.short_conv: depthwise over the concatenated channels, no bias)
//   q, k = L2-normalised per head (B, T, Hqk, dk), repeated to Hg heads;
//   v (B, T, Hg, dv)
//   beta = sigmoid(b_proj x), g = -exp(A_log) * softplus(a_proj x + dt_bias)
//   o = GatedDelta(q, k, v, g, beta, scale = 1/sqrt(dk))     (B, T, Hg, dv)
//   y = o_proj(RmsNorm_per_head(o, o_norm) * silu(g_proj x))  (B, T, d)
// Parameters: q_proj, k_proj, v_proj, g_proj, o_proj, a_proj, b_proj
// (linear, no bias), A_log, dt_bias (Hg), o_norm (dv, shared by heads) and,
// with short conv, conv (model/layers/short_conv.h).
//
// Decoding keeps the delta-rule state of each value head,
// MixerState::recurrent (B, Hg, dk, dv) (model/kernels/recurrent_scan.h),
// and with short conv the conv's last K - 1 inputs, MixerState::conv (B,
// K - 1, 2 Hqk dk + Hg dv).
//
// Not thread-safe (a module).
//
//   auto mixer = std::make_shared<GatedDeltaNet>(config, spec);
//   torch::Tensor y = mixer->forward(x);  // x, y: (B, T, d_model)
#ifndef HLAB_MODEL_LAYERS_GATED_DELTA_H_
#define HLAB_MODEL_LAYERS_GATED_DELTA_H_

#include <cstdint>

#include <torch/types.h>

#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/layers/mixer.h"
#include "model/layers/recurrent_path.h"
#include "model/layers/short_conv.h"

namespace hlab::model {

class GatedDeltaNet final : public Mixer {
 public:
  // Linears N(0, init_std); o_proj N(0, ResidualInitStd(config));
  // A_log = log U(1, 16); dt_bias as Mamba-2 (InitDtBias); o_norm = 1.
  GatedDeltaNet(const ModelConfig& config, const MixerSpec& spec);

  // x: (B, T, d_model) -> (B, T, d_model), chunked kernel.
  torch::Tensor forward(const torch::Tensor& x) override;
  // Same with the step-by-step recurrence (tests).
  torch::Tensor forward_reference(const torch::Tensor& x) override;
  torch::Tensor prefill(const torch::Tensor& x, MixerState* state) override;
  torch::Tensor step(const torch::Tensor& x, MixerState* state) override;

  // The chunk on the CPU; on a GPU, gpu_chunk() (model_config.h,
  // EffectiveChunk).
  int64_t chunk() const { return chunk_; }
  int64_t gpu_chunk() const { return gpu_chunk_; }

 private:
  torch::Tensor Forward(const torch::Tensor& x, RecurrentPath path,
                        MixerState* state);

  int64_t n_heads_, qk_heads_, head_dim_, chunk_, gpu_chunk_;
  double eps_;
  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, g_proj_{nullptr},
      o_proj_{nullptr}, a_proj_{nullptr}, b_proj_{nullptr};
  ShortConv conv_{nullptr};                 // null without short conv
  torch::Tensor a_log_, dt_bias_, o_norm_;  // (Hg), (Hg), (dv)
};

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_GATED_DELTA_H_
