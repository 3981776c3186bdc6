// hlab-bench-llama: the cost of the Llama LongPPL reference
// (model/llama/llama_model.h): load time, the key-token cache identity
// (SHA-256 of the weights), and forward time per 1K tokens at several
// sequence lengths, in fp32 and bf16.
//
//   build/bin/hlab-bench-llama                      # a random small Llama
//   build/bin/hlab-bench-llama --dir /models/Llama-3.2-1B --tokens 1024,4096
//   build/bin/hlab-bench-llama --d-model 512 --layers 8 --heads 8
//       --kv-heads 2 --ffn 1792 --vocab 128256 --threads 2
//
// Without --dir, a random LlamaForCausalLM of the given shape (Llama 3's
// vocabulary and rope scaling, untied head) is written to a temporary
// directory as config.json + model.safetensors. Each (dtype, length) is
// timed `repeats` times after one untimed pass; the median wall time is
// reported, with the GFLOP/s of 2 x parameters x tokens plus attention.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/sha256.h"
#include "model/llama/llama_model.h"
#include "model/llama/safetensors.h"

namespace {

namespace llama = hlab::model::llama;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir;
  int64_t d_model = 512, layers = 8, heads = 8, kv_heads = 2, ffn = 1792;
  int64_t vocab = 128256;
  std::vector<int64_t> tokens = {1024, 4096};
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  int64_t threads = 0, repeats = 3;
};

[[noreturn]] void Usage(int code) {
  std::cerr << "usage: hlab-bench-llama [--dir DIR] [--d-model N] [--layers N] "
               "[--heads N] [--kv-heads N] [--ffn N] [--vocab N] "
               "[--tokens N,N] [--dtypes fp32,bf16] [--threads N] "
               "[--repeats N]\n";
  std::exit(code);
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help") Usage(0);
    if (i + 1 >= argc) Usage(2);
    const std::string value = argv[++i];
    auto number = [&](int64_t* out) {
      if (!absl::SimpleAtoi(value, out) || *out < 1) {
        std::cerr << "hlab-bench-llama: " << arg
                  << " needs a positive integer, got '" << value << "'\n";
        std::exit(2);
      }
    };
    if (arg == "--dir") {
      o.dir = value;
    } else if (arg == "--d-model") {
      number(&o.d_model);
    } else if (arg == "--layers") {
      number(&o.layers);
    } else if (arg == "--heads") {
      number(&o.heads);
    } else if (arg == "--kv-heads") {
      number(&o.kv_heads);
    } else if (arg == "--ffn") {
      number(&o.ffn);
    } else if (arg == "--vocab") {
      number(&o.vocab);
    } else if (arg == "--threads") {
      number(&o.threads);
    } else if (arg == "--repeats") {
      number(&o.repeats);
    } else if (arg == "--tokens") {
      o.tokens.clear();
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        int64_t n = 0;
        if (!absl::SimpleAtoi(part, &n) || n < 2) Usage(2);
        o.tokens.push_back(n);
      }
    } else if (arg == "--dtypes") {
      o.dtypes = absl::StrSplit(value, ',');
    } else {
      Usage(2);
    }
  }
  return o;
}

// A random Llama of the options' shape in `dir`.
void WriteRandomLlama(const Options& o, const std::string& dir) {
  const int64_t head_dim = o.d_model / o.heads;
  nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                           {"model_type", "llama"},
                           {"vocab_size", o.vocab},
                           {"hidden_size", o.d_model},
                           {"intermediate_size", o.ffn},
                           {"num_hidden_layers", o.layers},
                           {"num_attention_heads", o.heads},
                           {"num_key_value_heads", o.kv_heads},
                           {"rms_norm_eps", 1e-5},
                           {"rope_theta", 500000.0},
                           {"rope_scaling",
                            {{"rope_type", "llama3"},
                             {"factor", 8.0},
                             {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}}},
                           {"tie_word_embeddings", false}};
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<llama::SafetensorsEntry> entries;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = normal(rng);
    if (shape.size() == 1) std::fill(values.begin(), values.end(), 1.0f);
    llama::SafetensorsEntry e{name, llama::SafetensorsDType::kF32, shape, {}};
    e.bytes.assign(reinterpret_cast<const char*>(values.data()),
                   values.size() * sizeof(float));
    entries.push_back(std::move(e));
  };
  const int64_t q = o.heads * head_dim, kv = o.kv_heads * head_dim;
  add("model.embed_tokens.weight", {o.vocab, o.d_model});
  for (int64_t i = 0; i < o.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {o.d_model});
    add(p + "post_attention_layernorm.weight", {o.d_model});
    add(p + "self_attn.q_proj.weight", {q, o.d_model});
    add(p + "self_attn.k_proj.weight", {kv, o.d_model});
    add(p + "self_attn.v_proj.weight", {kv, o.d_model});
    add(p + "self_attn.o_proj.weight", {o.d_model, q});
    add(p + "mlp.gate_proj.weight", {o.ffn, o.d_model});
    add(p + "mlp.up_proj.weight", {o.ffn, o.d_model});
    add(p + "mlp.down_proj.weight", {o.d_model, o.ffn});
  }
  add("model.norm.weight", {o.d_model});
  add("lm_head.weight", {o.vocab, o.d_model});
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump(2);
  const std::string bytes = llama::EncodeSafetensors(entries);
  std::ofstream(dir + "/model.safetensors", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  at::set_num_threads(static_cast<int>(
      o.threads > 0 ? o.threads
                    : std::max(1u, std::thread::hardware_concurrency())));
  std::string dir = o.dir;
  std::string temp;
  if (dir.empty()) {
    temp = (std::filesystem::temp_directory_path() /
            ("hlab_bench_llama_" + std::to_string(::getpid())))
               .string();
    std::cerr << "writing a random Llama to " << temp << "\n";
    WriteRandomLlama(o, temp);
    dir = temp;
  }
  // The key-token cache's identity reads every weight byte once.
  auto start = Clock::now();
  auto weights = llama::SafetensorsCheckpoint::Open(dir);
  if (!weights.ok()) {
    std::cerr << "hlab-bench-llama: " << weights.status() << "\n";
    return 1;
  }
  hlab::Sha256 sha;
  size_t total = 0;
  for (const auto& [name, t] : (*weights)->tensors()) {
    sha.Update(t->data, t->bytes);
    total += t->bytes;
  }
  sha.HexDigest();
  const double hash_s = Seconds(start);
  std::printf(
      "weights: %s, %.1f MB; SHA-256 of the weights %.2f s (%.0f MB/s)\n",
      (*weights)->description().c_str(), total / 1e6, hash_s,
      total / 1e6 / hash_s);
  std::printf("%-5s %7s %9s %11s %9s %8s\n", "dtype", "tokens", "load_s",
              "forward_s", "s_per_1k", "GFLOP/s");
  for (const std::string& dtype : o.dtypes) {
    start = Clock::now();
    auto model = llama::LlamaModel::Load(dir, {torch::kCPU, dtype});
    if (!model.ok()) {
      std::cerr << "hlab-bench-llama: " << model.status() << "\n";
      return 1;
    }
    const double load_s = Seconds(start);
    const llama::LlamaConfig& c = (*model)->config();
    const double params = static_cast<double>(llama::LlamaParameterCount(c)) -
                          static_cast<double>(c.vocab_size * c.hidden_size);
    for (int64_t n : o.tokens) {
      torch::Tensor ids = torch::randint(c.vocab_size, {1, n}, torch::kInt64);
      (*model)->Forward(ids);  // untimed
      std::vector<double> times;
      for (int64_t r = 0; r < o.repeats; ++r) {
        start = Clock::now();
        (*model)->Forward(ids);
        times.push_back(Seconds(start));
      }
      std::sort(times.begin(), times.end());
      const double s = times[times.size() / 2];
      // 2 x (non-embedding parameters) per token, plus QK^T and PV over
      // the causal half.
      const double flops =
          2.0 * params * n + 2.0 * c.num_hidden_layers * c.num_attention_heads *
                                 c.head_dim * static_cast<double>(n) * n;
      std::printf("%-5s %7lld %9.2f %11.3f %9.3f %8.1f\n", dtype.c_str(),
                  static_cast<long long>(n), load_s, s, s / n * 1000.0,
                  flops / s / 1e9);
    }
  }
  if (!temp.empty()) std::filesystem::remove_all(temp);
  return 0;
}
