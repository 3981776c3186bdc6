#include "model/layers/gated_delta.h"

#include <cmath>

#include <torch/torch.h>

#include "model/kernels/gated_delta_kernel.h"
#include "model/kernels/scalar_gla_kernel.h"
#include "model/layers/gated_delta_inputs.h"
#include "model/layers/init.h"
#include "model/layers/mamba2.h"
#include "model/layers/norm.h"

namespace hlab::model {

using internal::MakeLinear;

GatedDeltaNet::GatedDeltaNet(const ModelConfig& config, const MixerSpec& spec)
    : n_heads_(GdnHeads(config, spec)),
      qk_heads_(GdnQkHeads(config, spec)),
      head_dim_(GdnHeadDim(config, spec)),
      chunk_(EffectiveChunk(spec)),
      gpu_chunk_(EffectiveChunk(spec, /*on_gpu=*/true)),
      eps_(config.norm_eps) {
  const int64_t d = config.d_model;
  const int64_t inner = n_heads_ * head_dim_, qk = qk_heads_ * head_dim_;
  const double std = config.init_std;
  q_proj_ = register_module("q_proj", MakeLinear(d, qk, std));
  k_proj_ = register_module("k_proj", MakeLinear(d, qk, std));
  v_proj_ = register_module("v_proj", MakeLinear(d, inner, std));
  g_proj_ = register_module("g_proj", MakeLinear(d, inner, std));
  o_proj_ =
      register_module("o_proj", MakeLinear(inner, d, ResidualInitStd(config)));
  a_proj_ = register_module("a_proj", MakeLinear(d, n_heads_, std));
  b_proj_ = register_module("b_proj", MakeLinear(d, n_heads_, std));
  if (spec.short_conv) {
    conv_ = register_module("conv", ShortConv(2 * qk + inner, spec.conv_size,
                                              /*bias=*/false));
  }
  a_log_ = register_parameter("A_log", InitALog(n_heads_));
  dt_bias_ = register_parameter("dt_bias", InitDtBias(n_heads_));
  o_norm_ = register_parameter("o_norm", torch::ones({head_dim_}));
}

torch::Tensor GatedDeltaNet::forward(const torch::Tensor& x) {
  return Forward(x, RecurrentPath::kChunked, nullptr);
}

torch::Tensor GatedDeltaNet::forward_reference(const torch::Tensor& x) {
  return Forward(x, RecurrentPath::kRecurrent, nullptr);
}

torch::Tensor GatedDeltaNet::prefill(const torch::Tensor& x,
                                     MixerState* state) {
  TORCH_CHECK(state != nullptr, "GatedDeltaNet: prefill needs a state");
  *state = MixerState();
  return Forward(x, RecurrentPath::kPrefill, state);
}

torch::Tensor GatedDeltaNet::step(const torch::Tensor& x, MixerState* state) {
  return Forward(x, RecurrentPath::kStep, state);
}

torch::Tensor GatedDeltaNet::Forward(const torch::Tensor& x, RecurrentPath path,
                                     MixerState* state) {
  TORCH_CHECK(x.dim() == 3, "GatedDeltaNet: expected x (B, T, d), got ",
              x.sizes());
  const int64_t b = x.size(0), t = x.size(1);
  const int64_t h = n_heads_, dh = head_dim_, inner = h * dh;
  const int64_t qk = qk_heads_ * dh;

  // One product for q, k (B, T, Hqk dk each), v (B, T, inner), beta and the
  // decay (B, T, Hg each); the output gate's product stays apart
  // (ConcatenatedLinear, model/layers/linear.h: wider concatenations measured
  // slower).
  torch::Tensor proj =
      ConcatenatedLinear(x, {q_proj_, k_proj_, v_proj_, b_proj_, a_proj_});
  // One depthwise conv over the q, k, v channels.
  if (conv_) {
    const std::vector<torch::Tensor> parts =
        proj.split_with_sizes({2 * qk + inner, 2 * h}, -1);
    proj =
        torch::cat({RunShortConv(conv_, parts[0], path, state), parts[1]}, -1);
  }
  // SiLU, heads, q and k L2-normalised, beta and the log-decay g in one pass
  // (model/layers/gated_delta_inputs.h): q, k (B, Hqk, T, dh), v (B, Hg, T,
  // dh), beta, g (B, Hg, T), fp32 (fp64 for fp64 input).
  const GatedDeltaInputTensors in =
      GatedDeltaInputs(proj, h, qk_heads_, a_log_, dt_bias_);
  // Value head j reads q, k head j / (Hg / Hqk): each head repeated as an
  // expand and one copy, whose backward sums the repeats in order
  // (repeat_interleave is an index_select, its backward zeros and an
  // index_add: the same sums, bit for bit, in more passes).
  const auto widen = [&](const torch::Tensor& heads) {
    if (qk_heads_ == h) return heads;
    return heads.unsqueeze(2)
        .expand({b, qk_heads_, h / qk_heads_, t, dh})
        .reshape({b, h, t, dh});
  };
  const torch::Tensor q = widen(in.q), k = widen(in.k);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
  const torch::Tensor o =
      RunGatedDelta(q, k, in.v, in.g, in.beta, scale,
                    x.is_cuda() ? gpu_chunk_ : chunk_, path, state);

  // fla's FusedRMSNormGated: per-head RMSNorm first, then the SiLU gate
  // (Mamba-2 gates first), in one fused pass (model/layers/norm.h), written in
  // the dtype o_proj multiplies in.
  const torch::Tensor y = GatedRmsNorm(
      o.transpose(1, 2), g_proj_(x).view({b, t, h, dh}), o_norm_, eps_,
      {.order = GatedNormOrder::kNormThenGate,
       .out_dtype = LinearInputDtype(x.scalar_type())});  // (B, T, Hg, dv)
  return o_proj_(y.reshape({b, t, inner}));
}

}  // namespace hlab::model
