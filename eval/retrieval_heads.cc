#include "eval/retrieval_heads.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <torch/torch.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "eval/niah.h"
#include "model/config/model_config.h"

namespace hlab::eval {

absl::Status TallyRetrieval(const torch::Tensor& probabilities,
                            const std::vector<int32_t>& sequence,
                            int64_t needle_begin, int64_t needle_end,
                            const std::vector<CopyEvent>& copies, int64_t layer,
                            std::vector<HeadTally>* tallies,
                            RetrievalMatch match) {
  const int64_t t = static_cast<int64_t>(sequence.size());
  if (probabilities.dim() != 3 || probabilities.size(1) != t ||
      probabilities.size(2) != t) {
    return absl::InvalidArgumentError(
        absl::StrCat("retrieval: probabilities must be (H, ", t, ", ", t,
                     ") for a sequence of ", t, " tokens, got ",
                     probabilities.sizes().vec().size(), " dimensions"));
  }
  if (needle_begin < 0 || needle_end <= needle_begin || needle_end > t) {
    return absl::InvalidArgumentError(
        absl::StrCat("retrieval: needle span [", needle_begin, ", ", needle_end,
                     ") is empty or outside [0, ", t, ")"));
  }
  const int64_t heads = probabilities.size(0);
  if (tallies->empty()) {
    for (int64_t h = 0; h < heads; ++h) {
      HeadTally tally;
      tally.layer = layer;
      tally.head = h;
      tallies->push_back(tally);
    }
  }
  if (static_cast<int64_t>(tallies->size()) != heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retrieval: ", tallies->size(), " tallies for ", heads, " heads"));
  }
  const torch::Tensor p = probabilities.to(torch::kFloat64).contiguous();
  auto acc = p.accessor<double, 3>();
  for (const CopyEvent& copy : copies) {
    const int64_t q = copy.query;
    if (q < 0 || q >= t) {
      return absl::InvalidArgumentError(
          absl::StrCat("retrieval: query ", q, " outside [0, ", t, ")"));
    }
    for (int64_t h = 0; h < heads; ++h) {
      HeadTally& tally = (*tallies)[static_cast<size_t>(h)];
      int64_t top = 0;
      double top_p = -1, total = 0, mass = 0;
      for (int64_t k = 0; k <= q; ++k) {
        const double w = acc[h][q][k];
        if (w > top_p) {
          top_p = w;
          top = k;
        }
        total += w;
        if (k >= needle_begin && k < needle_end) mass += w;
      }
      double entropy = 0;
      if (total > 0 && q > 0) {
        for (int64_t k = 0; k <= q; ++k) {
          const double w = acc[h][q][k] / total;
          if (w > 0) entropy -= w * std::log(w);
        }
        entropy /= std::log(static_cast<double>(q + 1));
      }
      ++tally.copied;
      const bool retrieved =
          match == RetrievalMatch::kCopiedToken
              ? sequence[static_cast<size_t>(top)] == copy.generated
              : copy.generated == copy.target;
      if (top >= needle_begin && top < needle_end && retrieved) ++tally.hits;
      tally.needle_mass += mass;
      tally.entropy += entropy;
    }
  }
  return absl::OkStatus();
}

std::vector<RetrievalHead> SummariseRetrieval(
    const std::vector<HeadTally>& tallies) {
  std::vector<RetrievalHead> heads;
  for (const HeadTally& t : tallies) {
    RetrievalHead h;
    h.layer = t.layer;
    h.head = t.head;
    h.hits = t.hits;
    h.copied = t.copied;
    if (t.copied > 0) {
      const double n = static_cast<double>(t.copied);
      h.score = static_cast<double>(t.hits) / n;
      h.needle_mass = t.needle_mass / n;
      h.entropy = t.entropy / n;
    }
    heads.push_back(h);
  }
  return heads;
}

std::vector<int> TopRetrievalHeads(const std::vector<RetrievalHead>& heads,
                                   int top) {
  std::vector<int> order(heads.size());
  for (size_t i = 0; i < heads.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const RetrievalHead& x = heads[static_cast<size_t>(a)];
    const RetrievalHead& y = heads[static_cast<size_t>(b)];
    if (x.score != y.score) return x.score > y.score;
    return x.needle_mass > y.needle_mass;
  });
  order.resize(std::min(order.size(), static_cast<size_t>(std::max(top, 0))));
  return order;
}

absl::StatusOr<RetrievalHeadsResult> TraceRetrievalHeads(
    model::HybridLM& model, const data::Tokenizer& tokenizer,
    const RetrievalHeadsConfig& config, const RetrievalProgress& progress) {
  if (config.samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples: must be >= 1, got ", config.samples));
  }
  if (config.top_heads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_heads: must be >= 1, got ", config.top_heads));
  }
  if (config.depths.empty()) {
    return absl::InvalidArgumentError("depths: must not be empty");
  }
  for (size_t i = 0; i < config.depths.size(); ++i) {
    if (!(config.depths[i] >= 0 && config.depths[i] <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "depths[", i, "]: must be in [0, 1], got ", config.depths[i]));
    }
  }
  const model::ModelConfig& mc = model->config();
  // Full-attention layers, and the first full head of each: 0, or a
  // head-wise SWA layer's windowed heads' count.
  std::vector<int64_t> full_layers, first_full_head;
  for (int64_t k = 0; k < model->num_layers(); ++k) {
    const model::MixerSpec& spec = mc.layers[static_cast<size_t>(k)];
    if (!model::IsFullAttention(spec.kind)) continue;
    const int64_t windowed =
        spec.kind == model::MixerKind::kHeadwiseSlidingWindow
            ? model::EffectiveWindowedHeads(mc, spec)
            : 0;
    if (windowed >= mc.n_heads) continue;
    full_layers.push_back(k);
    first_full_head.push_back(windowed);
  }
  if (full_layers.empty()) {
    return absl::FailedPreconditionError(
        "retrieval heads: the model has no full-attention layer to trace");
  }
  NiahHaystack haystack;
  haystack.source = "synthetic";
  haystack.corpus_seed = config.corpus_seed;

  std::vector<std::vector<HeadTally>> tallies(full_layers.size());
  RetrievalHeadsResult result;
  result.layers = full_layers;
  int64_t correct = 0;
  const bool was_training = model->is_training();
  model->eval();
  model->capture_attention(full_layers);
  absl::Cleanup restore = [&] {
    model->capture_attention({});
    if (was_training) model->train();
  };
  torch::NoGradGuard no_grad;
  for (int64_t i = 0; i < config.samples; ++i) {
    const double depth =
        config.depths[static_cast<size_t>(i) % config.depths.size()];
    // The candidates do not matter here (teacher forcing on the true
    // answer); 2 is the fewest NIAH allows.
    absl::StatusOr<NiahSample> sample =
        GenerateNiahSample(tokenizer, "single", config.context_length, depth,
                           config.seed, i, 2, haystack);
    if (!sample.ok()) return ForOneContextLength(sample.status());
    const std::vector<int32_t> sequence =
        NiahSequence(*sample, sample->answer_index);
    const int64_t t = static_cast<int64_t>(sequence.size());
    torch::Tensor tokens = torch::empty({1, t}, torch::kInt64);
    auto tacc = tokens.accessor<int64_t, 2>();
    for (int64_t j = 0; j < t; ++j)
      tacc[0][j] = sequence[static_cast<size_t>(j)];
    const torch::Tensor logits = model->forward(tokens);  // (1, T, V)
    const int64_t prompt = static_cast<int64_t>(sample->prompt.size());
    const torch::Tensor generated =
        logits[0].narrow(0, prompt - 1, t - prompt).argmax(-1).contiguous();
    std::vector<CopyEvent> copies;
    for (int64_t j = 0; j < t - prompt; ++j) {
      CopyEvent copy;
      copy.query = prompt - 1 + j;
      copy.generated = static_cast<int32_t>(generated[j].item<int64_t>());
      copy.target = sequence[static_cast<size_t>(prompt + j)];
      if (copy.generated == copy.target) ++correct;
      copies.push_back(copy);
    }
    result.copied += static_cast<int64_t>(copies.size());
    const int64_t needle_begin =
        sample->needle_positions[static_cast<size_t>(sample->queried_needle)];
    const int64_t needle_end =
        needle_begin +
        sample->needle_lengths[static_cast<size_t>(sample->queried_needle)];
    for (size_t l = 0; l < full_layers.size(); ++l) {
      const int64_t first = first_full_head[l];
      const torch::Tensor p = model->captured_attention(full_layers[l])[0];
      HLAB_RETURN_IF_ERROR(TallyRetrieval(p.narrow(0, first, p.size(0) - first),
                                          sequence, needle_begin, needle_end,
                                          copies, full_layers[l], &tallies[l],
                                          RetrievalMatch::kNeedleValue));
      if (i == 0) {
        for (HeadTally& tally : tallies[l]) tally.head += first;
      }
    }
    if (progress) progress(i + 1, config.samples);
  }

  std::vector<HeadTally> all;
  for (const auto& layer : tallies)
    all.insert(all.end(), layer.begin(), layer.end());
  result.heads = SummariseRetrieval(all);
  result.top = TopRetrievalHeads(result.heads, config.top_heads);
  result.samples = config.samples;
  result.answer_accuracy =
      result.copied > 0
          ? static_cast<double>(correct) / static_cast<double>(result.copied)
          : 0;
  return result;
}

}  // namespace hlab::eval
