// MakeMixer: the one place that maps a MixerKind to its module.
#include "model/layers/mixer.h"

#include <torch/torch.h>

#include "model/layers/attention.h"
#include "model/layers/gated_delta.h"
#include "model/layers/lightning.h"
#include "model/layers/mamba2.h"

namespace hlab::model {

std::shared_ptr<Mixer> MakeMixer(const ModelConfig& config,
                                 const MixerSpec& spec, int64_t layer_index) {
  switch (spec.kind) {
    case MixerKind::kFull:
    case MixerKind::kSlidingWindow:
    case MixerKind::kHeadwiseSlidingWindow:
      return std::make_shared<Attention>(config, spec, layer_index);
    case MixerKind::kLightning:
      return std::make_shared<Lightning>(config, spec, layer_index);
    case MixerKind::kMamba2:
      return std::make_shared<Mamba2>(config, spec);
    case MixerKind::kGatedDeltaNet:
      return std::make_shared<GatedDeltaNet>(config, spec);
  }
  throw std::invalid_argument("MakeMixer: unknown mixer kind");
}

}  // namespace hlab::model
