#include "model/layers/lightning.h"

#include <cmath>

#include <torch/torch.h>

#include "model/kernels/scalar_gla_kernel.h"
#include "model/layers/init.h"
#include "model/layers/norm.h"

namespace hlab::model {

using internal::MakeLinear;

namespace {

// 2^(-8h/n) for h = 1..n, n a power of two.
std::vector<double> PowerOfTwoSlopes(int64_t n) {
  std::vector<double> slopes;
  slopes.reserve(n);
  for (int64_t h = 1; h <= n; ++h) {
    slopes.push_back(
        std::pow(2.0, -8.0 * static_cast<double>(h) / static_cast<double>(n)));
  }
  return slopes;
}

}  // namespace

std::vector<double> AlibiSlopes(int64_t n_heads) {
  TORCH_CHECK(n_heads > 0, "AlibiSlopes: n_heads must be > 0");
  int64_t closest = 1;
  while (closest * 2 <= n_heads) closest *= 2;
  std::vector<double> slopes = PowerOfTwoSlopes(closest);
  if (closest == n_heads) return slopes;
  // Every other slope of the next power of two, as many as are missing.
  const std::vector<double> next = PowerOfTwoSlopes(2 * closest);
  for (int64_t i = 0; static_cast<int64_t>(slopes.size()) < n_heads; i += 2) {
    slopes.push_back(next[i]);
  }
  return slopes;
}

double LightningLayerDecayFactor(int64_t layer_index, int64_t n_layers) {
  if (n_layers <= 1) return 1.0;
  return 1.0 -
         static_cast<double>(layer_index) / static_cast<double>(n_layers - 1) +
         1e-5;
}

Lightning::Lightning(const ModelConfig& config, const MixerSpec& spec,
                     int64_t layer_index)
    : n_heads_(config.n_heads),
      n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim),
      chunk_(EffectiveChunk(spec)),
      eps_(config.norm_eps) {
  TORCH_CHECK(n_heads_ % n_kv_heads_ == 0,
              "Lightning: n_heads must be a multiple of n_kv_heads");
  const int64_t d = config.d_model;
  const int64_t inner = n_heads_ * head_dim_;
  const int64_t kv_inner = n_kv_heads_ * head_dim_;
  q_proj_ = register_module("q_proj", MakeLinear(d, inner, config.init_std));
  k_proj_ = register_module("k_proj", MakeLinear(d, kv_inner, config.init_std));
  v_proj_ = register_module("v_proj", MakeLinear(d, kv_inner, config.init_std));
  gate_down_ =
      register_module("gate_down", MakeLinear(d, head_dim_, config.init_std));
  gate_up_ =
      register_module("gate_up", MakeLinear(head_dim_, inner, config.init_std));
  o_proj_ =
      register_module("o_proj", MakeLinear(inner, d, ResidualInitStd(config)));
  out_norm_ = register_parameter("out_norm", torch::ones({inner}));
  std::vector<double> slopes = AlibiSlopes(n_heads_);
  const double factor = LightningLayerDecayFactor(layer_index, config.n_layers);
  for (double& s : slopes) s *= factor;
  slopes_ = register_buffer("slopes", torch::tensor(slopes, torch::kFloat32));
}

torch::Tensor Lightning::forward(const torch::Tensor& x) {
  return Forward(x, RecurrentPath::kChunked, nullptr);
}

torch::Tensor Lightning::forward_reference(const torch::Tensor& x) {
  return Forward(x, RecurrentPath::kRecurrent, nullptr);
}

torch::Tensor Lightning::prefill(const torch::Tensor& x, MixerState* state) {
  TORCH_CHECK(state != nullptr, "Lightning: prefill needs a state");
  *state = MixerState();
  return Forward(x, RecurrentPath::kPrefill, state);
}

torch::Tensor Lightning::step(const torch::Tensor& x, MixerState* state) {
  return Forward(x, RecurrentPath::kStep, state);
}

torch::Tensor Lightning::Forward(const torch::Tensor& x, RecurrentPath path,
                                 MixerState* state) {
  TORCH_CHECK(x.dim() == 3, "Lightning: expected x (B, T, d), got ", x.sizes());
  const int64_t b = x.size(0), t = x.size(1);
  const int64_t inner = n_heads_ * head_dim_;
  const int64_t kv_inner = n_kv_heads_ * head_dim_;

  // One product for q, k, v and the gate's down projection
  // (ConcatenatedLinear, model/layers/linear.h): (B, T, inner + 2 kv_inner +
  // dh).
  const std::vector<torch::Tensor> proj =
      ConcatenatedLinear(x, {q_proj_, k_proj_, v_proj_, gate_down_})
          .split_with_sizes({inner + 2 * kv_inner, head_dim_}, -1);
  const std::vector<torch::Tensor> qkv =
      torch::silu(proj[0]).split_with_sizes({inner, kv_inner, kv_inner}, -1);
  const torch::Tensor q = qkv[0].view({b, t, n_heads_, head_dim_});
  // K and V keep their n_kv_heads heads: the kernel serves each to its
  // group of query heads.
  const torch::Tensor k = qkv[1].view({b, t, n_kv_heads_, head_dim_});
  const torch::Tensor v = qkv[2].view({b, t, n_kv_heads_, head_dim_});

  // Constant log-decay -s_h, shared by the batch: (1, H, T).
  const torch::Tensor g =
      (-slopes_).view({1, n_heads_, 1}).expand({1, n_heads_, t});
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  const torch::Tensor qh = q.transpose(1, 2), kh = k.transpose(1, 2),
                      vh = v.transpose(1, 2);  // (B, H or Hkv, T, dh)
  // (B, H, T, dh)
  const torch::Tensor o =
      RunScalarGla(qh, kh, vh, g, scale, chunk_, path, state);

  // RmsNorm(o) * sigmoid(gate) in one fused pass (model/layers/norm.h), written
  // in the dtype o_proj multiplies in.
  const torch::Tensor y =
      GatedRmsNorm(o.transpose(1, 2).reshape({b, t, inner}), gate_up_(proj[1]),
                   out_norm_, eps_,
                   {.order = GatedNormOrder::kNormThenGate,
                    .activation = GateActivation::kSigmoid,
                    .out_dtype = LinearInputDtype(x.scalar_type())});
  return o_proj_(y);
}

}  // namespace hlab::model
