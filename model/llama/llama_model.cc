#include "model/llama/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/kernels/linear_cross_entropy.h"

namespace hlab::model::llama {
namespace {

// Score elements (B * H * rows * T) per block of query rows in the
// attention without a fused kernel: bounds its fp32 scores to ~1 GiB.
constexpr int64_t kScoreElements = int64_t{1} << 28;

torch::ScalarType TorchType(SafetensorsDType dtype) {
  switch (dtype) {
    case SafetensorsDType::kF64:
      return torch::kFloat64;
    case SafetensorsDType::kF32:
      return torch::kFloat32;
    case SafetensorsDType::kF16:
      return torch::kFloat16;
    case SafetensorsDType::kBF16:
      return torch::kBFloat16;
  }
  return torch::kFloat32;
}

// The tensor `name`, of exactly `shape`, as `dtype` on `device`: in place
// when the file already holds it so on the CPU (and it is aligned), else
// converted once from the mapping.
absl::StatusOr<torch::Tensor> LoadTensor(const SafetensorsCheckpoint& weights,
                                         const std::string& dir,
                                         const std::string& name,
                                         const std::vector<int64_t>& shape,
                                         torch::ScalarType dtype,
                                         torch::Device device) {
  const SafetensorsTensor* t = weights.Find(name);
  if (t == nullptr) {
    return absl::DataLossError(absl::StrCat(
        dir, ": tensor '", name, "' is missing from ", weights.description(),
        " (its config.json needs it: the weights and "
        "config are of different models?)"));
  }
  if (t->shape != shape) {
    return absl::DataLossError(absl::StrCat(
        dir, ": tensor '", name, "' has shape [", absl::StrJoin(t->shape, ", "),
        "] in ", t->file, ", but config.json gives [",
        absl::StrJoin(shape, ", "), "]"));
  }
  const torch::ScalarType stored = TorchType(t->dtype);
  const size_t element = SafetensorsDTypeSize(t->dtype);
  // from_blob needs a writable pointer; the tensor is only ever read.
  void* data = const_cast<uint8_t*>(t->data);
  torch::Tensor raw;
  if (reinterpret_cast<uintptr_t>(data) % element == 0) {
    raw = torch::from_blob(data, shape, torch::TensorOptions().dtype(stored));
  } else {
    raw = torch::from_blob(data, {static_cast<int64_t>(t->bytes)},
                           torch::TensorOptions().dtype(torch::kUInt8))
              .clone()
              .view(stored)
              .view(shape);
  }
  return raw.to(device, dtype);
}

// x: (..., D) -> RMSNorm in fp32, cast back to x's dtype, times `weight`.
torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                      double eps) {
  torch::Tensor x32 = x.to(torch::kFloat32);
  torch::Tensor normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + eps);
  return weight * normed.to(x.scalar_type());
}

// x: (B, heads, T, hd); cos, sin: (T, hd) -> the half-split rotation.
torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos,
                          const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor x1 = x.narrow(-1, 0, half);
  torch::Tensor x2 = x.narrow(-1, half, half);
  torch::Tensor rotated = torch::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

#if TORCH_VERSION_MAJOR < 2
// Causal attention, q: (B, H, T, hd), k and v: (B, H, T, hd) -> (B, H, T,
// hd); scores and softmax in fp32, in blocks of query rows.
torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v) {
  const int64_t batch = q.size(0), heads = q.size(1), t = q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const int64_t rows = std::max<int64_t>(
      16, kScoreElements / std::max<int64_t>(1, batch * heads * t));
  std::vector<torch::Tensor> out;
  for (int64_t begin = 0; begin < t; begin += rows) {
    const int64_t n = std::min(rows, t - begin);
    const int64_t keys = begin + n;  // causal: no key past the last row
    torch::Tensor qb = q.narrow(2, begin, n);
    torch::Tensor kb = k.narrow(2, 0, keys);
    torch::Tensor vb = v.narrow(2, 0, keys);
    torch::Tensor scores =
        torch::matmul(qb, kb.transpose(2, 3)).to(torch::kFloat32) * scale;
    // Row i (absolute begin + i) sees keys j <= begin + i.
    torch::Tensor row =
        torch::arange(begin, begin + n, q.options().dtype(torch::kInt64))
            .unsqueeze(1);
    torch::Tensor col =
        torch::arange(0, keys, q.options().dtype(torch::kInt64)).unsqueeze(0);
    scores.masked_fill_(col > row, -std::numeric_limits<float>::infinity());
    torch::Tensor probs = torch::softmax(scores, -1).to(q.scalar_type());
    out.push_back(torch::matmul(probs, vb));
  }
  return out.size() == 1 ? out.front() : torch::cat(out, 2);
}
#endif

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(
    const std::string& dir, const LlamaLoadOptions& options) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  HLAB_ASSIGN_OR_RETURN(m->config_, ReadLlamaConfig(dir));
  if (options.dtype == "fp32") {
    m->dtype_ = torch::kFloat32;
  } else if (options.dtype == "bf16") {
    m->dtype_ = torch::kBFloat16;
  } else if (options.dtype.empty()) {
    m->dtype_ = options.device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype: '", options.dtype, "' is not one of fp32, bf16"));
  }
  m->device_ = options.device;
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsCheckpoint> weights,
                        SafetensorsCheckpoint::Open(dir));
  m->weights_ = std::move(weights);
  m->description_ = m->weights_->description();
  const LlamaConfig& c = m->config_;
  const int64_t d = c.hidden_size, f = c.intermediate_size;
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  auto load = [&](const std::string& name,
                  std::vector<int64_t> shape) -> absl::StatusOr<torch::Tensor> {
    return LoadTensor(*m->weights_, dir, name, shape, m->dtype_, m->device_);
  };
  HLAB_ASSIGN_OR_RETURN(m->embed_,
                        load("model.embed_tokens.weight", {c.vocab_size, d}));
  HLAB_ASSIGN_OR_RETURN(m->norm_, load("model.norm.weight", {d}));
  if (c.tie_word_embeddings) {
    if (m->weights_->Find("lm_head.weight") != nullptr) {
      return absl::DataLossError(absl::StrCat(
          dir,
          ": tensor 'lm_head.weight' is present, but config.json says "
          "tie_word_embeddings: true (the head is the embedding); which "
          "one is meant?"));
    }
    m->head_ = m->embed_;
  } else {
    HLAB_ASSIGN_OR_RETURN(m->head_, load("lm_head.weight", {c.vocab_size, d}));
  }
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    Layer l;
    HLAB_ASSIGN_OR_RETURN(l.input_norm,
                          load(p + "input_layernorm.weight", {d}));
    HLAB_ASSIGN_OR_RETURN(l.post_norm,
                          load(p + "post_attention_layernorm.weight", {d}));
    HLAB_ASSIGN_OR_RETURN(l.q, load(p + "self_attn.q_proj.weight", {q, d}));
    HLAB_ASSIGN_OR_RETURN(l.k, load(p + "self_attn.k_proj.weight", {kv, d}));
    HLAB_ASSIGN_OR_RETURN(l.v, load(p + "self_attn.v_proj.weight", {kv, d}));
    HLAB_ASSIGN_OR_RETURN(l.o, load(p + "self_attn.o_proj.weight", {d, q}));
    HLAB_ASSIGN_OR_RETURN(l.gate, load(p + "mlp.gate_proj.weight", {f, d}));
    HLAB_ASSIGN_OR_RETURN(l.up, load(p + "mlp.up_proj.weight", {f, d}));
    HLAB_ASSIGN_OR_RETURN(l.down, load(p + "mlp.down_proj.weight", {d, f}));
    m->layers_.push_back(std::move(l));
  }
  const std::vector<double> inv = RopeInverseFrequencies(c);
  m->inv_freq_ = torch::tensor(inv, torch::kFloat64).to(m->device_);
  return m;
}

torch::Tensor LlamaModel::Attention(const Layer& layer, const torch::Tensor& h,
                                    const torch::Tensor& cos,
                                    const torch::Tensor& sin) const {
  const int64_t b = h.size(0), t = h.size(1), hd = config_.head_dim;
  const int64_t heads = config_.num_attention_heads;
  const int64_t kv_heads = config_.num_key_value_heads;
  // (B, T, D) -> (B, heads, T, hd)
  torch::Tensor q =
      torch::linear(h, layer.q).view({b, t, heads, hd}).transpose(1, 2);
  torch::Tensor k =
      torch::linear(h, layer.k).view({b, t, kv_heads, hd}).transpose(1, 2);
  torch::Tensor v =
      torch::linear(h, layer.v).view({b, t, kv_heads, hd}).transpose(1, 2);
  q = ApplyRotary(q, cos, sin);
  k = ApplyRotary(k, cos, sin);
  if (kv_heads != heads) {  // GQA: query head i reads KV head i / group
    const int64_t group = heads / kv_heads;
    k = k.unsqueeze(2)
            .expand({b, kv_heads, group, t, hd})
            .reshape({b, heads, t, hd});
    v = v.unsqueeze(2)
            .expand({b, kv_heads, group, t, hd})
            .reshape({b, heads, t, hd});
  }
#if TORCH_VERSION_MAJOR >= 2
  torch::Tensor attended = at::scaled_dot_product_attention(
      q.contiguous(), k.contiguous(), v.contiguous(), {}, 0.0,
      /*is_causal=*/true);
#else
  torch::Tensor attended = CausalAttention(q, k, v);
#endif
  // (B, heads, T, hd) -> (B, T, heads * hd)
  return torch::linear(attended.transpose(1, 2).reshape({b, t, heads * hd}),
                       layer.o);
}

torch::Tensor LlamaModel::Hidden(const torch::Tensor& ids) const {
  const int64_t b = ids.size(0), t = ids.size(1);
  torch::Tensor x =
      embed_.index_select(0, ids.to(device_, torch::kInt64).reshape({-1}))
          .view({b, t, config_.hidden_size});
  // Angles t * f in fp64, then cos/sin in the compute dtype: (T, hd).
  torch::Tensor positions = torch::arange(
      t, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  torch::Tensor angles = torch::outer(positions, inv_freq_);
  angles = torch::cat({angles, angles}, -1);
  const torch::Tensor cos = angles.cos().to(dtype_);
  const torch::Tensor sin = angles.sin().to(dtype_);
  const double eps = config_.rms_norm_eps;
  for (const Layer& layer : layers_) {
    x = x + Attention(layer, RmsNorm(x, layer.input_norm, eps), cos, sin);
    torch::Tensor h = RmsNorm(x, layer.post_norm, eps);
    x = x + torch::linear(torch::silu(torch::linear(h, layer.gate)) *
                              torch::linear(h, layer.up),
                          layer.down);
  }
  return RmsNorm(x, norm_, eps);
}

torch::Tensor LlamaModel::Forward(const torch::Tensor& ids) const {
  torch::InferenceMode inference;
  return torch::linear(Hidden(ids), head_).to(torch::kFloat32);
}

torch::Tensor LlamaModel::TokenNll(const torch::Tensor& inputs,
                                   const torch::Tensor& targets) const {
  torch::InferenceMode inference;
  const torch::Tensor h = Hidden(inputs).reshape({-1, config_.hidden_size});
  const torch::Tensor t = targets.to(device_, torch::kInt64).reshape({-1});
  const int64_t n = h.size(0);
  const int64_t rows = LinearCrossEntropyBlockRows(n, head_.size(0));
  // Past one block of logits, the blocked scorer of model/kernels/ (its
  // vocabulary-split loops for an fp32 model on the CPU); within one, the
  // head as Forward applies it, so the NLL is bitwise Forward's.
  if (rows > 0) {
    return LinearTokenNll(h, head_, t, rows).view(targets.sizes());
  }
  const torch::Tensor nll =
      -torch::log_softmax(torch::linear(h, head_).to(torch::kFloat32), -1)
           .gather(-1, t.unsqueeze(-1))
           .squeeze(-1);
  return nll.view(targets.sizes());
}

}  // namespace hlab::model::llama
