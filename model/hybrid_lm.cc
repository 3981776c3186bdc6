#include "model/hybrid_lm.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "model/kernels/linear_cross_entropy.h"
#include "model/layers/attention.h"

namespace hlab::model {
namespace {

bool IsEfficient(MixerKind kind) {
  return kind == MixerKind::kSlidingWindow || kind == MixerKind::kLightning ||
         kind == MixerKind::kMamba2 || kind == MixerKind::kGatedDeltaNet;
}

}  // namespace

BlockImpl::BlockImpl(const ModelConfig& config, int64_t layer_index) {
  const MixerSpec& spec = config.layers.at(layer_index);
  mixer = register_module("mixer", MakeMixer(config, spec, layer_index));
  mixer_norm =
      register_module("mixer_norm", RMSNorm(config.d_model, config.norm_eps));
  ffn_norm =
      register_module("ffn_norm", RMSNorm(config.d_model, config.norm_eps));
  ffn = register_module("ffn",
                        SwiGLU(config.d_model, EffectiveFfnHidden(config, spec),
                               config.init_std, ResidualInitStd(config)));
}

torch::Tensor BlockImpl::MixWithReceptiveField(const torch::Tensor& x) {
  // x: (B, T, d). With stride s and span m, the outputs of strides k >= m-1
  // come from the window [(k+1-m)s, (k+1)s), its last s positions; those of
  // strides 0..m-2 from one causal pass over [0, (m-1)s) (their windows
  // would start before 0). T is padded at the end (causal mixers ignore it)
  // to a multiple of s.
  const int64_t s = receptive_field_, m = receptive_span_;
  const int64_t batch = x.size(0), t = x.size(1), d = x.size(2);
  if (t <= m * s) return mixer->forward(x);
  const int64_t strides = (t + s - 1) / s;
  torch::Tensor padded = x;
  if (strides * s != t) {
    padded = torch::cat({x, x.new_zeros({batch, strides * s - t, d})}, 1);
  }
  torch::Tensor first = mixer->forward(padded.narrow(1, 0, (m - 1) * s));
  // (B, n, d, ms) -> (B*n, ms, d) for the n = strides - m + 1 windows.
  const int64_t n = strides - m + 1;
  torch::Tensor windows = padded.unfold(1, m * s, s)
                              .permute({0, 1, 3, 2})
                              .reshape({batch * n, m * s, d});
  torch::Tensor rest = mixer->forward(windows)
                           .narrow(1, (m - 1) * s, s)
                           .reshape({batch, n * s, d});
  return torch::cat({first, rest}, 1).narrow(1, 0, t);
}

std::pair<torch::Tensor, torch::Tensor> BlockImpl::forward_split(
    const torch::Tensor& x, const torch::Tensor& pending) {
  return Split(x, pending, [&](const torch::Tensor& normed) {
    return receptive_field_ > 0 ? MixWithReceptiveField(normed)
                                : mixer->forward(normed);
  });
}

std::pair<torch::Tensor, torch::Tensor> BlockImpl::decode_split(
    const torch::Tensor& x, const torch::Tensor& pending, bool prefill,
    MixerState* state) {
  if (receptive_field_ > 0) {
    throw std::invalid_argument(
        "decoding: the efficient receptive field hook is on (its windows "
        "restart the state); turn it off first");
  }
  return Split(x, pending, [&](const torch::Tensor& normed) {
    return prefill ? mixer->prefill(normed, state) : mixer->step(normed, state);
  });
}

template <typename Mix>
std::pair<torch::Tensor, torch::Tensor> BlockImpl::Split(
    const torch::Tensor& x, const torch::Tensor& pending, const Mix& mix) {
  // The norms write what the projections after them multiply in (bf16
  // under autocast), and each residual add is made by the norm that reads
  // its sum.
  const torch::ScalarType normed_dtype = LinearInputDtype(x.scalar_type());
  torch::Tensor stream, normed;
  if (pending.defined()) {
    NormedSum in = AddRmsNorm(x, pending, mixer_norm->weight, mixer_norm->eps(),
                              normed_dtype);
    stream = std::move(in.sum);
    normed = std::move(in.normed);
  } else {
    stream = x;
    normed = RmsNorm(x, mixer_norm->weight, mixer_norm->eps(), normed_dtype);
  }
  torch::Tensor mixed = mix(normed);
  NormedSum h = AddRmsNorm(stream, mixed, ffn_norm->weight, ffn_norm->eps(),
                           normed_dtype);
  return {std::move(h.sum), ffn(h.normed)};
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto [h, ffn_out] = forward_split(x, torch::Tensor());
  return h + ffn_out;
}

torch::Tensor BlockImpl::forward_reference(const torch::Tensor& x) {
  torch::Tensor h = x + mixer->forward_reference(mixer_norm(x));
  return h + ffn(ffn_norm(h));
}

HybridLMImpl::HybridLMImpl(const ModelConfig& config) : config_(config) {
  const absl::Status valid = ValidateModelConfig(config);
  if (!valid.ok()) {
    // A programmer error: callers validate configs from users first.
    throw std::invalid_argument(std::string(valid.message()));
  }
  embedding = register_module(
      "embedding", torch::nn::Embedding(config.vocab_size, config.d_model));
  {
    torch::NoGradGuard no_grad;
    embedding->weight.normal_(0.0, config.init_std);
  }
  // Parameter names: layers.<i>.mixer.q_proj.weight, ...
  auto layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layers; ++i) {
    blocks_.push_back(Block(config, i));
    layers->push_back(blocks_.back());
  }
  final_norm =
      register_module("final_norm", RMSNorm(config.d_model, config.norm_eps));
  if (!config.tie_embeddings) {
    lm_head = register_module(
        "lm_head",
        Linear(LinearOptions(config.d_model, config.vocab_size).bias(false)));
    torch::NoGradGuard no_grad;
    lm_head->weight.normal_(0.0, config.init_std);
  }
}

torch::Tensor HybridLMImpl::Run(const torch::Tensor& tokens, bool reference) {
  return RunEmbedded(embedding(tokens), reference);  // (B, T, d)
}

torch::Tensor HybridLMImpl::RunEmbedded(torch::Tensor x, bool reference) {
  auto [h, pending] = RunBlocks(std::move(x), reference);
  return Logits(std::move(h), pending);
}

std::pair<torch::Tensor, torch::Tensor> HybridLMImpl::RunBlocks(
    torch::Tensor x, bool reference) {
  hidden_states_.clear();
  // The residual stream after block i is x + pending: the add is left to
  // the next norm (AddRmsNorm), which makes it in the same pass.
  torch::Tensor pending;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (reference) {
      x = blocks_[i]->forward_reference(x);
    } else {
      std::tie(x, pending) = blocks_[i]->forward_split(x, pending);
    }
    CaptureHiddenState(static_cast<int64_t>(i), x, pending);
  }
  return {std::move(x), std::move(pending)};
}

void HybridLMImpl::CaptureHiddenState(int64_t layer, const torch::Tensor& x,
                                      const torch::Tensor& pending) {
  if (std::find(hidden_layers_.begin(), hidden_layers_.end(), layer) !=
      hidden_layers_.end()) {
    torch::NoGradGuard no_grad;
    hidden_states_[layer] = pending.defined() ? x + pending : x.detach();
  }
}

torch::Tensor HybridLMImpl::FinalNorm(torch::Tensor x,
                                      const torch::Tensor& pending) {
  const torch::ScalarType normed_dtype = LinearInputDtype(x.scalar_type());
  return pending.defined()
             ? AddRmsNorm(x, pending, final_norm->weight, final_norm->eps(),
                          normed_dtype)
                   .normed
             : RmsNorm(x, final_norm->weight, final_norm->eps(), normed_dtype);
}

const torch::Tensor& HybridLMImpl::HeadWeight() const {
  return lm_head ? lm_head->weight : embedding->weight;
}

torch::Tensor HybridLMImpl::Logits(torch::Tensor x,
                                   const torch::Tensor& pending) {
  x = FinalNorm(std::move(x), pending);
  torch::Tensor logits =
      lm_head ? lm_head(x) : LinearProduct(x, embedding->weight);
  return logits.to(torch::kFloat32);
}

torch::Tensor HybridLMImpl::Decode(torch::Tensor x, bool prefill,
                                   DecodeState* state, bool last_only) {
  if (state == nullptr) {
    throw std::invalid_argument("decoding: no state");
  }
  if (prefill) {
    *state = DecodeState();
    state->layers.resize(blocks_.size());
  } else if (state->layers.size() != blocks_.size()) {
    throw std::invalid_argument(
        "decoding: step needs the state of a prefill of this model");
  }
  hidden_states_.clear();
  torch::Tensor pending;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    std::tie(x, pending) =
        blocks_[i]->decode_split(x, pending, prefill, &state->layers[i]);
    CaptureHiddenState(static_cast<int64_t>(i), x, pending);
  }
  state->position += x.size(1);
  if (!last_only) return Logits(std::move(x), pending);
  return LastLogits(std::move(x), pending);
}

torch::Tensor HybridLMImpl::LastLogits(torch::Tensor x,
                                       const torch::Tensor& pending) {
  const int64_t t = x.size(1);
  if (LinearCrossEntropyBlockRows(x.size(0) * t, config_.vocab_size) == 0) {
    return Logits(std::move(x), pending).narrow(1, t - 1, 1);
  }
  // The head over the last position only: the whole logits would pass a
  // block (a 16K-token prompt at Llama 3's vocabulary is 8.4 GB).
  return Logits(
      x.narrow(1, t - 1, 1).contiguous(),
      pending.defined() ? pending.narrow(1, t - 1, 1).contiguous() : pending);
}

torch::Tensor HybridLMImpl::prefill(const torch::Tensor& tokens,
                                    DecodeState* state, bool last_only) {
  if (tokens.dim() != 2 || tokens.size(1) < 1) {
    throw std::invalid_argument("prefill: tokens must be (B, T) with T >= 1");
  }
  return Decode(embedding(tokens), /*prefill=*/true, state, last_only);
}

torch::Tensor HybridLMImpl::step(const torch::Tensor& tokens,
                                 DecodeState* state) {
  if (tokens.dim() != 2 || tokens.size(1) != 1) {
    throw std::invalid_argument("step: tokens must be (B, 1)");
  }
  return Decode(embedding(tokens), /*prefill=*/false, state,
                /*last_only=*/false);
}

torch::Tensor HybridLMImpl::forward(const torch::Tensor& tokens) {
  return Run(tokens, /*reference=*/false);
}

torch::Tensor HybridLMImpl::last_logits(const torch::Tensor& tokens) {
  if (tokens.dim() != 2 || tokens.size(1) < 1) {
    throw std::invalid_argument(
        "last_logits: tokens must be (B, T) with T >= 1");
  }
  auto [h, pending] = RunBlocks(embedding(tokens), /*reference=*/false);
  return LastLogits(std::move(h), pending);
}

torch::Tensor HybridLMImpl::forward_embedded(const torch::Tensor& x) {
  return RunEmbedded(x, /*reference=*/false);
}

torch::Tensor HybridLMImpl::forward_reference(const torch::Tensor& tokens) {
  return Run(tokens, /*reference=*/true);
}

torch::Tensor HybridLMImpl::loss(const torch::Tensor& inputs,
                                 const torch::Tensor& targets) {
  const int64_t rows =
      LinearCrossEntropyBlockRows(inputs.numel(), config_.vocab_size);
  if (rows == 0) {
    torch::Tensor logits = forward(inputs);
    return torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
  }
  auto [h, pending] = RunBlocks(embedding(inputs), /*reference=*/false);
  const torch::Tensor x = FinalNorm(std::move(h), pending);
  return LinearCrossEntropy(x.reshape({-1, x.size(-1)}), HeadWeight(),
                            targets.reshape({-1}), rows);
}

torch::Tensor HybridLMImpl::token_nll(const torch::Tensor& inputs,
                                      const torch::Tensor& targets) {
  torch::NoGradGuard no_grad;
  auto [h, pending] = RunBlocks(embedding(inputs), /*reference=*/false);
  const torch::Tensor x = FinalNorm(std::move(h), pending);
  return LinearTokenNll(
             x.reshape({-1, x.size(-1)}), HeadWeight(), targets.reshape({-1}),
             LinearCrossEntropyBlockRows(inputs.numel(), config_.vocab_size))
      .view(targets.sizes());
}

void HybridLMImpl::capture_hidden_states(const std::vector<int64_t>& layers) {
  for (int64_t layer : layers) {
    if (layer < 0 || layer >= num_layers()) {
      throw std::invalid_argument(absl::StrCat("capture_hidden_states: layer ",
                                               layer, " out of range [0, ",
                                               num_layers(), ")"));
    }
  }
  hidden_layers_ = layers;
  hidden_states_.clear();
}

void HybridLMImpl::capture_attention(const std::vector<int64_t>& layers) {
  std::vector<std::shared_ptr<Attention>> chosen;
  for (int64_t layer : layers) {
    if (layer < 0 || layer >= num_layers()) {
      throw std::invalid_argument(absl::StrCat("capture_attention: layer ",
                                               layer, " out of range [0, ",
                                               num_layers(), ")"));
    }
    auto attention =
        std::dynamic_pointer_cast<Attention>(blocks_[layer]->mixer);
    if (!attention) {
      throw std::invalid_argument(
          absl::StrCat("capture_attention: layer ", layer, " is ",
                       MixerKindName(config_.layers[layer].kind),
                       ", not softmax attention"));
    }
    chosen.push_back(attention);
  }
  for (const Block& block : blocks_) {
    if (auto a = std::dynamic_pointer_cast<Attention>(block->mixer)) {
      a->set_capture_probabilities(false);
    }
  }
  for (const auto& a : chosen) a->set_capture_probabilities(true);
}

torch::Tensor HybridLMImpl::captured_attention(int64_t layer) const {
  auto attention =
      std::dynamic_pointer_cast<Attention>(blocks_.at(layer)->mixer);
  if (!attention) {
    throw std::invalid_argument(
        absl::StrCat("captured_attention: layer ", layer, " is not attention"));
  }
  return attention->captured_probabilities();
}

void HybridLMImpl::set_full_attention_key_limit(int64_t keys) {
  for (const Block& block : blocks_) {
    if (auto a = std::dynamic_pointer_cast<Attention>(block->mixer)) {
      a->set_key_limit(keys);
    }
  }
}

std::vector<HybridLMImpl::HeadNorm> HybridLMImpl::full_attention_q_grad_norms()
    const {
  std::vector<HeadNorm> out;
  for (int64_t layer = 0; layer < num_layers(); ++layer) {
    auto a = std::dynamic_pointer_cast<Attention>(blocks_[layer]->mixer);
    if (!a) continue;
    const torch::Tensor norms = a->q_grad_norms();
    if (!norms.defined()) continue;
    auto acc = norms.accessor<double, 1>();
    for (int64_t h = a->first_full_head(); h < norms.size(0); ++h) {
      out.push_back({layer, h, acc[h]});
    }
  }
  return out;
}

void HybridLMImpl::set_efficient_receptive_field(int64_t stride, int64_t span) {
  if (stride < 0 || (stride > 0 && span < 2)) {
    throw std::invalid_argument(
        absl::StrCat("set_efficient_receptive_field: stride ", stride,
                     " and span ", span, ": need stride >= 0 and span >= 2"));
  }
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (IsEfficient(config_.layers[i].kind)) {
      blocks_[i]->set_receptive_field(stride, span);
    }
  }
}

}  // namespace hlab::model
