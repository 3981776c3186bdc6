#include "eval/probing.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace hlab::eval {
namespace {

absl::Status CheckOptions(const ProbeOptions& o) {
  if (!(o.test_fraction > 0 && o.test_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "test_fraction: must be in (0, 1), got ", o.test_fraction));
  }
  if (!(o.l2 >= 0) || !std::isfinite(o.l2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("l2: must be >= 0, got ", o.l2));
  }
  if (o.max_iterations < 1) {
    return absl::InvalidArgumentError("max_iterations: must be >= 1");
  }
  return absl::OkStatus();
}

// The rows of `x` where mask[i] == want.
torch::Tensor Rows(const torch::Tensor& x, const std::vector<bool>& mask,
                   bool want) {
  std::vector<int64_t> index;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] == want) index.push_back(static_cast<int64_t>(i));
  }
  return x.index_select(0, torch::tensor(index, torch::kInt64));
}

double Accuracy(const torch::Tensor& logits, const torch::Tensor& labels,
                int64_t* correct) {
  *correct = logits.argmax(1).eq(labels).sum().item<int64_t>();
  return static_cast<double>(*correct) / static_cast<double>(labels.size(0));
}

}  // namespace

std::vector<bool> ProbeSplit(const std::vector<int>& labels, int classes,
                             double test_fraction) {
  std::vector<int64_t> seen(static_cast<size_t>(std::max(classes, 0)), 0);
  std::vector<bool> is_test(labels.size(), false);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) continue;
    const int64_t r = seen[static_cast<size_t>(labels[i])]++;
    is_test[i] = std::floor(static_cast<double>(r + 1) * test_fraction) >
                 std::floor(static_cast<double>(r) * test_fraction);
  }
  return is_test;
}

std::pair<double, double> WilsonInterval(int64_t correct, int64_t n, double z) {
  if (n <= 0) return {0.0, 1.0};
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(correct) / nn;
  const double z2 = z * z;
  const double denominator = 1 + z2 / nn;
  const double center = (p + z2 / (2 * nn)) / denominator;
  const double half =
      z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / denominator;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

absl::StatusOr<ProbeFit> FitLinearProbe(const torch::Tensor& features,
                                        const std::vector<int>& labels,
                                        int classes,
                                        const ProbeOptions& options) {
  HLAB_RETURN_IF_ERROR(CheckOptions(options));
  if (classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("classes: must be >= 2, got ", classes));
  }
  if (features.dim() != 2 ||
      features.size(0) != static_cast<int64_t>(labels.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe: features must be (n, d) with n = ", labels.size(),
        " labels, got (", absl::StrJoin(features.sizes(), ", "), ")"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("probe: labels[", i, "] = ", labels[i],
                       " is not in [0, ", classes, ")"));
    }
  }
  const std::vector<bool> is_test =
      ProbeSplit(labels, classes, options.test_fraction);
  const int64_t tests = std::count(is_test.begin(), is_test.end(), true);
  const int64_t trains = static_cast<int64_t>(labels.size()) - tests;
  if (tests == 0 || trains == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("probe: ", labels.size(), " samples leave ", trains,
                     " to train and ", tests, " to test; give more samples"));
  }
  torch::NoGradGuard outer_no_grad;
  const torch::Tensor x = features.to(torch::kFloat64).contiguous();
  const torch::Tensor y = torch::tensor(
      std::vector<int64_t>(labels.begin(), labels.end()), torch::kInt64);
  torch::Tensor x_train = Rows(x, is_test, false);
  torch::Tensor x_test = Rows(x, is_test, true);
  const torch::Tensor y_train = Rows(y, is_test, false);
  const torch::Tensor y_test = Rows(y, is_test, true);
  const torch::Tensor mean = x_train.mean(0, /*keepdim=*/true);
  torch::Tensor sd = x_train.std(0, /*unbiased=*/false, /*keepdim=*/true);
  sd = torch::where(sd > 1e-12, sd, torch::ones_like(sd));
  x_train = (x_train - mean) / sd;
  x_test = (x_test - mean) / sd;
  // Constant features are 0 after centring, whatever sd was set to.

  const int64_t d = x.size(1);
  torch::Tensor w = torch::zeros({d, classes}, torch::kFloat64);
  torch::Tensor b = torch::zeros({classes}, torch::kFloat64);
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  torch::optim::LBFGS lbfgs({w, b},
                            torch::optim::LBFGSOptions(1.0)
                                .max_iter(options.max_iterations)
                                .max_eval(options.max_iterations * 5 / 4)
                                .tolerance_grad(1e-9)
                                .tolerance_change(1e-12)
                                .history_size(20)
                                .line_search_fn("strong_wolfe"));
  const double l2 = options.l2;
  auto closure = [&]() -> torch::Tensor {
    torch::AutoGradMode grad(true);
    lbfgs.zero_grad();
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(x_train.matmul(w) + b, y_train) +
        0.5 * l2 * w.pow(2).sum();
    loss.backward();
    return loss;
  };
  lbfgs.step(closure);

  ProbeFit fit;
  fit.train = trains;
  fit.test = tests;
  int64_t train_correct = 0;
  fit.train_accuracy = Accuracy(x_train.matmul(w) + b, y_train, &train_correct);
  fit.accuracy = Accuracy(x_test.matmul(w) + b, y_test, &fit.correct);
  std::tie(fit.lo, fit.hi) = WilsonInterval(fit.correct, fit.test);
  return fit;
}

absl::StatusOr<ProbingResult> ProbeNiahLayers(model::HybridLM& model,
                                              const data::Tokenizer& tokenizer,
                                              const ProbingConfig& config,
                                              const ProbingProgress& progress) {
  HLAB_RETURN_IF_ERROR(CheckOptions(config.probe));
  if (config.classes < 2 || config.classes > 10) {
    return absl::InvalidArgumentError(absl::StrCat(
        "classes: must be in [2, 10] (the synthetic corpus's values), got ",
        config.classes));
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
  if (config.samples < 2 * config.classes) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples: must be at least 2 per class (",
                     2 * config.classes, "), got ", config.samples));
  }
  if (config.batch_sequences < 1) {
    return absl::InvalidArgumentError("batch_sequences: must be >= 1");
  }
  NiahHaystack haystack;
  haystack.source = "synthetic";
  haystack.corpus_seed = config.corpus_seed;

  // The samples: the first `samples` whose value is one of the classes.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int> labels;
  int64_t skipped = 0;
  const int64_t give_up = 20 * config.samples;
  for (int64_t i = 0; static_cast<int64_t>(labels.size()) < config.samples;
       ++i) {
    if (i >= give_up) {
      return absl::InternalError(absl::StrCat(
          "probing: only ", labels.size(), " of ", i,
          " samples had a value among the first ", config.classes));
    }
    const double depth =
        config.depths[static_cast<size_t>(i) % config.depths.size()];
    absl::StatusOr<NiahSample> sample =
        GenerateNiahSample(tokenizer, "single", config.context_length, depth,
                           config.seed, i, config.classes, haystack);
    if (!sample.ok()) return ForOneContextLength(sample.status());
    const std::string& value =
        sample->candidates[static_cast<size_t>(sample->answer_index)];
    const int label = value.size() == 1 ? value[0] - '0' : -1;
    if (label < 0 || label >= config.classes) {
      ++skipped;
      continue;
    }
    labels.push_back(label);
    prompts.push_back(std::move(sample->prompt));
  }

  // Features at the last prompt token, layer 0 (the embeddings) to L.
  const int64_t n = static_cast<int64_t>(prompts.size());
  const int64_t layers = model->num_layers();
  const int64_t d = model->config().d_model;
  torch::Tensor features =
      torch::empty({layers + 1, n, d}, torch::kFloat64);  // (L+1, n, d)
  std::vector<int64_t> all_blocks;
  for (int64_t k = 0; k < layers; ++k) all_blocks.push_back(k);
  const bool was_training = model->is_training();
  model->eval();
  model->capture_hidden_states(all_blocks);
  {
    torch::NoGradGuard no_grad;
    int64_t first = 0;
    while (first < n) {
      // A batch of consecutive prompts of one length.
      const size_t length = prompts[static_cast<size_t>(first)].size();
      int64_t count = 1;
      while (first + count < n && count < config.batch_sequences &&
             prompts[static_cast<size_t>(first + count)].size() == length) {
        ++count;
      }
      torch::Tensor tokens =
          torch::empty({count, static_cast<int64_t>(length)}, torch::kInt64);
      auto acc = tokens.accessor<int64_t, 2>();
      for (int64_t b = 0; b < count; ++b) {
        const auto& p = prompts[static_cast<size_t>(first + b)];
        for (size_t j = 0; j < length; ++j) {
          acc[b][static_cast<int64_t>(j)] = p[j];
        }
      }
      const int64_t last = static_cast<int64_t>(length) - 1;
      features[0]
          .narrow(0, first, count)
          .copy_(model->embedding(tokens).select(1, last).to(torch::kFloat64));
      model->forward(tokens);
      for (const auto& [k, h] : model->captured_hidden_states()) {
        features[k + 1]
            .narrow(0, first, count)
            .copy_(h.select(1, last).to(torch::kFloat64));
      }
      first += count;
      if (progress) progress(first, n);
    }
  }
  model->capture_hidden_states({});
  if (was_training) model->train();

  ProbingResult result;
  result.classes = config.classes;
  result.chance = 1.0 / config.classes;
  result.samples = n;
  result.skipped = skipped;
  for (int64_t k = 0; k <= layers; ++k) {
    HLAB_ASSIGN_OR_RETURN(
        ProbeFit fit,
        FitLinearProbe(features[k], labels, config.classes, config.probe));
    ProbeLayer layer;
    layer.layer = k;
    layer.mixer = k == 0 ? "embedding"
                         : std::string(model::MixerKindName(
                               model->config().layers[k - 1].kind));
    layer.fit = fit;
    if (k == 0 || fit.accuracy > result.peak_accuracy) {
      result.peak_layer = k;
      result.peak_accuracy = fit.accuracy;
    }
    result.layers.push_back(std::move(layer));
  }
  return result;
}

}  // namespace hlab::eval
