#include "model/layers/mamba2.h"

#include <cmath>

#include <torch/torch.h>

#include "model/kernels/scalar_gla_kernel.h"
#include "model/layers/init.h"
#include "model/layers/mamba2_inputs.h"
#include "model/layers/norm.h"

namespace hlab::model {

using internal::MakeLinear;

torch::Tensor InitDtBias(int64_t heads) {
  constexpr double kDtMin = 1e-3, kDtMax = 0.1, kDtFloor = 1e-4;
  const torch::Tensor dt =
      torch::exp(torch::rand({heads}, torch::kFloat64) *
                     (std::log(kDtMax) - std::log(kDtMin)) +
                 std::log(kDtMin))
          .clamp_min(kDtFloor);
  // softplus^-1(dt) = dt + log(1 - exp(-dt)).
  return (dt + torch::log(-torch::expm1(-dt))).to(torch::kFloat32);
}

torch::Tensor InitALog(int64_t heads) {
  return torch::empty({heads}).uniform_(1.0, 16.0).log();
}

Mamba2::Mamba2(const ModelConfig& config, const MixerSpec& spec)
    : d_inner_(spec.ssm_expand * config.d_model),
      head_dim_(spec.ssm_head_dim),
      n_heads_(Mamba2Heads(config, spec)),
      state_(spec.ssm_state),
      chunk_(EffectiveChunk(spec)),
      eps_(config.norm_eps) {
  TORCH_CHECK(n_heads_ * head_dim_ == d_inner_,
              "Mamba2: ssm_head_dim must divide ssm_expand * d_model");
  const int64_t d = config.d_model;
  in_proj_ = register_module(
      "in_proj",
      MakeLinear(d, 2 * d_inner_ + 2 * state_ + n_heads_, config.init_std));
  out_proj_ = register_module("out_proj",
                              MakeLinear(d_inner_, d, ResidualInitStd(config)));
  if (spec.short_conv) {
    conv_ = register_module(
        "conv", ShortConv(d_inner_ + 2 * state_, spec.conv_size, true));
  }
  a_log_ = register_parameter("A_log", InitALog(n_heads_));
  dt_bias_ = register_parameter("dt_bias", InitDtBias(n_heads_));
  d_skip_ = register_parameter("D", torch::ones({n_heads_}));
  norm_weight_ = register_parameter("norm_weight", torch::ones({d_inner_}));
}

torch::Tensor Mamba2::forward(const torch::Tensor& x) {
  return Forward(x, RecurrentPath::kChunked, nullptr);
}

torch::Tensor Mamba2::forward_reference(const torch::Tensor& x) {
  return Forward(x, RecurrentPath::kRecurrent, nullptr);
}

torch::Tensor Mamba2::prefill(const torch::Tensor& x, MixerState* state) {
  TORCH_CHECK(state != nullptr, "Mamba2: prefill needs a state");
  *state = MixerState();
  return Forward(x, RecurrentPath::kPrefill, state);
}

torch::Tensor Mamba2::step(const torch::Tensor& x, MixerState* state) {
  return Forward(x, RecurrentPath::kStep, state);
}

torch::Tensor Mamba2::Forward(const torch::Tensor& x, RecurrentPath path,
                              MixerState* state) {
  TORCH_CHECK(x.dim() == 3, "Mamba2: expected x (B, T, d), got ", x.sizes());
  const int64_t b = x.size(0), t = x.size(1);

  torch::Tensor proj = in_proj_(x);  // [z, x, Bm, Cm, dt]
  if (conv_) {
    const std::vector<torch::Tensor> parts =
        proj.split_with_sizes({d_inner_, d_inner_ + 2 * state_, n_heads_}, -1);
    proj = torch::cat(
        {parts[0], RunShortConv(conv_, parts[1], path, state), parts[2]}, -1);
  }
  // SiLU, dt, the decays and the D skip term in one pass (model/
  // mamba2_inputs.h), in fp32 (fp64 for fp64 input). ngroups = 1: C and B
  // are shared by all heads, (B, 1, T, N).
  const Mamba2InputTensors in =
      Mamba2Inputs(proj, n_heads_, state_, a_log_, dt_bias_, d_skip_);
  const torch::Tensor q = in.q.unsqueeze(1), k = in.k.unsqueeze(1);
  const torch::Tensor v = in.v.transpose(1, 2);  // (B, Hm, T, P)
  const torch::Tensor ssd =
      RunScalarGla(q, k, v, in.g, 1.0, chunk_, path, state);

  const torch::Tensor y = ssd.transpose(1, 2) + in.skip;  // (B, T, Hm, P)
  // Written in the dtype out_proj multiplies in (model/layers/linear.h).
  return out_proj_(
      GatedRmsNorm(y.reshape({b, t, d_inner_}), in.z, norm_weight_, eps_,
                   {.out_dtype = LinearInputDtype(x.scalar_type())}));
}

}  // namespace hlab::model
