// LlamaModel: a LlamaForCausalLM read from a Hugging Face directory
// (config.json + model.safetensors, or sharded with
// model.safetensors.index.json), for inference only: the LongPPL reference
// that selects key tokens (eval/llama_scorer.h; docs/evaluation.md, "A
// Llama reference").
//
// The forward pass is Hugging Face's: token embedding; per layer
// x += o(attn(rope(q), rope(k), v)) on RMSNorm(x) with grouped-query causal
// attention (softmax in fp32), x += down(silu(gate(h)) * up(h)) on
// RMSNorm(x); a final RMSNorm and the LM head (the embedding when tied).
// RMSNorm is computed in fp32 and cast back, as Hugging Face does.
//
// Weights are memory-mapped: a tensor already in the compute dtype on the
// CPU is used in place (the mapping stays open as long as the model);
// otherwise it is converted once, straight from the mapping. Every tensor
// is checked at load against the config: a missing one, or one of another
// shape, is refused naming the tensor and both shapes.
//
// Thread-safety: Forward is const and may run concurrently (LibTorch ops
// only, no state).
//
//   LlamaLoadOptions options;  // fp32 on the CPU; bf16 by default on CUDA
//   HLAB_ASSIGN_OR_RETURN(auto llama, LlamaModel::Load(dir, options));
//   torch::Tensor logits = llama->Forward(ids);  // (B, T) -> (B, T, V) fp32
//   torch::Tensor nll = llama->TokenNll(inputs, targets);  // (B, T) fp32
#ifndef HLAB_MODEL_LLAMA_LLAMA_MODEL_H_
#define HLAB_MODEL_LLAMA_LLAMA_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "absl/status/statusor.h"
#include "model/llama/llama_config.h"
#include "model/llama/safetensors.h"

namespace hlab::model::llama {

struct LlamaLoadOptions {
  torch::Device device = torch::kCPU;
  // "fp32" or "bf16"; "" picks bf16 on CUDA and fp32 on the CPU.
  std::string dtype;
};

class LlamaModel {
 public:
  // Errors name the directory and the field or tensor:
  //   NotFound         no config.json or weights
  //   InvalidArgument  an unsupported config (llama_config.h) or dtype
  //   DataLoss         a malformed file, a missing tensor, a wrong shape
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(
      const std::string& dir, const LlamaLoadOptions& options);

  // ids: (B, T) integer token ids in [0, vocab_size) on any device ->
  // logits (B, T, vocab_size) in fp32 on device().
  torch::Tensor Forward(const torch::Tensor& ids) const;
  // inputs, targets: (B, T) token ids -> -log softmax(Forward(inputs))
  // [targets], (B, T) fp32 on device(), without the whole logits: the head
  // runs in blocks of rows of at most 256 MiB of fp32 logits
  // (model::LinearCrossEntropyBlockRows), bitwise the same values as from
  // Forward where they fit in one block. Llama 3's 128,256 ids at 16,384
  // tokens would otherwise be 8.4 GB of logits a sequence.
  torch::Tensor TokenNll(const torch::Tensor& inputs,
                         const torch::Tensor& targets) const;

  const LlamaConfig& config() const { return config_; }
  torch::Device device() const { return device_; }
  torch::ScalarType dtype() const { return dtype_; }
  // "model.safetensors" or "model.safetensors.index.json (4 shards)".
  const std::string& weights_description() const { return description_; }
  // The mapped files the weights were read from (e.g. to hash them).
  const SafetensorsCheckpoint& weights() const { return *weights_; }

 private:
  struct Layer {
    torch::Tensor input_norm, post_norm;  // (D)
    torch::Tensor q, k, v, o;             // (H*hd, D), (KV*hd, D) x2, (D, H*hd)
    torch::Tensor gate, up, down;         // (F, D) x2, (D, F)
  };

  LlamaModel() = default;
  // The final norm's output over ids (B, T): (B, T, D) in the compute dtype.
  torch::Tensor Hidden(const torch::Tensor& ids) const;
  torch::Tensor Attention(const Layer& layer, const torch::Tensor& h,
                          const torch::Tensor& cos,
                          const torch::Tensor& sin) const;

  LlamaConfig config_;
  torch::Device device_ = torch::kCPU;
  torch::ScalarType dtype_ = torch::kFloat32;
  std::string description_;
  std::shared_ptr<const SafetensorsCheckpoint> weights_;  // the mapping
  torch::Tensor inv_freq_;                                // (hd / 2) fp64
  torch::Tensor embed_, norm_, head_;                     // (V, D), (D), (V, D)
  std::vector<Layer> layers_;
};

}  // namespace hlab::model::llama

#endif  // HLAB_MODEL_LLAMA_LLAMA_MODEL_H_
