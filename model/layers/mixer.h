// Mixer: the interface of every sequence mixer (one per layer).
//
// A mixer maps x: (B, T, d_model) -> (B, T, d_model) causally: output t
// depends on inputs 0..t only. Implementations: Attention (full, SWA,
// head-wise SWA; model/layers/attention.h), Lightning
// (model/layers/lightning.h), Mamba2 (model/layers/mamba2.h), GatedDeltaNet
// (model/layers/gated_delta.h).
//
// Decoding (generation) runs a mixer incrementally: prefill(x, &state) is
// forward(x) that also leaves in `state` what the mixer needs of x's tokens,
// and step(x1, &state) gives the output of one more token from that state
// alone, as forward would give it at the end of the whole sequence (equal up
// to rounding: the chunked and blocked forwards sum in another order). Each
// mixer documents which MixerState fields it keeps.
//
// Not thread-safe: a module is used by one thread at a time (LibTorch's
// intra-op threads parallelise inside ops).
//
//   std::shared_ptr<Mixer> mixer = MakeMixer(config, config.layers[i], i);
//   torch::Tensor y = mixer->forward(x);  // x: (B, T, d)
//   MixerState state;
//   torch::Tensor y_prompt = mixer->prefill(x, &state);  // as forward(x)
//   torch::Tensor y_next = mixer->step(x_next, &state);  // x_next: (B, 1, d)
#ifndef HLAB_MODEL_LAYERS_MIXER_H_
#define HLAB_MODEL_LAYERS_MIXER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "model/config/model_config.h"

namespace hlab::model {

// What a mixer keeps of the tokens it has seen, for step(). A mixer uses the
// fields its header names; the others stay undefined. Starts empty (no
// tokens); only prefill() and step() of one mixer may change it.
struct MixerState {
  // Softmax attention: one entry per head group (Attention's windows), the
  // keys (rotated where the group has RoPE) and values of the tokens the
  // group still sees, (B, Hkv of the group, L, dh); a windowed group keeps
  // its last `window` tokens, a full one all of them.
  std::vector<torch::Tensor> keys, values;
  // Lightning, Mamba-2, Gated DeltaNet: the recurrent state S, (B, H, dk,
  // dv) in the kernels' compute dtype (fp32, fp64 for fp64 input).
  torch::Tensor recurrent;
  // A mixer with a short convolution: its last K - 1 inputs, (B, K - 1, C)
  // (zeros before the first token).
  torch::Tensor conv;
  // Tokens seen: the position of the next one (RoPE).
  int64_t position = 0;
};

class Mixer : public torch::nn::Module {
 public:
  ~Mixer() override = default;

  // x: (B, T, d_model) -> (B, T, d_model).
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;

  // The step-by-step recurrent (or per-query loop) form of the same mixer,
  // used as the reference in tests. Same contract as forward(); slow.
  virtual torch::Tensor forward_reference(const torch::Tensor& x) = 0;

  // Decoding, for inference: call under torch::InferenceMode (the state is
  // not differentiable). A new mixer must implement both. prefill:
  // x: (B, T, d_model) -> forward(x), computed the same way, and *state
  // replaced by the state after x's tokens. step: x: (B, 1, d_model), the
  // token after those *state has seen -> (B, 1, d_model), and *state
  // advanced by it.
  virtual torch::Tensor prefill(const torch::Tensor& x, MixerState* state) = 0;
  virtual torch::Tensor step(const torch::Tensor& x, MixerState* state) = 0;
};

// Standard deviation of residual-output projections: init_std / sqrt(2L).
double ResidualInitStd(const ModelConfig& config);

// Builds the mixer for `spec` in layer `layer_index` of `config` (which must be
// valid), initialised as the module documents.
std::shared_ptr<Mixer> MakeMixer(const ModelConfig& config,
                                 const MixerSpec& spec, int64_t layer_index);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_MIXER_H_
