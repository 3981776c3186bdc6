// libFuzzer target: Hugging Face model files (model/llama/): a safetensors
// header and a LlamaForCausalLM config.json. Any bytes give tensors whose
// bytes lie inside the input, or an error naming the file, never a crash;
// a parsed header encodes back to a file that parses to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/llama/llama_config.h"
#include "model/llama/safetensors.h"

namespace {

using hlab::model::llama::SafetensorsEntry;
using hlab::model::llama::SafetensorsTensor;

void CheckSafetensors(const std::string& input) {
  auto tensors = hlab::model::llama::ParseSafetensors(input, "m.safetensors");
  if (!tensors.ok()) {
    if (tensors.status().message().find("m.safetensors") == std::string::npos) {
      std::abort();
    }
    return;
  }
  const auto* begin = reinterpret_cast<const uint8_t*>(input.data());
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, t] : *tensors) {
    if (t.data < begin || t.data + t.bytes > begin + input.size()) std::abort();
    entries.push_back(
        {name, t.dtype, t.shape,
         std::string(reinterpret_cast<const char*>(t.data), t.bytes)});
  }
  const std::string again = hlab::model::llama::EncodeSafetensors(entries);
  auto reparsed = hlab::model::llama::ParseSafetensors(again, "again");
  if (!reparsed.ok() || reparsed->size() != tensors->size()) std::abort();
  for (const auto& [name, t] : *reparsed) {
    const SafetensorsTensor& original = tensors->at(name);
    if (t.shape != original.shape || t.dtype != original.dtype ||
        t.bytes != original.bytes) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  CheckSafetensors(input);
  auto config = hlab::model::llama::ParseLlamaConfig(input, "config.json");
  if (config.ok()) {
    if (config->head_dim % 2 != 0 ||
        config->num_attention_heads % config->num_key_value_heads != 0 ||
        hlab::model::llama::RopeInverseFrequencies(*config).size() !=
            static_cast<size_t>(config->head_dim / 2)) {
      std::abort();
    }
  } else if (config.status().message().find("config.json") ==
             std::string::npos) {
    std::abort();
  }
  return 0;
}
