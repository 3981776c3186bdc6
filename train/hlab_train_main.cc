// hlab-train: trains one hybrid LM and prints its loss curve.
//
// This is the early, standalone form of the trainer (see docs/training.md):
// it trains on the bytes of a text file (default: the novel in
// ../shared/data/gutenberg when present) or, without one, on a built-in
// Markov-chain corpus, and prints train and held-out loss as it goes. The
// task-file interface (--task task.json), checkpoints and the synthetic
// long-range corpus come with the training engine.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "model/config/architectures.h"
#include "model/config/model_config.h"
#include "model/config/param_count.h"
#include "model/hybrid_lm.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"

namespace {

using hlab::model::ModelConfig;

constexpr char kUsage[] = R"(usage: hlab-train [options]

Trains one small hybrid LM (byte-level) and prints its loss curve.

model:
  --arch NAME         architecture or pattern (default swa-32): full, swa-<w>,
                      lightning, mamba2, gdn, with -1to3 / -headwise / -nope
                      suffixes, or a pattern such as 'gdn:conv,full'
  --config FILE       model config JSON (overrides the model flags)
  --d-model N         width (default 128)
  --layers N          layers (default 4)
  --heads N           query heads (default 4)
  --kv-heads N        key/value heads (default 2)
  --match-params      match the hybrid's N to the Full backbone (appendix B)
data:
  --text FILE         train on the bytes of FILE (default: the Gutenberg novel
                      under $HLAB_SHARED_DIR/data, else a built-in corpus)
  --synthetic         use the built-in Markov-chain corpus
training:
  --seq-len N         tokens per sequence (default 128)
  --batch N           sequences per step (default 16)
  --steps N           optimizer steps (default 200)
  --lr X              peak learning rate (default 3e-3)
  --warmup N          warmup steps (default min(20, steps/10)); WSD, decay
                      over the last 10%
  --seed N            seed for init and data order (default 0)
  --threads N         intra-op threads (default: all cores)
  --bf16              bf16 autocast
  --eval-every N      held-out evaluation interval (default 20)
  --json              one JSON object per evaluation on stdout
  --build-info        print LibTorch's build configuration, threads and the
                      BLAS library actually loaded, then exit
)";

struct Options {
  std::string arch = "swa-32";
  std::string config_path;
  int64_t d_model = 128, layers = 4, heads = 4, kv_heads = 2;
  bool match_params = false;
  std::string text_path;
  bool synthetic = false;
  int64_t seq_len = 128, batch = 16, steps = 200, warmup = -1, seed = 0;
  int64_t threads = 0, eval_every = 20;
  double lr = 3e-3;
  bool bf16 = false, json = false;
};

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "hlab-train: " << message << "\n";
  std::exit(2);
}

// LibTorch's configuration and the BLAS/LAPACK libraries mapped into this
// process (Debian's libtorch uses whatever libblas.so.3 alternative is
// selected; OpenBLAS is ~2x faster than the reference BLAS or ATLAS).
void PrintBuildInfo() {
  std::cout << at::show_config() << "\n" << at::get_parallel_info() << "\n";
  // Force BLAS to load, then list the mapped libraries.
  torch::mm(torch::ones({64, 64}), torch::ones({64, 64}));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::set<std::string> libs;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find("blas") != std::string::npos ||
        path.find("lapack") != std::string::npos ||
        path.find("dnnl") != std::string::npos ||
        path.find("jemalloc") != std::string::npos ||
        path.find("tcmalloc") != std::string::npos) {
      libs.insert(path);
    }
  }
  std::cout << "libraries loaded:\n";
  for (const std::string& lib : libs) std::cout << "  " << lib << "\n";
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  std::map<std::string, int64_t*> ints = {{"--d-model", &o.d_model},
                                          {"--layers", &o.layers},
                                          {"--heads", &o.heads},
                                          {"--kv-heads", &o.kv_heads},
                                          {"--seq-len", &o.seq_len},
                                          {"--batch", &o.batch},
                                          {"--steps", &o.steps},
                                          {"--warmup", &o.warmup},
                                          {"--seed", &o.seed},
                                          {"--threads", &o.threads},
                                          {"--eval-every", &o.eval_every}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(arg + " needs a value (see --help)");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--build-info") {
      PrintBuildInfo();
      std::exit(0);
    } else if (ints.count(arg)) {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, ints[arg]) || *ints[arg] < 0) {
        Fail(arg + " must be a non-negative integer, got '" + v + "'");
      }
    } else if (arg == "--lr") {
      const std::string v = value();
      if (!absl::SimpleAtod(v, &o.lr) || !(o.lr > 0)) {
        Fail("--lr must be a positive number, got '" + v + "'");
      }
    } else if (arg == "--arch") {
      o.arch = value();
    } else if (arg == "--config") {
      o.config_path = value();
    } else if (arg == "--text") {
      o.text_path = value();
    } else if (arg == "--synthetic") {
      o.synthetic = true;
    } else if (arg == "--match-params") {
      o.match_params = true;
    } else if (arg == "--bf16") {
      o.bf16 = true;
    } else if (arg == "--json") {
      o.json = true;
    } else {
      Fail("unknown option '" + arg + "' (see --help)");
    }
  }
  for (auto [name, v] : {std::pair{"--seq-len", o.seq_len},
                         {"--batch", o.batch},
                         {"--steps", o.steps},
                         {"--eval-every", o.eval_every}}) {
    if (v <= 0) Fail(std::string(name) + " must be > 0");
  }
  if (o.warmup < 0) o.warmup = std::min<int64_t>(20, o.steps / 10);
  if (o.warmup >= o.steps) Fail("--warmup must be smaller than --steps");
  return o;
}

ModelConfig BuildConfig(const Options& o) {
  ModelConfig c;
  if (!o.config_path.empty()) {
    std::ifstream in(o.config_path);
    if (!in) Fail("cannot read --config file '" + o.config_path + "'");
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    auto parsed = hlab::model::ModelConfigFromJson(text);
    if (!parsed.ok()) {
      Fail(absl::StrCat(o.config_path, ": ", parsed.status().message()));
    }
    c = *parsed;
  } else {
    c.vocab_size = 256;
    c.d_model = o.d_model;
    c.n_layers = o.layers;
    c.n_heads = o.heads;
    c.n_kv_heads = o.kv_heads;
    c.head_dim = o.heads > 0 ? o.d_model / o.heads : 0;
    c.ffn_hidden = hlab::model::DefaultFfnHidden(o.d_model);
    c.arch = o.arch;
    auto layers = hlab::model::ExpandArchitecture(o.arch, o.layers);
    if (!layers.ok()) Fail(std::string(layers.status().message()));
    c.layers = *layers;
    absl::Status valid = hlab::model::ValidateModelConfig(c);
    if (!valid.ok()) Fail(std::string(valid.message()));
  }
  if (o.match_params) {
    auto matched = hlab::model::MatchParameters(c);
    if (!matched.ok()) Fail(std::string(matched.status().message()));
    c = matched->config;
  }
  if (c.vocab_size < 256) Fail("vocab_size must be >= 256 for byte-level data");
  return c;
}

// Byte tokens of the training text; the last 10% is held out.
std::vector<uint8_t> LoadBytes(const Options& o, std::string* source) {
  std::string path = o.text_path;
  if (path.empty() && !o.synthetic) {
    const char* shared = std::getenv("HLAB_SHARED_DIR");
    const std::string dir = shared ? shared : "../shared";
    const std::string novel = dir + "/data/gutenberg/frankenstein_pg84.txt";
    if (std::ifstream(novel)) path = novel;
  }
  if (!path.empty()) {
    std::ifstream in(path, std::ios::binary);
    if (!in) Fail("cannot read --text file '" + path + "'");
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    if (static_cast<int64_t>(bytes.size()) < 20 * (o.seq_len + 1)) {
      Fail("--text file '" + path + "' is too short for --seq-len " +
           std::to_string(o.seq_len));
    }
    *source = path;
    return bytes;
  }
  // Built-in corpus: an order-1 Markov chain over 64 symbols where each
  // symbol has 4 likely successors (entropy floor ~1.4 nats/token).
  *source = "built-in Markov corpus";
  std::mt19937_64 rng(1234);
  std::vector<std::array<uint8_t, 4>> next(64);
  for (auto& n : next) {
    for (auto& s : n) s = static_cast<uint8_t>(rng() % 64);
  }
  std::vector<uint8_t> bytes(400000);
  uint8_t s = 0;
  for (auto& b : bytes) {
    s = next[s][rng() % 4];
    b = static_cast<uint8_t>(s + 32);
  }
  return bytes;
}

// A batch of (B, T+1) windows at offsets drawn from (seed, step).
torch::Tensor SampleBatch(const std::vector<uint8_t>& bytes, int64_t begin,
                          int64_t end, int64_t batch, int64_t seq_len,
                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  torch::Tensor out = torch::empty({batch, seq_len + 1}, torch::kInt64);
  auto acc = out.accessor<int64_t, 2>();
  std::uniform_int_distribution<int64_t> pick(begin, end - seq_len - 2);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = pick(rng);
    for (int64_t t = 0; t <= seq_len; ++t) acc[b][t] = bytes[start + t];
  }
  return out;
}

void PrintChart(const std::vector<std::pair<int64_t, double>>& curve) {
  if (curve.size() < 2) return;
  double lo = curve[0].second, hi = curve[0].second;
  for (const auto& [step, loss] : curve) {
    lo = std::min(lo, loss);
    hi = std::max(hi, loss);
  }
  constexpr int kWidth = 50;
  std::cout << "\nheld-out loss curve (nats/byte):\n";
  for (const auto& [step, loss] : curve) {
    const int bar = hi > lo ? static_cast<int>(std::lround(
                                  (loss - lo) / (hi - lo) * (kWidth - 1))) +
                                  1
                            : 1;
    std::printf("  step %5lld  %6.3f  %s\n", static_cast<long long>(step), loss,
                std::string(bar, '#').c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  // LibTorch (Debian) starts with one intra-op thread: set it explicitly.
  at::set_num_threads(static_cast<int>(
      o.threads > 0 ? o.threads
                    : std::max(1u, std::thread::hardware_concurrency())));
  const ModelConfig config = BuildConfig(o);
  std::string source;
  const std::vector<uint8_t> bytes = LoadBytes(o, &source);
  const int64_t split = static_cast<int64_t>(bytes.size()) * 9 / 10;

  torch::manual_seed(static_cast<uint64_t>(o.seed));
  hlab::model::HybridLM model(config);
  const auto count = hlab::model::CountParameters(config);
  auto optimizer = hlab::train::MakeAdamW(*model, {.lr = o.lr});
  hlab::train::WsdSchedule schedule(
      {.peak_lr = o.lr, .warmup_steps = o.warmup, .total_steps = o.steps});

  std::cerr << "hlab-train: " << config.arch << " ("
            << hlab::model::LayersToPattern(config.layers)
            << "), N = " << count.non_embedding << " non-embedding / "
            << count.total << " total parameters\n"
            << "hlab-train: data: " << source << " (" << bytes.size()
            << " bytes, last 10% held out); " << o.steps << " steps x "
            << o.batch << " x " << o.seq_len << " tokens; "
            << at::get_num_threads() << " threads"
            << (o.bf16 ? "; bf16 autocast" : "") << "\n";
  if (!o.json) {
    std::printf("%6s %10s %10s %10s %9s %9s\n", "step", "tokens", "train",
                "held-out", "lr", "tok/s");
  }

  const torch::Tensor val_batch = SampleBatch(
      bytes, split, static_cast<int64_t>(bytes.size()), 16, o.seq_len, 0xE7A1);
  auto evaluate = [&]() {
    torch::NoGradGuard no_grad;
    model->eval();
    double loss = model
                      ->loss(val_batch.narrow(1, 0, o.seq_len),
                             val_batch.narrow(1, 1, o.seq_len))
                      .item<double>();
    model->train();
    return loss;
  };

  std::vector<std::pair<int64_t, double>> curve = {{0, evaluate()}};
  auto start = std::chrono::steady_clock::now();
  int64_t tokens = 0;
  double train_loss = 0;
  for (int64_t step = 0; step < o.steps; ++step) {
    torch::Tensor batch =
        SampleBatch(bytes, 0, split, o.batch, o.seq_len,
                    static_cast<uint64_t>(o.seed) * 1000003ULL + step);
    at::autocast::set_cpu_enabled(o.bf16);
    if (o.bf16) at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    torch::Tensor loss = model->loss(batch.narrow(1, 0, o.seq_len),
                                     batch.narrow(1, 1, o.seq_len));
    at::autocast::set_cpu_enabled(false);
    at::autocast::clear_cache();
    optimizer->zero_grad();
    loss.backward();
    const double grad_norm = hlab::train::ClipGradNorm(*model, 1.0);
    const double lr = schedule.LearningRate(step);
    hlab::train::SetLearningRate(*optimizer, lr);
    optimizer->step();
    train_loss = loss.item<double>();
    if (!std::isfinite(train_loss) || !std::isfinite(grad_norm)) {
      std::cerr << "hlab-train: loss or gradient is not finite at step "
                << step + 1 << "; lower --lr\n";
      return 3;
    }
    tokens += o.batch * o.seq_len;
    if ((step + 1) % o.eval_every == 0 || step + 1 == o.steps) {
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      const double held_out = evaluate();
      curve.emplace_back(step + 1, held_out);
      const double tps = static_cast<double>(tokens) / seconds;
      if (o.json) {
        std::printf(
            "{\"step\": %lld, \"tokens\": %lld, \"train_loss\": %.5f, "
            "\"val_loss\": %.5f, \"lr\": %.3g, \"grad_norm\": %.4f, "
            "\"tokens_per_s\": %.1f}\n",
            static_cast<long long>(step + 1), static_cast<long long>(tokens),
            train_loss, held_out, lr, grad_norm, tps);
      } else {
        std::printf("%6lld %10lld %10.4f %10.4f %9.2e %9.0f\n",
                    static_cast<long long>(step + 1),
                    static_cast<long long>(tokens), train_loss, held_out, lr,
                    tps);
      }
      std::fflush(stdout);
    }
  }
  if (!o.json) PrintChart(curve);
  return 0;
}
