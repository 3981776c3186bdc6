// Lightning: Lightning attention (Qin et al., Lightning Attention-2 and
// TransNormerLLM; MiniMax-01's layer), linear attention with a constant
// per-head, per-layer decay, computed by the scalar-GLA kernel
// (model/kernels/scalar_gla_kernel.h). docs/models.md, "Lightning", says which
// part follows which source.
//
// For x: (B, T, d), with H = n_heads, Hkv = n_kv_heads, dh = head_dim, layer
// l of L:
//   q = silu(q_proj x)                  (B, T, H, dh)
//   k = silu(k_proj x), v = silu(v_proj x)   (B, T, Hkv, dh), each KV head
//       serving its GQA group of query heads (each query head has its own
//       state); q, k, v and the gate's first factor are one product
//   o = ScalarGla(q, k, v, g_h = -s_h c_l, scale = 1/sqrt(dh)) (B, T, H, dh)
//   y = o_proj(RmsNorm_{H*dh}(o) * sigmoid(gate_up(gate_down x)))  (B, T, d)
// with slopes s_h = 2^(-8h/H), h = 1..H (ALiBi; for H not a power of two the
// slopes of the closest lower power of two plus every other slope of the next
// one) and the layer factor c_l = 1 - l / (L - 1) + 1e-5 (1 for L = 1): the
// first layer forgets fastest, the deepest barely. The gate is low-rank,
// d -> dh -> H dh. Parameters: q_proj, k_proj, v_proj, gate_down, gate_up,
// o_proj (linear, no bias), out_norm (H*dh); buffer `slopes` (H, with c_l).
//
// Decoding keeps the recurrent state S of each query head,
// MixerState::recurrent (B, H, dh, dh) (model/kernels/recurrent_scan.h).
//
// Not thread-safe (a module).
//
//   auto mixer = std::make_shared<Lightning>(config, spec);
//   torch::Tensor y = mixer->forward(x);  // x, y: (B, T, d_model)
#ifndef HLAB_MODEL_LAYERS_LIGHTNING_H_
#define HLAB_MODEL_LAYERS_LIGHTNING_H_

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "model/config/model_config.h"
#include "model/layers/linear.h"
#include "model/layers/mixer.h"
#include "model/layers/recurrent_path.h"

namespace hlab::model {

// ALiBi slopes for n_heads heads (Press et al.; OpenNLPLab
// _build_slope_tensor): 2^(-8h/n) for h = 1..n when n is a power of two.
std::vector<double> AlibiSlopes(int64_t n_heads);

// The per-layer factor of the slopes, 1 - layer / (n_layers - 1) + 1e-5
// (TransNormerLLM, MiniMax-01); 1 for a one-layer model.
double LightningLayerDecayFactor(int64_t layer_index, int64_t n_layers);

class Lightning final : public Mixer {
 public:
  // Linears N(0, init_std); o_proj N(0, ResidualInitStd(config)); norm 1.
  // layer_index: this layer's place in the model (the decay's factor).
  Lightning(const ModelConfig& config, const MixerSpec& spec,
            int64_t layer_index);

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

  int64_t n_heads_, n_kv_heads_, head_dim_, chunk_;
  double eps_;
  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr},
      gate_down_{nullptr}, gate_up_{nullptr}, o_proj_{nullptr};
  torch::Tensor out_norm_;  // RMSNorm weight (H*dh)
  torch::Tensor slopes_;    // (H) buffer: s_h c_l
};

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_LIGHTNING_H_
