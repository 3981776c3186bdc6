// HybridLM: the decoder-only language model of the study.
//
// Token embedding, then n_layers pre-norm blocks
//   x += Mixer(RMSNorm(x));  x += SwiGLU(RMSNorm(x))
// with the mixer of each layer taken from config.layers, a final RMSNorm and
// the LM head (tied to the embedding unless config.tie_embeddings is false).
// Each residual add is made by the norm that reads its sum (AddRmsNorm,
// model/layers/norm.h), and the norms write the dtype the projections after
// them multiply in (bf16 under CPU autocast).
//
// Not thread-safe: one thread uses a model at a time (LibTorch's intra-op
// threads parallelise inside ops). The config must be valid
// (ValidateModelConfig); the constructor CHECKs it as a programmer error.
//
//   HybridLM model(config);
//   torch::Tensor logits = model->forward(tokens);       // (B, T) -> (B, T, V)
//   torch::Tensor loss = model->loss(inputs, targets);   // scalar, fp32
//   model->capture_hidden_states({2, 5});  // analysis hooks, see below
//
// Decoding (greedy generation, eval/token_scorer.h), in inference mode:
//   DecodeState state;
//   torch::Tensor logits = model->prefill(prompt, &state);  // as forward
//   logits = model->step(next_tokens, &state);  // (B, 1) -> (B, 1, V)
// Each mixer keeps what it needs of the tokens so far (Mixer::prefill and
// step, model/layers/mixer.h): the keys and values of softmax attention
// (windowed heads only their window), the recurrent state of Lightning,
// Mamba-2 and Gated DeltaNet, the short convolutions' last inputs. step's
// logits equal forward's over the whole sequence at its last position up to
// rounding (docs/evaluation.md, "Generation"). No length limit: RoPE takes
// any position, and full-attention layers keep every key (memory grows by
// 2 Hkv dh values per token and layer).
//
// Analysis hooks (for the mechanism analyses; they do not change training):
//   capture_hidden_states(layers)   residual stream after the given blocks
//   capture_attention(layers)       attention probabilities (B, H, T, T) of
//                                   the given softmax layers (small T only)
//   set_full_attention_key_limit(h) full-attention heads see only their last
//                                   h keys (0 = off)
//   set_efficient_receptive_field(s, m)  efficient layers (SWA, Lightning,
//                                   Mamba-2, GDN) run on overlapping windows
//                                   of m*s tokens, stride s, with reset
//                                   state, each giving its last s outputs
//                                   (appendix D.1: s = H/2, m = 3): the
//                                   output at t sees tokens from
//                                   (floor(t/s) - m + 1)*s on, i.e. between
//                                   (m-1)s and ms-1 previous tokens (s = 0:
//                                   off; m defaults to 2)
#ifndef HLAB_MODEL_HYBRID_LM_H_
#define HLAB_MODEL_HYBRID_LM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "model/config/model_config.h"
#include "model/layers/feed_forward.h"
#include "model/layers/linear.h"
#include "model/layers/mixer.h"
#include "model/layers/norm.h"

namespace hlab::model {

// One pre-norm block.
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const ModelConfig& config, int64_t layer_index);
  // x: (B, T, d) -> (B, T, d)
  torch::Tensor forward(const torch::Tensor& x);
  // The same with the residual adds left open: the block's input is x +
  // pending (pending undefined: x alone) and its output h + ffn_out, returned
  // as {h, ffn_out} for the next norm to add (AddRmsNorm). forward(x) is
  // forward_split(x, {}) summed.
  std::pair<torch::Tensor, torch::Tensor> forward_split(
      const torch::Tensor& x, const torch::Tensor& pending);
  // The same block with the mixer's reference (recurrent) form.
  torch::Tensor forward_reference(const torch::Tensor& x);

  // Decoding: forward_split with the mixer's prefill / step
  // (model/layers/mixer.h) on `state`. std::invalid_argument when the
  // receptive-field hook is on (its windows restart the state).
  std::pair<torch::Tensor, torch::Tensor> decode_split(
      const torch::Tensor& x, const torch::Tensor& pending, bool prefill,
      MixerState* state);

  // stride 0 = off; see HybridLM::set_efficient_receptive_field.
  void set_receptive_field(int64_t stride, int64_t span = 2) {
    receptive_field_ = stride;
    receptive_span_ = span;
  }

  std::shared_ptr<Mixer> mixer;
  RMSNorm mixer_norm{nullptr}, ffn_norm{nullptr};
  SwiGLU ffn{nullptr};

 private:
  torch::Tensor MixWithReceptiveField(const torch::Tensor& x);
  template <typename Mix>
  std::pair<torch::Tensor, torch::Tensor> Split(const torch::Tensor& x,
                                                const torch::Tensor& pending,
                                                const Mix& mix);
  int64_t receptive_field_ = 0;  // the windows' stride s
  int64_t receptive_span_ = 2;   // the windows' length in strides, m >= 2
};
TORCH_MODULE(Block);

// What decoding keeps of the tokens so far: one MixerState per layer.
struct DecodeState {
  std::vector<MixerState> layers;
  int64_t position = 0;  // tokens seen
};

class HybridLMImpl : public torch::nn::Module {
 public:
  explicit HybridLMImpl(const ModelConfig& config);

  // tokens: (B, T) int64 -> logits (B, T, V), fp32.
  torch::Tensor forward(const torch::Tensor& tokens);
  // forward's logits at the last position only, (B, 1, V), for a next
  // token: bitwise forward's last position where the whole logits fit in one
  // block of model/kernels/linear_cross_entropy.h, else the head runs over
  // that position alone (equal to rounding), so a long prompt at a large
  // vocabulary never holds its whole logits. tokens (B, T), T >= 1, else
  // std::invalid_argument.
  torch::Tensor last_logits(const torch::Tensor& tokens);
  // The same as forward from the token embeddings x = embedding(tokens),
  // (B, T, d):
  // gradients with respect to the inputs (gradient profiling, appendix D.3).
  torch::Tensor forward_embedded(const torch::Tensor& x);
  // The same with every mixer in its reference form (tests).
  torch::Tensor forward_reference(const torch::Tensor& tokens);
  // Decoding (see the top comment), in inference mode. prefill: tokens
  // (B, T), T >= 1 -> logits (B, T, V) as forward(tokens), and *state
  // replaced by the state after them. step: tokens (B, 1), the next token
  // of each row -> logits (B, 1, V), and *state advanced. Both capture
  // hidden states as forward does, of the tokens they run; attention
  // probabilities only prefill. std::invalid_argument with the efficient
  // receptive field on, or for a step without a prefill. last_only: the
  // logits of the last position only, (B, 1, V), as greedy generation
  // needs; bitwise forward's last position where the whole logits fit in
  // one block of model/kernels/linear_cross_entropy.h, else the head runs
  // over that position alone (equal to rounding).
  torch::Tensor prefill(const torch::Tensor& tokens, DecodeState* state,
                        bool last_only = false);
  torch::Tensor step(const torch::Tensor& tokens, DecodeState* state);
  // Mean next-token cross-entropy in fp32. inputs, targets: (B, T) int64;
  // targets equal to -1 are ignored. Where the fp32 logits would pass
  // LogitsBlockBytes() (256 MiB: 16,384 tokens of a 4,096-id vocabulary),
  // the head and the loss run in blocks of rows without keeping the logits
  // (model/kernels/linear_cross_entropy.h); the loss then equals the plain
  // path's to rounding.
  torch::Tensor loss(const torch::Tensor& inputs, const torch::Tensor& targets);
  // Per-token -log p(target) in fp32, (B, T), without gradients, the logits
  // bounded as in loss; targets -1 give 0. The same values as
  // -log_softmax(forward(inputs)).gather(targets) (bitwise where the logits
  // fit in one block).
  torch::Tensor token_nll(const torch::Tensor& inputs,
                          const torch::Tensor& targets);

  const ModelConfig& config() const { return config_; }
  int64_t num_layers() const { return static_cast<int64_t>(blocks_.size()); }
  Block block(int64_t layer) const { return blocks_.at(layer); }

  // Hooks. Layer indices out of range, or capture_attention on a layer that
  // is not softmax attention, throw std::invalid_argument.
  void capture_hidden_states(const std::vector<int64_t>& layers);
  // Residual stream after each captured block from the last forward,
  // (B, T, d), detached.
  const std::map<int64_t, torch::Tensor>& captured_hidden_states() const {
    return hidden_states_;
  }
  void capture_attention(const std::vector<int64_t>& layers);
  // (B, H, T, T) fp32 probabilities of a captured layer from the last forward.
  torch::Tensor captured_attention(int64_t layer) const;
  void set_full_attention_key_limit(int64_t keys);
  // Analysis hook: each full-attention head's q_proj gradient norm
  // (Attention::q_grad_norms) after a backward pass, layer then head order
  // (the full heads of a head-wise SWA layer only); empty for a model
  // without full-attention heads or before a backward pass.
  struct HeadNorm {
    int64_t layer = 0, head = 0;
    double norm = 0;
  };
  std::vector<HeadNorm> full_attention_q_grad_norms() const;
  // stride > 0 and span >= 2, or stride 0 (off); else std::invalid_argument.
  void set_efficient_receptive_field(int64_t stride, int64_t span = 2);

  torch::nn::Embedding embedding{nullptr};
  RMSNorm final_norm{nullptr};
  Linear lm_head{nullptr};  // null when tied

 private:
  torch::Tensor Run(const torch::Tensor& tokens, bool reference);
  torch::Tensor RunEmbedded(torch::Tensor x, bool reference);
  // The blocks over embedded tokens: the residual stream as {x, pending}
  // (their sum), for FinalNorm.
  std::pair<torch::Tensor, torch::Tensor> RunBlocks(torch::Tensor x,
                                                    bool reference);
  // The final norm over the residual stream x + pending.
  torch::Tensor FinalNorm(torch::Tensor x, const torch::Tensor& pending);
  // The LM head's weight (V, d): lm_head's, or the tied embedding's.
  const torch::Tensor& HeadWeight() const;
  // The final norm and the LM head over the residual stream x + pending.
  torch::Tensor Logits(torch::Tensor x, const torch::Tensor& pending);
  // Logits of the last position only, (B, 1, V) (last_logits).
  torch::Tensor LastLogits(torch::Tensor x, const torch::Tensor& pending);
  // Stores x + pending, the residual stream after block `layer`, when that
  // layer is captured.
  void CaptureHiddenState(int64_t layer, const torch::Tensor& x,
                          const torch::Tensor& pending);
  // prefill (true) or step over embedded tokens x; last_only as prefill's.
  torch::Tensor Decode(torch::Tensor x, bool prefill, DecodeState* state,
                       bool last_only);

  ModelConfig config_;
  std::vector<Block> blocks_;
  std::vector<int64_t> hidden_layers_;
  std::map<int64_t, torch::Tensor> hidden_states_;
};
TORCH_MODULE(HybridLM);

}  // namespace hlab::model

#endif  // HLAB_MODEL_HYBRID_LM_H_
