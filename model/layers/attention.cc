#include "model/layers/attention.h"

#include <algorithm>
#include <string>

#include <torch/torch.h>

#include "model/layers/init.h"
#include "model/layers/rope.h"

namespace hlab::model {

using internal::MakeLinear;

Attention::Attention(const ModelConfig& config, const MixerSpec& spec,
                     int64_t /*layer_index*/)
    : n_heads_(config.n_heads),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      rope_theta_(config.rope_theta) {
  TORCH_CHECK(n_kv_heads_ > 0 && n_heads_ % n_kv_heads_ == 0,
              "Attention: n_heads (", n_heads_,
              ") must be a multiple of n_kv_heads (", n_kv_heads_, ")");
  const int64_t group_size = n_heads_ / n_kv_heads_;
  switch (spec.kind) {
    case MixerKind::kFull:
      groups_.push_back({0, n_heads_, 0, !spec.nope});
      break;
    case MixerKind::kSlidingWindow:
      TORCH_CHECK(spec.window > 0, "Attention: swa needs window > 0");
      groups_.push_back({0, n_heads_, spec.window, true});
      break;
    case MixerKind::kHeadwiseSlidingWindow: {
      TORCH_CHECK(spec.window > 0, "Attention: hswa needs window > 0");
      const int64_t windowed = EffectiveWindowedHeads(config, spec);
      TORCH_CHECK(
          windowed > 0 && windowed <= n_heads_ && windowed % group_size == 0,
          "Attention: windowed heads (", windowed,
          ") must be a positive multiple of the GQA group size (", group_size,
          ") up to n_heads");
      groups_.push_back({0, windowed, spec.window, true});
      if (windowed < n_heads_) {
        groups_.push_back({windowed, n_heads_ - windowed, 0, !spec.nope});
      }
      break;
    }
    default:
      TORCH_CHECK(false, "Attention: not a softmax-attention kind: ",
                  std::string(MixerKindName(spec.kind)));
  }

  const int64_t d = config.d_model;
  const int64_t inner = n_heads_ * head_dim_;
  const int64_t kv_inner = n_kv_heads_ * head_dim_;
  q_proj_ = register_module("q_proj", MakeLinear(d, inner, config.init_std));
  k_proj_ = register_module("k_proj", MakeLinear(d, kv_inner, config.init_std));
  v_proj_ = register_module("v_proj", MakeLinear(d, kv_inner, config.init_std));
  o_proj_ =
      register_module("o_proj", MakeLinear(inner, d, ResidualInitStd(config)));
  sinks_ = register_parameter("sinks", torch::empty({n_heads_}));
  torch::NoGradGuard no_grad;
  sinks_.normal_(0.0, config.init_std);
}

torch::Tensor Attention::forward(const torch::Tensor& x) {
  return Forward(x, /*reference=*/false, /*cache=*/nullptr);
}

torch::Tensor Attention::forward_reference(const torch::Tensor& x) {
  return Forward(x, /*reference=*/true, /*cache=*/nullptr);
}

void Attention::set_key_limit(int64_t keys) {
  TORCH_CHECK(keys >= 0, "Attention: key limit must be >= 0, got ", keys);
  key_limit_ = keys;
}

void Attention::set_capture_probabilities(bool on) {
  capture_ = on;
  if (!on) captured_ = torch::Tensor();
}

torch::Tensor Attention::q_grad_norms() const {
  const torch::Tensor& grad = q_proj_->weight.grad();
  if (!grad.defined()) return torch::Tensor();
  // (H * dh, d) -> (H, dh * d): one row per head.
  return grad.detach().to(torch::kFloat64).reshape({n_heads_, -1}).norm(2, {1});
}

int64_t Attention::first_full_head() const {
  for (const HeadGroup& group : groups_) {
    if (group.window == 0) return group.head_begin;
  }
  return n_heads_;
}

int64_t Attention::EffectiveWindow(const HeadGroup& group) const {
  if (key_limit_ == 0) return group.window;
  if (group.window == 0) return key_limit_;
  return std::min(group.window, key_limit_);
}

Attention::GroupedHeads Attention::ProjectHeads(const torch::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1);
  const int64_t group_size = n_heads_ / n_kv_heads_;
  // One product for q, k and v; (B, T, heads * dh) -> (B, heads, T, dh),
  // views.
  const std::vector<torch::Tensor> qkv =
      ConcatenatedLinear(x, {q_proj_, k_proj_, v_proj_})
          .split_with_sizes({n_heads_ * head_dim_, n_kv_heads_ * head_dim_,
                             n_kv_heads_ * head_dim_},
                            -1);
  const torch::Tensor q =
      qkv[0].view({b, t, n_heads_, head_dim_}).transpose(1, 2);
  const torch::Tensor k =
      qkv[1].view({b, t, n_kv_heads_, head_dim_}).transpose(1, 2);
  const torch::Tensor v =
      qkv[2].view({b, t, n_kv_heads_, head_dim_}).transpose(1, 2);

  // One group: the tensors themselves (a split into one piece would still
  // cost a node, and its backward a copy).
  if (groups_.size() == 1) return {{q}, {k}, {v}, {sinks_}};
  // One split per tensor (not a narrow per group), so each gets one backward.
  std::vector<int64_t> head_sizes, kv_sizes;
  for (const HeadGroup& group : groups_) {
    head_sizes.push_back(group.heads);
    kv_sizes.push_back(group.heads / group_size);
  }
  return {q.split_with_sizes(head_sizes, 1), k.split_with_sizes(kv_sizes, 1),
          v.split_with_sizes(kv_sizes, 1), sinks_.split_with_sizes(head_sizes)};
}

torch::Tensor Attention::prefill(const torch::Tensor& x, MixerState* state) {
  TORCH_CHECK(state != nullptr, "Attention: prefill needs a state");
  return Forward(x, /*reference=*/false, state);
}

torch::Tensor Attention::Forward(const torch::Tensor& x, bool reference,
                                 MixerState* cache) {
  TORCH_CHECK(x.dim() == 3, "Attention: x must be (B, T, d), got ", x.sizes());
  const int64_t b = x.size(0), t = x.size(1);
  const GroupedHeads heads = ProjectHeads(x);
  std::vector<torch::Tensor> outputs, probabilities;
  if (cache != nullptr) {
    *cache = MixerState();
    cache->position = t;
  }
  for (size_t i = 0; i < groups_.size(); ++i) {
    torch::Tensor qg = heads.q[i], kg = heads.k[i];
    if (groups_[i].rope) {
      qg = ApplyRope(qg, rope_theta_);
      kg = ApplyRope(kg, rope_theta_);
    }
    const int64_t window = EffectiveWindow(groups_[i]);
    if (cache != nullptr) {
      const int64_t kept = window > 0 ? std::min(window, t) : t;
      cache->keys.push_back(kg.narrow(2, t - kept, kept).contiguous());
      cache->values.push_back(
          heads.v[i].narrow(2, t - kept, kept).contiguous());
    }
    outputs.push_back(
        reference ? NaiveAttention(qg, kg, heads.v[i], heads.sinks[i], window)
                  : BlockwiseAttention(qg, kg, heads.v[i], heads.sinks[i],
                                       window, blocks_));
    if (capture_) {
      probabilities.push_back(AttentionProbabilities(
          qg.detach(), kg.detach(), heads.sinks[i].detach(), window));
    }
  }
  if (capture_) {
    captured_ = probabilities.size() == 1 ? probabilities[0]
                                          : torch::cat(probabilities, 1);
  }
  const torch::Tensor o =
      outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 1);  // (B,H,T,dh)
  return o_proj_(o.transpose(1, 2).reshape({b, t, n_heads_ * head_dim_}));
}

torch::Tensor Attention::step(const torch::Tensor& x, MixerState* state) {
  TORCH_CHECK(x.dim() == 3 && x.size(1) == 1,
              "Attention: step takes x (B, 1, d), got ", x.sizes());
  TORCH_CHECK(state != nullptr && state->keys.size() == groups_.size(),
              "Attention: step needs the state of a prefill");
  const int64_t b = x.size(0), p = state->position;
  const GroupedHeads heads = ProjectHeads(x);
  std::vector<torch::Tensor> outputs;
  for (size_t i = 0; i < groups_.size(); ++i) {
    torch::Tensor qg = heads.q[i], kg = heads.k[i];
    if (groups_[i].rope) {
      qg = ApplyRopeAt(qg, rope_theta_, p);
      kg = ApplyRopeAt(kg, rope_theta_, p);
    }
    torch::Tensor keys = torch::cat({state->keys[i], kg}, 2);
    torch::Tensor values = torch::cat({state->values[i], heads.v[i]}, 2);
    const int64_t window = EffectiveWindow(groups_[i]);
    if (window > 0 && keys.size(2) > window) {
      keys = keys.narrow(2, keys.size(2) - window, window);
      values = values.narrow(2, values.size(2) - window, window);
    }
    state->keys[i] = keys;
    state->values[i] = values;
    outputs.push_back(DecodeAttention(qg, keys, values, heads.sinks[i]));
  }
  state->position = p + 1;
  const torch::Tensor o =
      outputs.size() == 1 ? outputs[0] : torch::cat(outputs, 1);  // (B,H,1,dh)
  return o_proj_(o.transpose(1, 2).reshape({b, 1, n_heads_ * head_dim_}));
}

}  // namespace hlab::model
