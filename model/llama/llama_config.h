// LlamaConfig: a Hugging Face `config.json` of the LlamaForCausalLM family
// (Llama 2, Llama 3 / 3.1 / 3.2, and models of the same shape), for the
// LongPPL reference (model/llama/llama_model.h). No LibTorch.
//
// The architecture read: pre-norm RMSNorm blocks of grouped-query attention
// with rotary embeddings (Hugging Face's half-split rotation, and Llama 3's
// frequency scaling, rope_scaling.rope_type "llama3") and a SwiGLU MLP;
// tied or untied embeddings. A field that would change the model in a way
// hlab does not implement (sliding_window, attention_bias, mlp_bias, another
// hidden_act or rope_type, or any field hlab does not know) is refused,
// naming it: the model is never run differently from what the file says.
//
// Thread-safety: plain data and free functions.
//
//   HLAB_ASSIGN_OR_RETURN(LlamaConfig c, ReadLlamaConfig("/models/llama3"));
//   std::vector<double> inv_freq = RopeInverseFrequencies(c);  // head_dim / 2
#ifndef HLAB_MODEL_LLAMA_LLAMA_CONFIG_H_
#define HLAB_MODEL_LLAMA_LLAMA_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::model::llama {

// rope_scaling {"rope_type": "llama3", ...} (Llama 3.1 onwards).
struct LlamaRopeScaling {
  bool llama3 = false;  // false: plain RoPE (rope_scaling null or "default")
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // D
  int64_t intermediate_size = 0;  // F, the MLP's width
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;  // H
  int64_t num_key_value_heads = 0;  // KV (GQA); default H
  int64_t head_dim = 0;             // default D / H
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  LlamaRopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  std::string torch_dtype;  // informational ("bfloat16")
};

// Errors (InvalidArgument) name the file and the field:
// "config.json: sliding_window: 4096 is not supported by hlab's Llama
// reference (it attends to every previous token)".
absl::StatusOr<LlamaConfig> ParseLlamaConfig(absl::string_view json_text,
                                             const std::string& file);

// `dir`/config.json; NotFound names the file.
absl::StatusOr<LlamaConfig> ReadLlamaConfig(const std::string& dir);

// The rotary inverse frequencies, head_dim / 2 of them, in double:
// theta^(-2i / head_dim), then Llama 3's scaling when configured (low
// frequencies divided by `factor`, high ones kept, a smooth blend between).
std::vector<double> RopeInverseFrequencies(const LlamaConfig& config);

// Parameters: embeddings (and an untied head), layers, the final norm.
int64_t LlamaParameterCount(const LlamaConfig& config);

}  // namespace hlab::model::llama

#endif  // HLAB_MODEL_LLAMA_LLAMA_CONFIG_H_
