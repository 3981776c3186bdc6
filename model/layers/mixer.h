// Mixer: the interface of every sequence mixer (one per layer).
//
// A mixer maps x: (B, T, d_model) -> (B, T, d_model) causally: output t
// depends on inputs 0..t only. Implementations: Attention (full, SWA,
// head-wise SWA; model/layers/attention.h), Lightning
// (model/layers/lightning.h), Mamba2 (model/layers/mamba2.h), GatedDeltaNet
// (model/layers/gated_delta.h).
//
// Not thread-safe: a module is used by one thread at a time (LibTorch's
// intra-op threads parallelise inside ops).
//
//   std::shared_ptr<Mixer> mixer = MakeMixer(config, config.layers[i], i);
//   torch::Tensor y = mixer->forward(x);  // x: (B, T, d)
#ifndef HLAB_MODEL_LAYERS_MIXER_H_
#define HLAB_MODEL_LAYERS_MIXER_H_

#include <cstdint>
#include <memory>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "model/config/model_config.h"

namespace hlab::model {

class Mixer : public torch::nn::Module {
 public:
  ~Mixer() override = default;

  // x: (B, T, d_model) -> (B, T, d_model).
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;

  // The step-by-step recurrent (or per-query loop) form of the same mixer,
  // used as the reference in tests. Same contract as forward(); slow.
  virtual torch::Tensor forward_reference(const torch::Tensor& x) = 0;
};

// Standard deviation of residual-output projections: init_std / sqrt(2L).
double ResidualInitStd(const ModelConfig& config);

// Builds the mixer for `spec` in layer `layer_index` of `config` (which must be
// valid), initialised as the module documents.
std::shared_ptr<Mixer> MakeMixer(const ModelConfig& config,
                                 const MixerSpec& spec, int64_t layer_index);

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_MIXER_H_
