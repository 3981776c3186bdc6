// ModelConfig: the full description of one hybrid decoder-only LM.
//
// Plain data with no LibTorch dependency, so the coordinator and the CLI can
// validate configs and count parameters without linking torch. The model
// itself (model/hybrid_lm.h) is built from a validated ModelConfig.
//
// Thread-compatible plain structs.
//
//   ModelConfig config = TinyConfig();
//   HLAB_ASSIGN_OR_RETURN(config.layers, ExpandArchitecture("swa-64", 4));
//   HLAB_RETURN_IF_ERROR(ValidateModelConfig(config));
//   std::string json = ModelConfigToJson(config);
//
// Backbone (pre-norm): x += Mixer(RMSNorm(x)); x += SwiGLU(RMSNorm(x)); then a
// final RMSNorm and the LM head (tied to the embedding by default).
#ifndef HLAB_MODEL_CONFIG_MODEL_CONFIG_H_
#define HLAB_MODEL_CONFIG_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::model {

// The sequence mixer of one layer.
enum class MixerKind {
  kFull,                   // softmax attention over all previous keys
  kSlidingWindow,          // softmax attention over the last `window` keys
  kHeadwiseSlidingWindow,  // some heads windowed, the others full
  kLightning,              // linear attention with a fixed per-head decay
  kMamba2,                 // SSD: scalar data-dependent decay
  kGatedDeltaNet,          // delta rule with data-dependent decay and strength
};

// "full", "swa", "hswa", "lightning", "mamba2", "gdn".
absl::string_view MixerKindName(MixerKind kind);
absl::StatusOr<MixerKind> ParseMixerKind(absl::string_view name);

// True for the softmax kinds whose heads see every previous key (full, and the
// full heads of head-wise SWA).
bool IsFullAttention(MixerKind kind);

// One layer's mixer and its options. Fields that do not apply to `kind` must
// keep their defaults (ValidateModelConfig checks this).
struct MixerSpec {
  MixerKind kind = MixerKind::kFull;

  // Softmax attention (full, swa, hswa).
  int64_t window = 0;  // swa/hswa: query i sees keys i-window < j <= i
  // hswa: the first `windowed_heads` query heads are windowed, the rest are
  // full. Must be a multiple of the GQA group size (heads / kv heads).
  // 0 means half of the heads.
  int64_t windowed_heads = 0;
  bool nope = false;  // full / hswa: no rotary embedding on full heads

  // Mamba-2 and Gated DeltaNet.
  bool short_conv = false;  // causal depthwise conv before the mixer
  int64_t conv_size = 4;

  // Mamba-2 (SSD). Heads = expand * d_model / ssm_head_dim.
  int64_t ssm_state = 16;
  int64_t ssm_head_dim = 64;
  int64_t ssm_expand = 1;

  // Gated DeltaNet: dk = dv = gdn_head_dim (0 = the model's head_dim), and
  // gdn_heads value heads (0 = the model's n_heads), each with its own
  // state, beta and decay. The default layout is grouped like the
  // backbone's GQA (appendix B: "GQA groupings and per-head dimensions"):
  // q and k have gdn_heads / (n_heads / n_kv_heads) heads, each shared by a
  // group of value heads (fla's num_heads < num_v_heads). gdn_mha gives q
  // and k a head per value head (hlab's layout before this grouping).
  int64_t gdn_head_dim = 0;
  int64_t gdn_heads = 0;
  bool gdn_mha = false;

  // Chunk length of the chunked linear-attention kernels; 0 = kind default
  // (lightning/mamba2 64, gdn 16: measured fastest on the CPU,
  // docs/performance.md; gdn 64 on a GPU, EffectiveChunk).
  int64_t chunk = 0;

  // Per-layer SwiGLU hidden size override, used by parameter matching
  // (appendix B.2); 0 = the model's ffn_hidden.
  int64_t ffn_hidden = 0;

  bool operator==(const MixerSpec& other) const;
};

// Upper bounds on a model's sizes, far above any real model (the study's
// largest has 24 layers and d_model 1408; Llama 3 405B has 126 layers,
// d_model 16384 and a 128256-token vocabulary). They stop a typo or a
// hostile task file before a size is multiplied past int64 or a pattern is
// expanded into billions of layers; every product hlab forms from them
// (parameter counts, vocab * d_model) then stays well inside int64.
inline constexpr int64_t kMaxLayers = 4096;
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
// d_model, heads, head and state dimensions, SwiGLU widths, chunk lengths.
inline constexpr int64_t kMaxWidth = int64_t{1} << 20;
// Attention windows, in tokens.
inline constexpr int64_t kMaxWindow = int64_t{1} << 30;

struct ModelConfig {
  int64_t vocab_size = 256;
  int64_t d_model = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 2;  // GQA: n_heads % n_kv_heads == 0
  int64_t head_dim = 64;
  int64_t ffn_hidden = 704;  // SwiGLU hidden size
  double norm_eps = 1e-6;
  double init_std = 0.02;  // N(0, init_std); residual outputs / sqrt(2L)
  double rope_theta = 10000.0;
  bool tie_embeddings = true;
  // Informational: the architecture name the layers were expanded from.
  std::string arch;
  // One entry per layer; size must equal n_layers.
  std::vector<MixerSpec> layers;
};

// SwiGLU hidden size for a model width: 8/3 * d rounded up to a multiple of
// 64, as in the anchors and common practice.
int64_t DefaultFfnHidden(int64_t d_model);

// Effective values of per-layer options that have "0 = default" semantics.
int64_t EffectiveFfnHidden(const ModelConfig& config, const MixerSpec& spec);
// The chunk a layer runs with: spec.chunk when set, else the kind's default.
// on_gpu: GDN's default is 64 there, not 16: its scan over chunks is
// sequential, a few kernel launches per chunk (the CPU's fused kernel has no
// launches, and 16 measured fastest there), and 64 is fla's chunk.
int64_t EffectiveChunk(const MixerSpec& spec, bool on_gpu = false);
int64_t EffectiveWindowedHeads(const ModelConfig& config,
                               const MixerSpec& spec);
int64_t GdnHeadDim(const ModelConfig& config, const MixerSpec& spec);
int64_t GdnHeads(const ModelConfig& config, const MixerSpec& spec);
// Heads of q and k: GdnHeads with gdn_mha, else GdnHeads / the GQA group.
int64_t GdnQkHeads(const ModelConfig& config, const MixerSpec& spec);
int64_t Mamba2Heads(const ModelConfig& config, const MixerSpec& spec);

// Returns InvalidArgument naming the offending field ("layers[3].window: must
// be > 0, got -1") for any inconsistent config. OK configs are safe to build.
absl::Status ValidateModelConfig(const ModelConfig& config);

// JSON form. Parsing rejects unknown fields and wrong types, naming the
// field; the layers may be given as "arch" (a named architecture), "pattern"
// (a string such as "swa:128,full") or "layers" (a list of objects). The
// result is validated.
absl::StatusOr<ModelConfig> ModelConfigFromJson(absl::string_view json);
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace hlab::model

#endif  // HLAB_MODEL_CONFIG_MODEL_CONFIG_H_
