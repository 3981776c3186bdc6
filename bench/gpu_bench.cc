// hlab-bench-gpu: one training step of every architecture on a CUDA device
// at the paper's long-context shape (T=16384, d_model 1024, 4 layers, bf16
// autocast): step time, tokens/s, model TFLOP/s and MFU against the measured
// bf16 matmul peak, and the device memory in use. Beside it, at the same
// shape: one full-attention layer of hlab against LibTorch's own
// scaled_dot_product_attention (flash kernels); each mixer kind alone as one
// layer, forward and backward; and the attention core alone (the sink folded
// into FlashAttention's log-sum-exp) against LibTorch's FlashAttention-2
// kernels called directly with the same window. scripts/gpu-check.sh runs
// it; docs/performance.md holds the figures.
//
//   hlab-bench-gpu --json out.json                 # defaults above
//   hlab-bench-gpu --archs full,gdn --seq-len 4096 --max-seconds 60
//
// Each architecture runs in this process, one after another, within
// --max-seconds (the rest are reported as skipped); an error (out of
// memory, say) is reported for its architecture and the others go on.
// Without a CUDA device it says so and exits 2.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "model/autocast.h"
#include "model/config/architectures.h"
#include "model/config/model_config.h"
#include "model/config/param_count.h"
#include "model/hybrid_lm.h"
#include "model/kernels/attention_kernel.h"
#include "model/kernels/cuda_graphs.h"
#include "model/kernels/flash_attention.h"
#include "model/layers/mixer.h"
#include "train/devices.h"
#include "train/optimizer.h"

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr char kUsage[] = R"(usage: hlab-bench-gpu [options]

Times one training step (forward, backward, AdamW) of each architecture on
CUDA with bf16 autocast; one full-attention layer against LibTorch's
scaled_dot_product_attention; each mixer kind as one layer (GDN at chunk 64
and 16, with and without CUDA graphs); and the attention core (windows 0,
512, 2048) against LibTorch's FlashAttention-2 kernels called directly.

  --archs LIST       default full,swa-512,swa-2048,lightning,mamba2,gdn
  --seq-len T        default 16384
  --d-model D        default 1024
  --layers L         default 4
  --heads H          default 8 (head_dim = D / H)
  --kv-heads K       default 8
  --vocab V          default 32768
  --batch B          default 1
  --steps N          timed steps after one warm-up (default 2)
  --max-seconds S    start no architecture after S seconds (default 300)
  --sections LIST    of training,attention_layer,mixer_layers,attention_cores
                     (default all)
  --json FILE        also write the results as one JSON object

The largest scale of examples/sweeps/paper.yaml (S5, N = 0.49B), for its MFU:
  hlab-bench-gpu --sections training --d-model 1408 --layers 24 --heads 22 \
      --kv-heads 2 --vocab 128256
)";

constexpr const char* kSections[] = {"training", "attention_layer",
                                     "mixer_layers", "attention_cores"};

struct Options {
  std::vector<std::string> archs = {"full",      "swa-512", "swa-2048",
                                    "lightning", "mamba2",  "gdn"};
  int64_t seq_len = 16384, d_model = 1024, layers = 4, heads = 8, kv_heads = 8,
          vocab = 32768, batch = 1, steps = 2;
  std::vector<std::string> sections = {std::begin(kSections),
                                       std::end(kSections)};
  double max_seconds = 300;
  std::string json_path;
};

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "hlab-bench-gpu: " << message << "\n";
  std::exit(1);
}

int64_t IntFlag(const std::string& flag, const char* value) {
  int64_t v = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &v) || v <= 0) {
    Fail(flag + ": expected a positive integer");
  }
  return v;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--archs" && next != nullptr) {
      o.archs = absl::StrSplit(next, ',', absl::SkipEmpty());
      ++i;
    } else if (a == "--seq-len") {
      o.seq_len = IntFlag(a, next), ++i;
    } else if (a == "--d-model") {
      o.d_model = IntFlag(a, next), ++i;
    } else if (a == "--layers") {
      o.layers = IntFlag(a, next), ++i;
    } else if (a == "--heads") {
      o.heads = IntFlag(a, next), ++i;
    } else if (a == "--kv-heads") {
      o.kv_heads = IntFlag(a, next), ++i;
    } else if (a == "--vocab") {
      o.vocab = IntFlag(a, next), ++i;
    } else if (a == "--sections" && next != nullptr) {
      o.sections = absl::StrSplit(next, ',', absl::SkipEmpty());
      for (const std::string& section : o.sections) {
        if (std::find(std::begin(kSections), std::end(kSections), section) ==
            std::end(kSections)) {
          Fail("--sections: unknown section '" + section +
               "' (training, attention_layer, mixer_layers, attention_cores)");
        }
      }
      ++i;
    } else if (a == "--batch") {
      o.batch = IntFlag(a, next), ++i;
    } else if (a == "--steps") {
      o.steps = IntFlag(a, next), ++i;
    } else if (a == "--max-seconds") {
      o.max_seconds = static_cast<double>(IntFlag(a, next)), ++i;
    } else if (a == "--json" && next != nullptr) {
      o.json_path = next, ++i;
    } else {
      Fail("unknown or incomplete option '" + a + "'\n" + kUsage);
    }
  }
  if (o.d_model % o.heads != 0) Fail("--d-model must be a multiple of --heads");
  return o;
}

hlab::model::ModelConfig Config(const Options& o, const std::string& arch) {
  hlab::model::ModelConfig c;
  c.vocab_size = o.vocab;
  c.d_model = o.d_model;
  c.n_layers = o.layers;
  c.n_heads = o.heads;
  c.n_kv_heads = o.kv_heads;
  c.head_dim = o.d_model / o.heads;
  c.ffn_hidden = hlab::model::DefaultFfnHidden(o.d_model);
  c.arch = arch;
  auto layers = hlab::model::ExpandArchitecture(arch, o.layers);
  if (!layers.ok()) Fail(std::string(layers.status().message()));
  c.layers = *layers;
  if (auto s = hlab::model::ValidateModelConfig(c); !s.ok()) {
    Fail(arch + ": " + std::string(s.message()));
  }
  return c;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Median GFLOP/s of an 8192^3 bf16 matmul on the device.
double MatmulPeakTflops(const torch::Device& device) {
  const int64_t n = 8192;
  const auto options =
      torch::TensorOptions().device(device).dtype(torch::kBFloat16);
  torch::Tensor a = torch::randn({n, n}, options),
                b = torch::randn({n, n}, options);
  torch::Tensor c = torch::mm(a, b);
  torch::cuda::synchronize();
  std::vector<double> rates;
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    c = torch::mm(a, b);
    torch::cuda::synchronize();
    rates.push_back(2.0 * n * n * n / Seconds(start) / 1e12);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

Json TrainingStep(const Options& o, const std::string& arch,
                  const torch::Device& device, double peak_tflops) {
  const hlab::model::ModelConfig config = Config(o, arch);
  torch::manual_seed(0);
  hlab::model::HybridLM lm(config);
  lm->to(device);
  auto optimizer = hlab::train::MakeAdamW(*lm, {.lr = 1e-4});
  torch::Tensor tokens = torch::randint(
      0, config.vocab_size, {o.batch, o.seq_len + 1},
      torch::TensorOptions().dtype(torch::kInt64).device(device));
  const torch::Tensor inputs = tokens.narrow(1, 0, o.seq_len);
  const torch::Tensor targets = tokens.narrow(1, 1, o.seq_len);
  std::vector<double> times;
  double first_loss = 0;
  int64_t memory = 0;
  for (int64_t step = 0; step <= o.steps; ++step) {
    torch::cuda::synchronize();
    const auto start = Clock::now();
    torch::Tensor loss;
    {
      hlab::model::SetAutocast(device.type(), true, torch::kBFloat16);
      loss = lm->loss(inputs, targets);
      hlab::model::SetAutocast(device.type(), false);
      at::autocast::clear_cache();
    }
    optimizer->zero_grad();
    loss.backward();
    hlab::train::ClipGradNorm(*lm, 1.0);
    optimizer->step();
    torch::cuda::synchronize();
    if (step == 0) first_loss = loss.item<double>();
    if (step > 0) times.push_back(Seconds(start) * 1000.0);
    memory = std::max(memory, hlab::train::CudaDeviceMemoryUsedBytes());
  }
  std::sort(times.begin(), times.end());
  const double step_ms = times[times.size() / 2];
  const double step_tokens = static_cast<double>(o.batch * o.seq_len);
  const double flops_per_token =
      hlab::model::TrainingFlopsPerToken(config, o.seq_len);
  const double tflops =
      flops_per_token * step_tokens / (step_ms / 1000.0) / 1e12;
  return {{"arch", arch},
          {"step_ms", step_ms},
          {"tokens_per_s", step_tokens / (step_ms / 1000.0)},
          {"flops_per_token", flops_per_token},
          {"model_tflops", tflops},
          {"mfu", tflops / peak_tflops},
          {"device_memory_gib",
           static_cast<double>(memory) / (1024.0 * 1024.0 * 1024.0)},
          {"first_loss", first_loss}};
}

// Median milliseconds of `step` over o.steps runs after one warm-up.
double TimeMs(const Options& o, const std::function<void()>& step) {
  std::vector<double> times;
  for (int64_t i = 0; i <= o.steps; ++i) {
    torch::cuda::synchronize();
    const auto start = Clock::now();
    step();
    torch::cuda::synchronize();
    if (i > 0) times.push_back(Seconds(start) * 1000.0);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// One full-attention mixer layer of hlab against LibTorch's
// scaled_dot_product_attention (causal; LibTorch >= 2.0), forward and
// backward, bf16, at (batch, T, d_model).
Json AttentionLayer(const Options& o, const torch::Device& device) {
  const hlab::model::ModelConfig config = Config(o, "full");
  std::shared_ptr<hlab::model::Mixer> mixer =
      hlab::model::MakeMixer(config, config.layers[0], 0);
  mixer->to(device);
  const auto bf16 =
      torch::TensorOptions().device(device).dtype(torch::kBFloat16);
  torch::Tensor x =
      torch::randn({o.batch, o.seq_len, o.d_model}, bf16).requires_grad_(true);
  const double hlab_ms = TimeMs(o, [&] {
    hlab::model::SetAutocast(device.type(), true, torch::kBFloat16);
    torch::Tensor y = mixer->forward(x);
    hlab::model::SetAutocast(device.type(), false);
    y.to(torch::kFloat32).square().mean().backward();
  });
  Json out = {{"layer", "full attention (projections included)"},
              {"hlab_ms", hlab_ms}};
#if TORCH_VERSION_MAJOR >= 2
  const int64_t hd = o.d_model / o.heads;
  torch::Tensor q = torch::randn({o.batch, o.heads, o.seq_len, hd}, bf16)
                        .requires_grad_(true);
  torch::Tensor k = torch::randn({o.batch, o.heads, o.seq_len, hd}, bf16)
                        .requires_grad_(true);
  torch::Tensor v = torch::randn({o.batch, o.heads, o.seq_len, hd}, bf16)
                        .requires_grad_(true);
  const double sdpa_ms = TimeMs(o, [&] {
    torch::Tensor y = at::scaled_dot_product_attention(
        q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
    y.to(torch::kFloat32).square().mean().backward();
  });
  out["sdpa_core_ms"] = sdpa_ms;
  out["hlab_over_sdpa"] = hlab_ms / sdpa_ms;
  out["note"] =
      "sdpa_core_ms is the attention core alone (no projections, no sink)";
#else
  out["sdpa_core_ms"] = nullptr;
  out["note"] = "LibTorch < 2.0 has no scaled_dot_product_attention";
#endif
  return out;
}

// Each mixer kind alone: one layer (projections included), forward and
// backward under bf16 autocast, at (batch, T, d_model).
Json MixerLayers(const Options& o, const torch::Device& device) {
  const hlab::model::ModelConfig config = Config(o, "full");
  const auto bf16 =
      torch::TensorOptions().device(device).dtype(torch::kBFloat16);
  Json out = Json::array();
  // GDN also at the CPU's chunk (16) against its GPU default (64): its
  // scan over chunks is sequential, so the chunk sets the launches; and
  // with its scan replayed through CUDA graphs (model/kernels/
  // cuda_graphs.h; off by default).
  struct Layer {
    std::string name;
    int64_t chunk = 0;
    bool graphs = false;
  };
  const std::vector<Layer> layers = {
      {"full"}, {"swa:512"}, {"swa:2048"},     {"lightning"},    {"mamba2"},
      {"gdn"},  {"gdn", 16}, {"gdn", 0, true}, {"gdn", 16, true}};
  for (const Layer& layer : layers) {
    std::string spec = layer.name;
    if (layer.chunk > 0) spec += " chunk " + std::to_string(layer.chunk);
    if (layer.graphs) spec += " CUDA graphs";
    try {
      auto parsed = hlab::model::ParseLayerSpec(layer.name);
      if (!parsed.ok()) {
        throw std::runtime_error(std::string(parsed.status().message()));
      }
      parsed->chunk = layer.chunk;
      hlab::model::SetCudaGraphs(layer.graphs);
      std::shared_ptr<hlab::model::Mixer> mixer =
          hlab::model::MakeMixer(config, *parsed, 0);
      mixer->to(device);
      torch::Tensor x = torch::randn({o.batch, o.seq_len, o.d_model}, bf16)
                            .requires_grad_(true);
      torch::Tensor dy = torch::randn({o.batch, o.seq_len, o.d_model}, bf16);
      const double ms = TimeMs(o, [&] {
        hlab::model::SetAutocast(device.type(), true, torch::kBFloat16);
        torch::Tensor y = mixer->forward(x);
        hlab::model::SetAutocast(device.type(), false);
        torch::autograd::backward({y}, {dy.to(y.scalar_type())});
      });
      hlab::model::SetCudaGraphs(false);
      out.push_back({{"layer", spec}, {"forward_backward_ms", ms}});
      std::cout << "layer " << spec << ": " << ms << " ms\n";
    } catch (const std::exception& e) {
      hlab::model::SetCudaGraphs(false);
      out.push_back(
          {{"layer", spec}, {"error", std::string(e.what()).substr(0, 600)}});
    }
  }
  return out;
}

// The attention core alone, forward and backward, bf16, (B, H, T, head
// dim): hlab's (FlashAttention with the sink folded into its log-sum-exp,
// model/kernels/flash_attention.h) against LibTorch's FlashAttention-2
// kernels called directly with the same window and no sink, and, without a
// window, against scaled_dot_product_attention.
Json AttentionCores(const Options& o, const torch::Device& device) {
  const int64_t hd = o.d_model / o.heads;
  const auto bf16 =
      torch::TensorOptions().device(device).dtype(torch::kBFloat16);
  torch::Tensor q = torch::randn({o.batch, o.heads, o.seq_len, hd}, bf16);
  torch::Tensor k = torch::randn({o.batch, o.kv_heads, o.seq_len, hd}, bf16);
  torch::Tensor v = torch::randn({o.batch, o.kv_heads, o.seq_len, hd}, bf16);
  torch::Tensor dy = torch::randn({o.batch, o.heads, o.seq_len, hd}, bf16);
  torch::Tensor sink = torch::zeros({o.heads}, bf16.dtype(torch::kFloat32));
  Json out = Json::array();
  for (int64_t window : {int64_t{0}, int64_t{512}, int64_t{2048}}) {
    Json r = {{"window", window}};
    const torch::Tensor ql = q.clone().requires_grad_(true),
                        kl = k.clone().requires_grad_(true),
                        vl = v.clone().requires_grad_(true),
                        sl = sink.clone().requires_grad_(true);
    r["hlab_ms"] = TimeMs(o, [&] {
      torch::Tensor y = hlab::model::BlockwiseAttention(ql, kl, vl, sl, window);
      torch::autograd::backward({y}, {dy});
    });
#if HLAB_TORCH_FLASH_ATTENTION
    const torch::Tensor qt = q.transpose(1, 2), kt = k.transpose(1, 2),
                        vt = v.transpose(1, 2),
                        dyt = dy.transpose(1, 2).contiguous();
    const std::optional<int64_t> left =
        window > 0 ? std::optional<int64_t>(window - 1) : std::nullopt;
    const auto flash_step = [&] {
      auto [y, lse, seed, offset, mask] = at::_flash_attention_forward(
          qt, kt, vt, std::nullopt, std::nullopt, o.seq_len, o.seq_len, 0.0,
          true, false, std::nullopt, left, int64_t{0});
      at::_flash_attention_backward(
          dyt, qt, kt, vt, y, lse, torch::Tensor(), torch::Tensor(), o.seq_len,
          o.seq_len, 0.0, true, seed, offset, std::nullopt, left, int64_t{0});
    };
    r["flash_ms"] = TimeMs(o, flash_step);
    // hlab runs flash's backward deterministically (model/kernels/
    // flash_attention.h); LibTorch's default is not.
    at::globalContext().setDeterministicAlgorithms(true, false);
    r["flash_deterministic_ms"] = TimeMs(o, flash_step);
    at::globalContext().setDeterministicAlgorithms(false, false);
    r["hlab_over_flash"] =
        r["hlab_ms"].get<double>() / r["flash_ms"].get<double>();
#endif
#if TORCH_VERSION_MAJOR >= 2
    if (window == 0 && o.kv_heads == o.heads) {
      const torch::Tensor qs = q.clone().requires_grad_(true),
                          ks = k.clone().requires_grad_(true),
                          vs = v.clone().requires_grad_(true);
      r["sdpa_ms"] = TimeMs(o, [&] {
        torch::Tensor y = at::scaled_dot_product_attention(
            qs, ks, vs, /*attn_mask=*/{}, /*dropout_p=*/0.0,
            /*is_causal=*/true);
        torch::autograd::backward({y}, {dy});
      });
    }
#endif
    std::cout << "attention core: " << r.dump() << "\n";
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  if (!torch::cuda::is_available() || torch::cuda::device_count() == 0) {
    std::cerr << "hlab-bench-gpu: no CUDA device visible (a CPU-only "
                 "LibTorch, or no GPU); nothing to measure\n";
    return 2;
  }
  const torch::Device device(torch::kCUDA, 0);
  const auto begin = Clock::now();
  Json result;
  result["torch_version"] = TORCH_VERSION;
  result["shape"] = {{"seq_len", o.seq_len},   {"d_model", o.d_model},
                     {"layers", o.layers},     {"heads", o.heads},
                     {"kv_heads", o.kv_heads}, {"vocab", o.vocab},
                     {"batch", o.batch},       {"dtype", "bf16 autocast"}};
  const auto wanted = [&](const std::string& section) {
    return std::find(o.sections.begin(), o.sections.end(), section) !=
           o.sections.end();
  };
  if (wanted("training")) {
    const double peak = MatmulPeakTflops(device);
    result["matmul_peak_tflops_bf16"] = peak;
    std::cout << "bf16 matmul peak (8192^3): " << peak << " TFLOP/s\n";
    Json runs = Json::array();
    for (const std::string& arch : o.archs) {
      if (Seconds(begin) > o.max_seconds) {
        runs.push_back({{"arch", arch}, {"skipped", "--max-seconds reached"}});
        std::cout << arch << ": skipped (--max-seconds)\n";
        continue;
      }
      try {
        Json r = TrainingStep(o, arch, device, peak);
        std::cout << arch << ": " << r["step_ms"].get<double>() << " ms/step, "
                  << r["tokens_per_s"].get<double>() << " tokens/s, MFU "
                  << r["mfu"].get<double>() << ", "
                  << r["device_memory_gib"].get<double>() << " GiB\n";
        runs.push_back(std::move(r));
      } catch (const std::exception& e) {
        const std::string what = std::string(e.what()).substr(0, 600);
        runs.push_back({{"arch", arch}, {"error", what}});
        std::cout << arch << ": error: " << what << "\n";
      }
      torch::cuda::synchronize();
    }
    result["training_step"] = runs;
  }
  for (const auto& [key, run] :
       std::vector<std::pair<std::string, std::function<Json()>>>{
           {"attention_layer", [&] { return AttentionLayer(o, device); }},
           {"mixer_layers", [&] { return MixerLayers(o, device); }},
           {"attention_cores", [&] { return AttentionCores(o, device); }}}) {
    if (!wanted(key)) continue;
    try {
      result[key] = run();
      std::cout << key << ": " << result[key].dump() << "\n";
    } catch (const std::exception& e) {
      result[key] = {{"error", std::string(e.what()).substr(0, 600)}};
    }
  }
  result["seconds"] = Seconds(begin);
  if (!o.json_path.empty())
    std::ofstream(o.json_path) << result.dump(2) << "\n";
  std::cout << result.dump() << "\n";
  return 0;
}
