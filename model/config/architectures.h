// Named hybrid architectures of the study and custom layer patterns.
//
// Thread-safe (pure functions).
//
//   auto layers = ExpandArchitecture("swa-128-nope", 8);   // 1:1 SWA/full
//   auto custom = ExpandArchitecture("gdn:conv,full", 4);  // a pattern
//
// Names (w is a window size in tokens, so tiny models use e.g. swa-16):
//   full                      every layer full attention
//   swa-<w>                   SWA(w) and full interleaved 1:1
//   lightning, mamba2, gdn    the efficient mixer and full interleaved 1:1
//   mamba2-conv, gdn-conv     with the short causal convolution (appendix
//                             B.3/B.4's ablation; off in the named mixers)
//   gdn-mha                   gdn with a q, k head per value head (gdn's q
//                             and k are grouped like the backbone's GQA)
//   <hybrid>-1to3             one full layer per four (1:3 full:efficient)
//   swa-<w>-headwise          every layer head-wise: half the heads SWA(w)
//   <any>-nope                NoPE on the full-attention layers only
// Layers are [efficient, full] repeated (1:1) or [e, e, e, full] (1:3), so
// the last layer is always full attention.
//
// A pattern is a comma-separated list of layer specs, repeated to fill the
// layers (its length must divide n_layers). A spec is a kind followed by
// options separated by ':' — full[:nope], swa:<w>, hswa:<w>[:<heads>][:nope],
// lightning, mamba2[:conv][:state=<n>][:dim=<P>], gdn[:conv][:dim=<n>][:mha]
// (dim: the recurrent head dimension, GDN's dk = dv or Mamba-2's P).
#ifndef HLAB_MODEL_CONFIG_ARCHITECTURES_H_
#define HLAB_MODEL_CONFIG_ARCHITECTURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/config/model_config.h"

namespace hlab::model {

// The architecture names of the paper's study, for listings and tests.
std::vector<std::string> PaperArchitectureNames();

// Expands a named architecture or a pattern into one MixerSpec per layer.
// InvalidArgument names what was wrong ("arch 'swa-0': window must be > 0").
absl::StatusOr<std::vector<MixerSpec>> ExpandArchitecture(
    absl::string_view name, int64_t n_layers);

// Parses one layer spec such as "swa:128" or "gdn:conv".
absl::StatusOr<MixerSpec> ParseLayerSpec(absl::string_view spec);

// The canonical pattern string of a layer list ("swa:128,full,swa:128,full").
std::string LayersToPattern(const std::vector<MixerSpec>& layers);
std::string LayerSpecToString(const MixerSpec& spec);

}  // namespace hlab::model

#endif  // HLAB_MODEL_CONFIG_ARCHITECTURES_H_
