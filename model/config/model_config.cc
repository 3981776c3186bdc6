#include "model/config/model_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "model/config/architectures.h"

namespace hlab::model {
namespace {

using Json = nlohmann::json;

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

absl::Status RequirePositive(absl::string_view field, int64_t value) {
  if (value <= 0) {
    return FieldError(field, absl::StrCat("must be > 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status RequireAtMost(absl::string_view field, int64_t value,
                           int64_t max) {
  if (value > max) {
    return FieldError(field,
                      absl::StrCat("must be at most ", max, ", got ", value));
  }
  return absl::OkStatus();
}

// The upper bounds of the model-wide sizes (kMaxLayers and the rest), checked
// before any of them is used in arithmetic.
absl::Status CheckModelBounds(const ModelConfig& c) {
  HLAB_RETURN_IF_ERROR(RequireAtMost("vocab_size", c.vocab_size, kMaxVocab));
  HLAB_RETURN_IF_ERROR(RequireAtMost("d_model", c.d_model, kMaxWidth));
  HLAB_RETURN_IF_ERROR(RequireAtMost("n_layers", c.n_layers, kMaxLayers));
  HLAB_RETURN_IF_ERROR(RequireAtMost("n_heads", c.n_heads, kMaxWidth));
  HLAB_RETURN_IF_ERROR(RequireAtMost("n_kv_heads", c.n_kv_heads, kMaxWidth));
  HLAB_RETURN_IF_ERROR(RequireAtMost("head_dim", c.head_dim, kMaxWidth));
  HLAB_RETURN_IF_ERROR(RequireAtMost("ffn_hidden", c.ffn_hidden, kMaxWidth));
  return absl::OkStatus();
}

absl::Status CheckLayerBounds(const MixerSpec& spec, const std::string& where) {
  HLAB_RETURN_IF_ERROR(
      RequireAtMost(where + ".window", spec.window, kMaxWindow));
  for (const auto& [name, value] :
       {std::pair<const char*, int64_t>{"windowed_heads", spec.windowed_heads},
        {"conv_size", spec.conv_size},
        {"ssm_state", spec.ssm_state},
        {"ssm_head_dim", spec.ssm_head_dim},
        {"ssm_expand", spec.ssm_expand},
        {"gdn_head_dim", spec.gdn_head_dim},
        {"gdn_heads", spec.gdn_heads},
        {"chunk", spec.chunk},
        {"ffn_hidden", spec.ffn_hidden}}) {
    HLAB_RETURN_IF_ERROR(
        RequireAtMost(absl::StrCat(where, ".", name), value, kMaxWidth));
  }
  return absl::OkStatus();
}

absl::Status ValidateLayer(const ModelConfig& config, const MixerSpec& spec,
                           const std::string& where) {
  HLAB_RETURN_IF_ERROR(CheckLayerBounds(spec, where));
  const MixerSpec defaults;
  const bool softmax = spec.kind == MixerKind::kFull ||
                       spec.kind == MixerKind::kSlidingWindow ||
                       spec.kind == MixerKind::kHeadwiseSlidingWindow;
  const bool windowed = spec.kind == MixerKind::kSlidingWindow ||
                        spec.kind == MixerKind::kHeadwiseSlidingWindow;
  if (windowed) {
    if (spec.window <= 0) {
      return FieldError(where + ".window",
                        absl::StrCat("must be > 0, got ", spec.window));
    }
  } else if (spec.window != 0) {
    return FieldError(where + ".window",
                      absl::StrCat("only applies to swa/hswa layers, not ",
                                   MixerKindName(spec.kind)));
  }
  if (spec.kind == MixerKind::kHeadwiseSlidingWindow) {
    const int64_t group = config.n_heads / config.n_kv_heads;
    const int64_t heads = EffectiveWindowedHeads(config, spec);
    if (heads <= 0 || heads >= config.n_heads) {
      return FieldError(where + ".windowed_heads",
                        absl::StrCat("must be in 1..", config.n_heads - 1,
                                     " (n_heads - 1), got ", heads));
    }
    if (heads % group != 0) {
      return FieldError(
          where + ".windowed_heads",
          absl::StrCat("must be a multiple of the GQA group size ", group,
                       " (n_heads / n_kv_heads), got ", heads));
    }
  } else if (spec.windowed_heads != 0) {
    return FieldError(where + ".windowed_heads", "only applies to hswa layers");
  }
  if (spec.nope && !(spec.kind == MixerKind::kFull ||
                     spec.kind == MixerKind::kHeadwiseSlidingWindow)) {
    return FieldError(where + ".nope",
                      absl::StrCat("NoPE applies to full-attention layers "
                                   "only, not ",
                                   MixerKindName(spec.kind)));
  }
  const bool conv_kind =
      spec.kind == MixerKind::kMamba2 || spec.kind == MixerKind::kGatedDeltaNet;
  if (spec.short_conv && !conv_kind) {
    return FieldError(where + ".short_conv", "only applies to mamba2/gdn");
  }
  if (spec.conv_size != defaults.conv_size && !conv_kind) {
    return FieldError(where + ".conv_size", "only applies to mamba2/gdn");
  }
  if (conv_kind) {
    HLAB_RETURN_IF_ERROR(RequirePositive(where + ".conv_size", spec.conv_size));
  }
  if (spec.kind == MixerKind::kMamba2) {
    HLAB_RETURN_IF_ERROR(RequirePositive(where + ".ssm_state", spec.ssm_state));
    HLAB_RETURN_IF_ERROR(
        RequirePositive(where + ".ssm_head_dim", spec.ssm_head_dim));
    HLAB_RETURN_IF_ERROR(
        RequirePositive(where + ".ssm_expand", spec.ssm_expand));
    const int64_t inner = spec.ssm_expand * config.d_model;
    if (inner % spec.ssm_head_dim != 0) {
      return FieldError(where + ".ssm_head_dim",
                        absl::StrCat("must divide ssm_expand * d_model = ",
                                     inner, ", got ", spec.ssm_head_dim));
    }
  } else if (spec.ssm_state != defaults.ssm_state ||
             spec.ssm_head_dim != defaults.ssm_head_dim ||
             spec.ssm_expand != defaults.ssm_expand) {
    return FieldError(where + ".ssm_*", "only applies to mamba2 layers");
  }
  if (spec.kind == MixerKind::kGatedDeltaNet) {
    if (spec.gdn_head_dim < 0) {
      return FieldError(where + ".gdn_head_dim",
                        absl::StrCat("must be >= 0, got ", spec.gdn_head_dim));
    }
    if (spec.gdn_heads < 0) {
      return FieldError(where + ".gdn_heads",
                        absl::StrCat("must be >= 0, got ", spec.gdn_heads));
    }
    const int64_t group = config.n_heads / config.n_kv_heads;
    if (!spec.gdn_mha && GdnHeads(config, spec) % group != 0) {
      return FieldError(
          where + ".gdn_heads",
          absl::StrCat("the grouped layout needs a multiple of the GQA "
                       "group n_heads / n_kv_heads = ",
                       group, ", got ", GdnHeads(config, spec),
                       "; or give the layer the mha option"));
    }
  } else if (spec.gdn_head_dim != 0 || spec.gdn_heads != 0 || spec.gdn_mha) {
    return FieldError(where + ".gdn_*", "only applies to gdn layers");
  }
  const bool chunked = spec.kind == MixerKind::kLightning || conv_kind;
  if (spec.chunk < 0 || (spec.chunk != 0 && !chunked)) {
    return FieldError(where + ".chunk",
                      chunked ? "must be >= 0 (0 = default)"
                              : "only applies to lightning/mamba2/gdn");
  }
  if (spec.ffn_hidden < 0) {
    return FieldError(where + ".ffn_hidden",
                      absl::StrCat("must be >= 0, got ", spec.ffn_hidden));
  }
  (void)softmax;
  return absl::OkStatus();
}

}  // namespace

bool MixerSpec::operator==(const MixerSpec& o) const {
  return kind == o.kind && window == o.window &&
         windowed_heads == o.windowed_heads && nope == o.nope &&
         short_conv == o.short_conv && conv_size == o.conv_size &&
         ssm_state == o.ssm_state && ssm_head_dim == o.ssm_head_dim &&
         ssm_expand == o.ssm_expand && gdn_head_dim == o.gdn_head_dim &&
         gdn_heads == o.gdn_heads && gdn_mha == o.gdn_mha && chunk == o.chunk &&
         ffn_hidden == o.ffn_hidden;
}

absl::string_view MixerKindName(MixerKind kind) {
  switch (kind) {
    case MixerKind::kFull:
      return "full";
    case MixerKind::kSlidingWindow:
      return "swa";
    case MixerKind::kHeadwiseSlidingWindow:
      return "hswa";
    case MixerKind::kLightning:
      return "lightning";
    case MixerKind::kMamba2:
      return "mamba2";
    case MixerKind::kGatedDeltaNet:
      return "gdn";
  }
  return "unknown";
}

absl::StatusOr<MixerKind> ParseMixerKind(absl::string_view name) {
  for (MixerKind kind :
       {MixerKind::kFull, MixerKind::kSlidingWindow,
        MixerKind::kHeadwiseSlidingWindow, MixerKind::kLightning,
        MixerKind::kMamba2, MixerKind::kGatedDeltaNet}) {
    if (name == MixerKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mixer '", name,
                   "' (known: full, swa, hswa, lightning, mamba2, gdn)"));
}

bool IsFullAttention(MixerKind kind) {
  return kind == MixerKind::kFull || kind == MixerKind::kHeadwiseSlidingWindow;
}

int64_t DefaultFfnHidden(int64_t d_model) {
  const int64_t raw = (8 * d_model + 2) / 3;
  return (raw + 63) / 64 * 64;
}

int64_t EffectiveFfnHidden(const ModelConfig& config, const MixerSpec& spec) {
  return spec.ffn_hidden > 0 ? spec.ffn_hidden : config.ffn_hidden;
}

int64_t EffectiveChunk(const MixerSpec& spec, bool on_gpu) {
  if (spec.chunk > 0) return spec.chunk;
  return spec.kind == MixerKind::kGatedDeltaNet && !on_gpu ? 16 : 64;
}

int64_t EffectiveWindowedHeads(const ModelConfig& config,
                               const MixerSpec& spec) {
  return spec.windowed_heads > 0 ? spec.windowed_heads : config.n_heads / 2;
}

int64_t GdnHeadDim(const ModelConfig& config, const MixerSpec& spec) {
  return spec.gdn_head_dim > 0 ? spec.gdn_head_dim : config.head_dim;
}

int64_t GdnHeads(const ModelConfig& config, const MixerSpec& spec) {
  return spec.gdn_heads > 0 ? spec.gdn_heads : config.n_heads;
}

int64_t GdnQkHeads(const ModelConfig& config, const MixerSpec& spec) {
  const int64_t heads = GdnHeads(config, spec);
  if (spec.gdn_mha || config.n_kv_heads <= 0) return heads;
  return std::max<int64_t>(1, heads / (config.n_heads / config.n_kv_heads));
}

int64_t Mamba2Heads(const ModelConfig& config, const MixerSpec& spec) {
  return spec.ssm_expand * config.d_model / spec.ssm_head_dim;
}

absl::Status ValidateModelConfig(const ModelConfig& config) {
  HLAB_RETURN_IF_ERROR(CheckModelBounds(config));
  HLAB_RETURN_IF_ERROR(RequirePositive("vocab_size", config.vocab_size));
  HLAB_RETURN_IF_ERROR(RequirePositive("d_model", config.d_model));
  HLAB_RETURN_IF_ERROR(RequirePositive("n_layers", config.n_layers));
  HLAB_RETURN_IF_ERROR(RequirePositive("n_heads", config.n_heads));
  HLAB_RETURN_IF_ERROR(RequirePositive("n_kv_heads", config.n_kv_heads));
  HLAB_RETURN_IF_ERROR(RequirePositive("head_dim", config.head_dim));
  HLAB_RETURN_IF_ERROR(RequirePositive("ffn_hidden", config.ffn_hidden));
  if (config.d_model % config.n_heads != 0) {
    return FieldError("n_heads",
                      absl::StrCat("must divide d_model = ", config.d_model,
                                   ", got ", config.n_heads));
  }
  if (config.n_heads % config.n_kv_heads != 0) {
    return FieldError("n_kv_heads",
                      absl::StrCat("must divide n_heads = ", config.n_heads,
                                   ", got ", config.n_kv_heads));
  }
  if (config.head_dim % 2 != 0) {
    return FieldError(
        "head_dim",
        absl::StrCat("must be even (rotary embedding), got ", config.head_dim));
  }
  if (!(config.norm_eps > 0) || !std::isfinite(config.norm_eps)) {
    return FieldError("norm_eps", "must be a positive finite number");
  }
  if (!(config.init_std > 0) || !std::isfinite(config.init_std)) {
    return FieldError("init_std", "must be a positive finite number");
  }
  if (!(config.rope_theta > 0) || !std::isfinite(config.rope_theta)) {
    return FieldError("rope_theta", "must be a positive finite number");
  }
  if (config.layers.empty()) {
    return FieldError("layers", "the layer pattern is empty");
  }
  if (static_cast<int64_t>(config.layers.size()) != config.n_layers) {
    return FieldError(
        "layers", absl::StrCat("has ", config.layers.size(),
                               " entries but n_layers = ", config.n_layers));
  }
  for (size_t i = 0; i < config.layers.size(); ++i) {
    HLAB_RETURN_IF_ERROR(ValidateLayer(config, config.layers[i],
                                       absl::StrCat("layers[", i, "]")));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- JSON ----

namespace {

// Where an unknown field's error points.
constexpr char kFieldsHelp[] = "docs/models.md";

absl::StatusOr<MixerSpec> LayerFromJson(const Json& j,
                                        const std::string& where) {
  if (j.is_string()) {
    auto spec = ParseLayerSpec(j.get<std::string>());
    if (!spec.ok()) return FieldError(where, spec.status().message());
    return spec;
  }
  if (!j.is_object()) {
    return FieldError(where, "must be an object or a layer spec string");
  }
  const JsonObjectReader r(j, where, kFieldsHelp);
  HLAB_RETURN_IF_ERROR(r.CheckKeys(
      {"mixer", "window", "windowed_heads", "nope", "short_conv", "conv_size",
       "ssm_state", "ssm_head_dim", "ssm_expand", "gdn_head_dim", "gdn_heads",
       "gdn_mha", "chunk", "ffn_hidden"}));
  MixerSpec spec;
  std::string mixer;
  HLAB_RETURN_IF_ERROR(r.Get("mixer", &mixer));
  if (mixer.empty()) return FieldError(where + ".mixer", "is required");
  auto kind = ParseMixerKind(mixer);
  if (!kind.ok()) return FieldError(where + ".mixer", kind.status().message());
  spec.kind = *kind;
  HLAB_RETURN_IF_ERROR(r.Get("window", &spec.window));
  HLAB_RETURN_IF_ERROR(r.Get("windowed_heads", &spec.windowed_heads));
  HLAB_RETURN_IF_ERROR(r.Get("nope", &spec.nope));
  HLAB_RETURN_IF_ERROR(r.Get("short_conv", &spec.short_conv));
  HLAB_RETURN_IF_ERROR(r.Get("conv_size", &spec.conv_size));
  HLAB_RETURN_IF_ERROR(r.Get("ssm_state", &spec.ssm_state));
  HLAB_RETURN_IF_ERROR(r.Get("ssm_head_dim", &spec.ssm_head_dim));
  HLAB_RETURN_IF_ERROR(r.Get("ssm_expand", &spec.ssm_expand));
  HLAB_RETURN_IF_ERROR(r.Get("gdn_head_dim", &spec.gdn_head_dim));
  HLAB_RETURN_IF_ERROR(r.Get("gdn_heads", &spec.gdn_heads));
  HLAB_RETURN_IF_ERROR(r.Get("gdn_mha", &spec.gdn_mha));
  HLAB_RETURN_IF_ERROR(r.Get("chunk", &spec.chunk));
  HLAB_RETURN_IF_ERROR(r.Get("ffn_hidden", &spec.ffn_hidden));
  return spec;
}

Json LayerToJson(const MixerSpec& spec) {
  const MixerSpec d;
  Json j;
  j["mixer"] = std::string(MixerKindName(spec.kind));
  if (spec.window != d.window) j["window"] = spec.window;
  if (spec.windowed_heads != d.windowed_heads) {
    j["windowed_heads"] = spec.windowed_heads;
  }
  if (spec.nope) j["nope"] = true;
  if (spec.short_conv) j["short_conv"] = true;
  if (spec.conv_size != d.conv_size) j["conv_size"] = spec.conv_size;
  if (spec.ssm_state != d.ssm_state) j["ssm_state"] = spec.ssm_state;
  if (spec.ssm_head_dim != d.ssm_head_dim)
    j["ssm_head_dim"] = spec.ssm_head_dim;
  if (spec.ssm_expand != d.ssm_expand) j["ssm_expand"] = spec.ssm_expand;
  if (spec.gdn_head_dim != d.gdn_head_dim)
    j["gdn_head_dim"] = spec.gdn_head_dim;
  if (spec.gdn_heads != d.gdn_heads) j["gdn_heads"] = spec.gdn_heads;
  // Always for GDN, so a run id made before the grouped layout became the
  // default (the layer JSON had no such key) never names a grouped model.
  if (spec.kind == MixerKind::kGatedDeltaNet) j["gdn_mha"] = spec.gdn_mha;
  if (spec.chunk != d.chunk) j["chunk"] = spec.chunk;
  if (spec.ffn_hidden != d.ffn_hidden) j["ffn_hidden"] = spec.ffn_hidden;
  return j;
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromJson(absl::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("model config: malformed JSON");
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError("model config: must be a JSON object");
  }
  const JsonObjectReader r(j, "", kFieldsHelp);
  HLAB_RETURN_IF_ERROR(r.CheckKeys(
      {"vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim",
       "ffn_hidden", "norm_eps", "init_std", "rope_theta", "tie_embeddings",
       "arch", "pattern", "layers"}));
  ModelConfig c;
  c.ffn_hidden = 0;
  HLAB_RETURN_IF_ERROR(r.Get("vocab_size", &c.vocab_size));
  HLAB_RETURN_IF_ERROR(r.Get("d_model", &c.d_model));
  HLAB_RETURN_IF_ERROR(r.Get("n_layers", &c.n_layers));
  HLAB_RETURN_IF_ERROR(r.Get("n_heads", &c.n_heads));
  HLAB_RETURN_IF_ERROR(r.Get("n_kv_heads", &c.n_kv_heads));
  c.head_dim = c.n_heads > 0 ? c.d_model / c.n_heads : 0;
  HLAB_RETURN_IF_ERROR(r.Get("head_dim", &c.head_dim));
  HLAB_RETURN_IF_ERROR(r.Get("ffn_hidden", &c.ffn_hidden));
  HLAB_RETURN_IF_ERROR(CheckModelBounds(c));
  if (c.ffn_hidden == 0 && !r.Has("ffn_hidden")) {
    c.ffn_hidden = DefaultFfnHidden(c.d_model);
  }
  HLAB_RETURN_IF_ERROR(r.Get("norm_eps", &c.norm_eps));
  HLAB_RETURN_IF_ERROR(r.Get("init_std", &c.init_std));
  HLAB_RETURN_IF_ERROR(r.Get("rope_theta", &c.rope_theta));
  HLAB_RETURN_IF_ERROR(r.Get("tie_embeddings", &c.tie_embeddings));
  HLAB_RETURN_IF_ERROR(r.Get("arch", &c.arch));
  std::string pattern;
  HLAB_RETURN_IF_ERROR(r.Get("pattern", &pattern));
  const bool has_layers = r.Has("layers");
  const int sources = (!c.arch.empty()) + (!pattern.empty()) + has_layers;
  if (sources > 1) {
    return FieldError("layers",
                      "give only one of \"arch\", \"pattern\" or \"layers\"");
  }
  if (sources == 0) {
    return FieldError("layers",
                      "no layer pattern: give \"arch\" (e.g. \"swa-128\"), "
                      "\"pattern\" (e.g. \"swa:128,full\") or \"layers\"");
  }
  HLAB_RETURN_IF_ERROR(RequirePositive("n_layers", c.n_layers));
  if (!c.arch.empty() || !pattern.empty()) {
    const std::string& name = c.arch.empty() ? pattern : c.arch;
    auto layers = ExpandArchitecture(name, c.n_layers);
    if (!layers.ok()) {
      return FieldError(c.arch.empty() ? "pattern" : "arch",
                        layers.status().message());
    }
    c.layers = *std::move(layers);
    if (c.arch.empty()) c.arch = pattern;
  } else {
    const Json& list = j["layers"];
    if (!list.is_array()) return FieldError("layers", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) {
      HLAB_ASSIGN_OR_RETURN(
          MixerSpec spec,
          LayerFromJson(list[i], absl::StrCat("layers[", i, "]")));
      c.layers.push_back(spec);
    }
  }
  HLAB_RETURN_IF_ERROR(ValidateModelConfig(c));
  return c;
}

std::string ModelConfigToJson(const ModelConfig& c) {
  Json j;
  j["vocab_size"] = c.vocab_size;
  j["d_model"] = c.d_model;
  j["n_layers"] = c.n_layers;
  j["n_heads"] = c.n_heads;
  j["n_kv_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["ffn_hidden"] = c.ffn_hidden;
  j["norm_eps"] = c.norm_eps;
  j["init_std"] = c.init_std;
  j["rope_theta"] = c.rope_theta;
  j["tie_embeddings"] = c.tie_embeddings;
  Json layers = Json::array();
  for (const MixerSpec& spec : c.layers) layers.push_back(LayerToJson(spec));
  j["layers"] = layers;
  return j.dump(2);
}

}  // namespace hlab::model
