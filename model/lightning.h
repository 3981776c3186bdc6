// Lightning: HypeNet-style Lightning attention, linear attention with a
// constant per-head decay (ALiBi slopes), computed by the scalar-GLA kernel
// (model/scalar_gla_kernel.h).
//
// For x: (B, T, d), with H = n_heads, Hkv = n_kv_heads, dh = head_dim:
//   q = RmsNorm_dh(q_proj x)            (B, T, H, dh), q_norm shared by heads
//   k = RmsNorm_dh(k_proj x), v = v_proj x   (B, T, Hkv, dh), each KV head
//       serving its GQA group of query heads (each query head has its own
//       state); q, k, v and the gate are one concatenated product
//   o = ScalarGla(q, k, v, g_h = -s_h, scale = 1/sqrt(dh))   (B, T, H, dh)
//   y = o_proj(RmsNorm_{H*dh}(o) * sigmoid(gate x))          (B, T, d)
// with slopes s_h = 2^(-8h/H), h = 1..H (ALiBi; for H not a power of two the
// slopes of the closest lower power of two plus every other slope of the next
// one). Parameters: q_proj, k_proj, v_proj, gate, o_proj (linear, no bias),
// q_norm (dh), k_norm (dh), out_norm (H*dh); buffer `slopes` (H).
//
// Not thread-safe (a module).
//
//   auto mixer = std::make_shared<Lightning>(config, spec);
//   torch::Tensor y = mixer->forward(x);  // x, y: (B, T, d_model)
#ifndef HLAB_MODEL_LIGHTNING_H_
#define HLAB_MODEL_LIGHTNING_H_

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "model/config/model_config.h"
#include "model/linear.h"
#include "model/mixer.h"

namespace hlab::model {

// ALiBi slopes for n_heads heads (Press et al.; OpenNLPLab
// _build_slope_tensor): 2^(-8h/n) for h = 1..n when n is a power of two.
std::vector<double> AlibiSlopes(int64_t n_heads);

class Lightning final : public Mixer {
 public:
  // Linears N(0, init_std); o_proj N(0, ResidualInitStd(config)); norms 1.
  Lightning(const ModelConfig& config, const MixerSpec& spec);

  // x: (B, T, d_model) -> (B, T, d_model), chunked kernel.
  torch::Tensor forward(const torch::Tensor& x) override;
  // Same with the step-by-step recurrence (tests).
  torch::Tensor forward_reference(const torch::Tensor& x) override;

  int64_t chunk() const { return chunk_; }

 private:
  // use_chunked: ChunkedScalarGla, else RecurrentScalarGla.
  torch::Tensor Forward(const torch::Tensor& x, bool use_chunked);

  int64_t n_heads_, n_kv_heads_, head_dim_, chunk_;
  double eps_;
  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, gate_{nullptr},
      o_proj_{nullptr};
  torch::Tensor q_norm_, k_norm_, out_norm_;  // RMSNorm weights
  torch::Tensor slopes_;                      // (H) buffer
};

}  // namespace hlab::model

#endif  // HLAB_MODEL_LIGHTNING_H_
