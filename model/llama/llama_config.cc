#include "model/llama/llama_config.h"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/mapped_file.h"
#include "common/status_macros.h"

namespace hlab::model::llama {
namespace {

using Json = nlohmann::json;

constexpr double kPi = 3.14159265358979323846;

// Fields that describe the file, the tokenizer or training, and do not
// change the forward pass of a model in inference.
const std::set<std::string>& InformationalKeys() {
  static const std::set<std::string> keys = {"_name_or_path",
                                             "architectures",
                                             "attention_dropout",
                                             "bos_token_id",
                                             "eos_token_id",
                                             "pad_token_id",
                                             "dtype",
                                             "torch_dtype",
                                             "initializer_range",
                                             "transformers_version",
                                             "use_cache",
                                             "pretraining_tp",
                                             "tokenizer_class",
                                             "output_attentions",
                                             "output_hidden_states",
                                             "return_dict"};
  return keys;
}

const std::set<std::string>& ReadKeys() {
  static const std::set<std::string> keys = {"model_type",
                                             "vocab_size",
                                             "hidden_size",
                                             "intermediate_size",
                                             "num_hidden_layers",
                                             "num_attention_heads",
                                             "num_key_value_heads",
                                             "head_dim",
                                             "max_position_embeddings",
                                             "rms_norm_eps",
                                             "rope_theta",
                                             "rope_scaling",
                                             "tie_word_embeddings",
                                             "hidden_act",
                                             "attention_bias",
                                             "mlp_bias",
                                             "sliding_window",
                                             "use_sliding_window"};
  return keys;
}

absl::Status Refused(const std::string& file, const std::string& field,
                     absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", field, ": ", why));
}

absl::Status GetPositive(const JsonObjectReader& r, const std::string& key,
                         bool required, int64_t* out) {
  if (!r.Has(key)) {
    if (required) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.Path(key),
                       ": missing (a LlamaForCausalLM "
                       "config.json has it)"));
    }
    return absl::OkStatus();
  }
  if (!HoldsInteger<int64_t>(r.At(key)) || r.At(key).get<int64_t>() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.Path(key), ": must be an integer > 0"));
  }
  *out = r.At(key).get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const Json& value, const std::string& file,
                             LlamaRopeScaling* out) {
  const std::string field = "rope_scaling";
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_object()) return Refused(file, field, "must be null or a map");
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    auto it = value.find(key);
    if (it != value.end() && it->is_string()) type = it->get<std::string>();
  }
  if (type == "default") return absl::OkStatus();
  if (type != "llama3") {
    return Refused(file, field + ".rope_type",
                   absl::StrCat("'", type,
                                "' is not supported by hlab's Llama "
                                "reference (\"llama3\" and \"default\" are)"));
  }
  JsonObjectReader r(value, absl::StrCat(file, ": ", field),
                     "docs/evaluation.md, \"A Llama reference\"");
  HLAB_RETURN_IF_ERROR(
      r.CheckKeys({"rope_type", "type", "factor", "low_freq_factor",
                   "high_freq_factor", "original_max_position_embeddings"}));
  out->llama3 = true;
  HLAB_RETURN_IF_ERROR(r.Get("factor", &out->factor));
  HLAB_RETURN_IF_ERROR(r.Get("low_freq_factor", &out->low_freq_factor));
  HLAB_RETURN_IF_ERROR(r.Get("high_freq_factor", &out->high_freq_factor));
  HLAB_RETURN_IF_ERROR(GetPositive(r, "original_max_position_embeddings", false,
                                   &out->original_max_position_embeddings));
  if (!(out->factor >= 1.0)) {
    return Refused(file, field + ".factor", "must be >= 1");
  }
  if (!(out->low_freq_factor > 0) ||
      !(out->high_freq_factor > out->low_freq_factor)) {
    return Refused(file, field, "needs 0 < low_freq_factor < high_freq_factor");
  }
  return absl::OkStatus();
}

absl::StatusOr<LlamaConfig> ParseFields(const Json& json,
                                        const std::string& file) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": must be a JSON object"));
  }
  for (const auto& item : json.items()) {
    if (ReadKeys().count(item.key()) == 0 &&
        InformationalKeys().count(item.key()) == 0) {
      return Refused(
          file, item.key(),
          "not a field hlab's Llama reference knows. It may change the "
          "model, so hlab does not guess: remove it if it does not, or use "
          "a model of the LlamaForCausalLM family");
    }
  }
  JsonObjectReader fields(json, "", "");
  std::string model_type;
  if (!json.contains("model_type") || !json["model_type"].is_string()) {
    return Refused(file, "model_type",
                   "missing: hlab reads model_type \"llama\"");
  }
  model_type = json["model_type"].get<std::string>();
  if (model_type != "llama") {
    return Refused(file, "model_type",
                   absl::StrCat("'", model_type,
                                "' is not supported: hlab's reference is the "
                                "LlamaForCausalLM architecture (\"llama\")"));
  }
  if (json.contains("architectures")) {
    const Json& a = json["architectures"];
    if (!a.is_array() || a.size() != 1 || !a[0].is_string() ||
        a[0].get<std::string>() != "LlamaForCausalLM") {
      return Refused(file, "architectures",
                     absl::StrCat(a.dump(), " is not [\"LlamaForCausalLM\"]"));
    }
  }
  if (json.contains("hidden_act") && json["hidden_act"] != Json("silu")) {
    return Refused(file, "hidden_act",
                   absl::StrCat(json["hidden_act"].dump(),
                                " is not supported (the SwiGLU MLP uses "
                                "\"silu\")"));
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (json.contains(bias) && json[bias] != Json(false)) {
      return Refused(file, bias,
                     absl::StrCat(json[bias].dump(),
                                  " is not supported: hlab's Llama reference "
                                  "has no biases"));
    }
  }
  for (const char* window : {"sliding_window", "use_sliding_window"}) {
    if (json.contains(window) && !json[window].is_null() &&
        json[window] != Json(false)) {
      return Refused(file, window,
                     absl::StrCat(json[window].dump(),
                                  " is not supported by hlab's Llama "
                                  "reference (it attends to every previous "
                                  "token)"));
    }
  }
  LlamaConfig c;
  HLAB_RETURN_IF_ERROR(GetPositive(fields, "vocab_size", true, &c.vocab_size));
  HLAB_RETURN_IF_ERROR(
      GetPositive(fields, "hidden_size", true, &c.hidden_size));
  HLAB_RETURN_IF_ERROR(
      GetPositive(fields, "intermediate_size", true, &c.intermediate_size));
  HLAB_RETURN_IF_ERROR(
      GetPositive(fields, "num_hidden_layers", true, &c.num_hidden_layers));
  HLAB_RETURN_IF_ERROR(
      GetPositive(fields, "num_attention_heads", true, &c.num_attention_heads));
  c.num_key_value_heads = c.num_attention_heads;
  HLAB_RETURN_IF_ERROR(GetPositive(fields, "num_key_value_heads", false,
                                   &c.num_key_value_heads));
  HLAB_RETURN_IF_ERROR(GetPositive(fields, "max_position_embeddings", false,
                                   &c.max_position_embeddings));
  if (c.hidden_size % c.num_attention_heads != 0 &&
      !json.contains("head_dim")) {
    return Refused(
        file, "num_attention_heads",
        absl::StrCat(c.num_attention_heads, " does not divide hidden_size ",
                     c.hidden_size, ", and there is no head_dim"));
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (json.contains("head_dim") && !json["head_dim"].is_null()) {
    HLAB_RETURN_IF_ERROR(GetPositive(fields, "head_dim", false, &c.head_dim));
  }
  if (c.head_dim % 2 != 0) {
    return Refused(file, "head_dim",
                   absl::StrCat(c.head_dim, " is odd; rotary needs pairs"));
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return Refused(file, "num_key_value_heads",
                   absl::StrCat(c.num_key_value_heads,
                                " does not divide num_attention_heads ",
                                c.num_attention_heads));
  }
  HLAB_RETURN_IF_ERROR(fields.Get("rms_norm_eps", &c.rms_norm_eps));
  HLAB_RETURN_IF_ERROR(fields.Get("rope_theta", &c.rope_theta));
  HLAB_RETURN_IF_ERROR(
      fields.Get("tie_word_embeddings", &c.tie_word_embeddings));
  if (!(c.rms_norm_eps > 0)) {
    return Refused(file, "rms_norm_eps", "must be > 0");
  }
  if (!(c.rope_theta > 1)) return Refused(file, "rope_theta", "must be > 1");
  if (json.contains("rope_scaling")) {
    HLAB_RETURN_IF_ERROR(
        ReadRopeScaling(json["rope_scaling"], file, &c.rope_scaling));
  }
  for (const char* dtype : {"torch_dtype", "dtype"}) {
    if (json.contains(dtype) && json[dtype].is_string()) {
      c.torch_dtype = json[dtype].get<std::string>();
    }
  }
  return c;
}

}  // namespace

absl::StatusOr<LlamaConfig> ParseLlamaConfig(absl::string_view json_text,
                                             const std::string& file) {
  HLAB_ASSIGN_OR_RETURN(Json json, ParseJsonText(json_text, file));
  absl::StatusOr<LlamaConfig> config = ParseFields(json, file);
  // The field readers name the field alone; every error names the file.
  if (!config.ok() && !absl::StartsWith(config.status().message(), file)) {
    return absl::Status(config.status().code(),
                        absl::StrCat(file, ": ", config.status().message()));
  }
  return config;
}

absl::StatusOr<LlamaConfig> ReadLlamaConfig(const std::string& dir) {
  const std::string file = absl::StrCat(dir, "/config.json");
  auto mapped = MappedFile::Open(file);
  if (absl::IsNotFound(mapped.status())) {
    return absl::NotFoundError(absl::StrCat(
        file,
        ": not found (give a Hugging Face model directory: config.json "
        "and model.safetensors)"));
  }
  if (!mapped.ok()) return mapped.status();
  const absl::string_view text(reinterpret_cast<const char*>((*mapped)->data()),
                               (*mapped)->size());
  return ParseLlamaConfig(text, file);
}

std::vector<double> RopeInverseFrequencies(const LlamaConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv[i] = 1.0 / std::pow(config.rope_theta,
                            static_cast<double>(2 * i) /
                                static_cast<double>(config.head_dim));
  }
  const LlamaRopeScaling& s = config.rope_scaling;
  if (!s.llama3) return inv;
  // Hugging Face's _compute_llama3_parameters.
  const double old_context =
      static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * kPi / f;
    if (wavelen > low_freq_wavelen) {
      f = f / s.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth = (old_context / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

int64_t LlamaParameterCount(const LlamaConfig& c) {
  const int64_t d = c.hidden_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  const int64_t per_layer =
      2 * d + d * q + 2 * d * kv + q * d + 3 * d * c.intermediate_size;
  const int64_t embeddings = c.vocab_size * d * (c.tie_word_embeddings ? 1 : 2);
  return embeddings + c.num_hidden_layers * per_layer + d;
}

}  // namespace hlab::model::llama
