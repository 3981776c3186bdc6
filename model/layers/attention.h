// Attention: the softmax-attention mixer (full, sliding-window and head-wise
// sliding-window), with GQA, RoPE or NoPE, and a learnable per-head sink.
//
// For x: (B, T, d), with H = n_heads, Hkv = n_kv_heads, dh = head_dim and
// G = H / Hkv query heads per KV head:
//   q = q_proj x    (B, T, H * dh)   -> (B, H, T, dh), RoPE unless NoPE
//   k = k_proj x    (B, T, Hkv * dh) -> (B, Hkv, T, dh), same rotation as q
//   v = v_proj x    (B, T, Hkv * dh) -> (B, Hkv, T, dh)
//   o = BlockwiseAttention(q, k, v, sinks, window)  (B, H, T, dh)
//   y = o_proj o    (B, T, H * dh)   -> (B, T, d)
// Windows by kind:
//   kFull                  every head full (window 0); NoPE if spec.nope.
//   kSlidingWindow         every head sees its last spec.window keys; RoPE.
//   kHeadwiseSlidingWindow the first EffectiveWindowedHeads(config, spec)
//                          query heads (whole KV groups) are windowed with
//                          RoPE, the others full (NoPE if spec.nope); the two
//                          groups run as separate kernel calls.
// Parameters: q_proj (d -> H*dh), k_proj, v_proj (d -> Hkv*dh), o_proj
// (H*dh -> d), linear without bias; sinks (H). Init N(0, init_std), o_proj
// N(0, ResidualInitStd(config)), sinks N(0, init_std).
//
// Under bf16 CPU autocast the projections give bf16 q/k/v and the kernel runs
// its matmuls in bf16 (softmax statistics in fp32).
//
// Decoding (Mixer::prefill / step): the state keeps, per head group, the
// keys (after RoPE) and values of the tokens the group sees, MixerState::keys
// and ::values: all of them for full heads, the last `window` (after the key
// limit) for windowed ones; and the position, which rotates the next token's
// q and k. A step attends its query to the kept keys in fp32 (fp64 for fp64
// input), the sink included.
//
// Not thread-safe (a module; the analysis hooks are plain members).
//
//   auto attn = std::make_shared<Attention>(config, config.layers[0], 0);
//   torch::Tensor y = attn->forward(x);          // x, y: (B, T, d_model)
//   attn->set_capture_probabilities(true);
//   attn->forward(x);
//   torch::Tensor p = attn->captured_probabilities();  // (B, H, T, T)
#ifndef HLAB_MODEL_LAYERS_ATTENTION_H_
#define HLAB_MODEL_LAYERS_ATTENTION_H_

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "model/config/model_config.h"
#include "model/kernels/attention_kernel.h"
#include "model/layers/linear.h"
#include "model/layers/mixer.h"

namespace hlab::model {

class Attention final : public Mixer {
 public:
  // spec.kind must be kFull, kSlidingWindow or kHeadwiseSlidingWindow, and
  // config valid (ValidateModelConfig). layer_index is informational.
  Attention(const ModelConfig& config, const MixerSpec& spec,
            int64_t layer_index);

  // x: (B, T, d_model) -> (B, T, d_model), with the blockwise kernel.
  torch::Tensor forward(const torch::Tensor& x) override;
  // The same with NaiveAttention (O(T^2) memory): the reference for tests.
  torch::Tensor forward_reference(const torch::Tensor& x) override;
  torch::Tensor prefill(const torch::Tensor& x, MixerState* state) override;
  torch::Tensor step(const torch::Tensor& x, MixerState* state) override;

  // Analysis hook: full-attention heads see only their last `keys` keys
  // (0 = off, the default); windowed heads see min(window, keys).
  void set_key_limit(int64_t keys);
  int64_t key_limit() const { return key_limit_; }

  // Analysis hook: when on, forward() and forward_reference() also store the
  // detached attention probabilities of their last call, (B, H, T, T) in
  // fp32 (the sink's share excluded). O(T^2) memory: for small T only.
  void set_capture_probabilities(bool on);
  // The probabilities of the last captured call; undefined before one.
  torch::Tensor captured_probabilities() const { return captured_; }

  // Analysis hook (appendix D.4's formation curve): the Frobenius norm of
  // each query head's rows of q_proj's weight gradient, (H) fp64 in head
  // order; undefined before a backward pass has filled the gradient.
  torch::Tensor q_grad_norms() const;
  // The first head that is not windowed: 0 for full attention, the
  // windowed heads' count for head-wise SWA, H for SWA (no full head).
  int64_t first_full_head() const;

  // Kernel block sizes (tuning; the defaults suit the CPU target).
  void set_blocks(const AttentionBlocks& blocks) { blocks_ = blocks; }

 private:
  // A set of query heads [head_begin, head_begin + heads) over whole KV
  // groups, sharing one window and one position encoding.
  struct HeadGroup {
    int64_t head_begin = 0;
    int64_t heads = 0;
    int64_t window = 0;  // 0 = full
    bool rope = true;
  };

  // q (B, H, T, dh), k and v (B, Hkv, T, dh) of x, split by head group,
  // and the sinks of each group's heads; views.
  struct GroupedHeads {
    std::vector<torch::Tensor> q, k, v, sinks;
  };
  GroupedHeads ProjectHeads(const torch::Tensor& x);
  // With `cache`, also the state after x (prefill).
  torch::Tensor Forward(const torch::Tensor& x, bool reference,
                        MixerState* cache);
  // The group's window after the key limit.
  int64_t EffectiveWindow(const HeadGroup& group) const;

  int64_t n_heads_, n_kv_heads_, head_dim_;
  double rope_theta_;
  std::vector<HeadGroup> groups_;  // in head order, covering all H heads
  AttentionBlocks blocks_;
  int64_t key_limit_ = 0;
  bool capture_ = false;
  torch::Tensor captured_;

  Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
  torch::Tensor sinks_;  // (H)
};

}  // namespace hlab::model

#endif  // HLAB_MODEL_LAYERS_ATTENTION_H_
