// A tiny random LlamaForCausalLM written as Hugging Face files (config.json
// and model.safetensors, or two shards with an index), and an independent
// fp64 forward pass of it in plain loops: the oracle of
// model/llama/llama_model.h. Header-only; LibTorch-free.
#ifndef HLAB_TESTS_MODEL_LLAMA_TEST_UTIL_H_
#define HLAB_TESTS_MODEL_LLAMA_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/llama/safetensors.h"

namespace hlab::model::llama::testing {

struct TinyLlama {
  int64_t vocab = 37, d = 24, heads = 4, kv_heads = 2, head_dim = 6, ffn = 40;
  int64_t layers = 2;
  double eps = 1e-5, theta = 100.0;
  bool llama3 = true;  // rope_scaling {factor 8, 1, 4, original 64}
  bool tied = false;
  bool bf16 = false;  // store the weights as BF16
  int shards = 1;     // 1: model.safetensors; 2: an index and two shards
  uint64_t seed = 7;
  // name -> values (row-major), as stored (rounded to bf16 when bf16).
  std::map<std::string, std::vector<double>> weights;
  std::map<std::string, std::vector<int64_t>> shapes;

  nlohmann::json Config() const {
    nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
                        {"model_type", "llama"},
                        {"vocab_size", vocab},
                        {"hidden_size", d},
                        {"intermediate_size", ffn},
                        {"num_hidden_layers", layers},
                        {"num_attention_heads", heads},
                        {"num_key_value_heads", kv_heads},
                        {"head_dim", head_dim},
                        {"max_position_embeddings", 256},
                        {"rms_norm_eps", eps},
                        {"rope_theta", theta},
                        {"hidden_act", "silu"},
                        {"attention_bias", false},
                        {"mlp_bias", false},
                        {"tie_word_embeddings", tied},
                        {"torch_dtype", bf16 ? "bfloat16" : "float32"},
                        {"transformers_version", "4.46.0"}};
    c["rope_scaling"] = nullptr;
    if (llama3) {
      c["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", 8.0},
                           {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 64}};
    }
    return c;
  }

  static double RoundToBf16(double v) {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
    bits &= 0xffff0000u;
    std::memcpy(&f, &bits, 4);
    return f;
  }

  void Add(std::mt19937_64& rng, const std::string& name,
           std::vector<int64_t> shape, double mean, double stddev) {
    std::normal_distribution<double> normal(mean, stddev);
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) {
      x = static_cast<float>(normal(rng));
      if (bf16) x = RoundToBf16(x);
    }
    weights[name] = v;
    shapes[name] = shape;
  }

  void Generate() {
    std::mt19937_64 rng(seed);
    weights.clear();
    shapes.clear();
    const int64_t q = heads * head_dim, kv = kv_heads * head_dim;
    Add(rng, "model.embed_tokens.weight", {vocab, d}, 0.0, 0.5);
    for (int64_t i = 0; i < layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Add(rng, p + "input_layernorm.weight", {d}, 1.0, 0.1);
      Add(rng, p + "post_attention_layernorm.weight", {d}, 1.0, 0.1);
      Add(rng, p + "self_attn.q_proj.weight", {q, d}, 0.0, 0.3);
      Add(rng, p + "self_attn.k_proj.weight", {kv, d}, 0.0, 0.3);
      Add(rng, p + "self_attn.v_proj.weight", {kv, d}, 0.0, 0.3);
      Add(rng, p + "self_attn.o_proj.weight", {d, q}, 0.0, 0.2);
      Add(rng, p + "mlp.gate_proj.weight", {ffn, d}, 0.0, 0.2);
      Add(rng, p + "mlp.up_proj.weight", {ffn, d}, 0.0, 0.2);
      Add(rng, p + "mlp.down_proj.weight", {d, ffn}, 0.0, 0.2);
    }
    Add(rng, "model.norm.weight", {d}, 1.0, 0.1);
    if (!tied) Add(rng, "lm_head.weight", {vocab, d}, 0.0, 0.3);
  }

  SafetensorsEntry Entry(const std::string& name) const {
    SafetensorsEntry e;
    e.name = name;
    e.shape = shapes.at(name);
    e.dtype = bf16 ? SafetensorsDType::kBF16 : SafetensorsDType::kF32;
    for (double v : weights.at(name)) {
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      if (bf16) {
        const uint16_t high = static_cast<uint16_t>(bits >> 16);
        e.bytes.append(reinterpret_cast<const char*>(&high), 2);
      } else {
        e.bytes.append(reinterpret_cast<const char*>(&bits), 4);
      }
    }
    return e;
  }

  static void WriteFile(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  // Writes config.json and the weights into `dir` (created).
  void Write(const std::string& dir) {
    if (weights.empty()) Generate();
    std::filesystem::create_directories(dir);
    WriteFile(dir + "/config.json", Config().dump(2));
    if (shards == 1) {
      std::vector<SafetensorsEntry> entries;
      for (const auto& [name, v] : weights) entries.push_back(Entry(name));
      WriteFile(dir + "/model.safetensors",
                EncodeSafetensors(entries, {{"format", "pt"}}));
      return;
    }
    std::vector<SafetensorsEntry> parts[2];
    nlohmann::json map = nlohmann::json::object();
    int i = 0;
    for (const auto& [name, v] : weights) {
      const int shard = (i++ % 2);
      parts[shard].push_back(Entry(name));
      map[name] =
          "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
    }
    for (int s = 0; s < 2; ++s) {
      WriteFile(
          dir + "/model-0000" + std::to_string(s + 1) + "-of-00002.safetensors",
          EncodeSafetensors(parts[s]));
    }
    WriteFile(
        dir + "/model.safetensors.index.json",
        nlohmann::json({{"metadata", {{"total_size", 0}}}, {"weight_map", map}})
            .dump(2));
  }

  // Inverse frequencies as Hugging Face's _compute_llama3_parameters does.
  std::vector<double> InvFreq() const {
    std::vector<double> inv;
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      double f = std::pow(
          theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      if (llama3) {
        const double pi = std::acos(-1.0);
        const double wavelen = 2 * pi / f;
        const double low_wavelen = 64.0 / 1.0, high_wavelen = 64.0 / 4.0;
        if (wavelen > low_wavelen) {
          f /= 8.0;
        } else if (!(wavelen < high_wavelen)) {
          const double smooth = (64.0 / wavelen - 1.0) / (4.0 - 1.0);
          f = (1 - smooth) * f / 8.0 + smooth * f;
        }
      }
      inv.push_back(f);
    }
    return inv;
  }

  // The fp64 forward pass: logits[t][v] for tokens[0..T).
  std::vector<std::vector<double>> Logits(
      const std::vector<int>& tokens) const {
    const size_t t_len = tokens.size();
    auto w = [&](const std::string& n) -> const std::vector<double>& {
      return weights.at(n);
    };
    // y = W x for W (rows, cols) row-major.
    auto matvec = [](const std::vector<double>& W, const std::vector<double>& x,
                     int64_t rows) {
      const size_t cols = x.size();
      std::vector<double> y(static_cast<size_t>(rows), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0;
        for (size_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[c];
        y[r] = s;
      }
      return y;
    };
    auto rms = [&](const std::vector<double>& x, const std::vector<double>& g) {
      double ms = 0;
      for (double v : x) ms += v * v;
      ms /= static_cast<double>(x.size());
      std::vector<double> y(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        y[i] = g[i] * x[i] / std::sqrt(ms + eps);
      return y;
    };
    const std::vector<double> inv = InvFreq();
    auto rope = [&](std::vector<double>& v, size_t head, size_t pos) {
      const size_t half = static_cast<size_t>(head_dim / 2);
      double* x = v.data() + head * head_dim;
      std::vector<double> out(static_cast<size_t>(head_dim));
      for (size_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(pos) * inv[i];
        out[i] = x[i] * std::cos(a) - x[i + half] * std::sin(a);
        out[i + half] = x[i + half] * std::cos(a) + x[i] * std::sin(a);
      }
      for (size_t i = 0; i < static_cast<size_t>(head_dim); ++i) x[i] = out[i];
    };
    std::vector<std::vector<double>> x(t_len);
    for (size_t t = 0; t < t_len; ++t) {
      const auto& e = w("model.embed_tokens.weight");
      x[t].assign(e.begin() + tokens[t] * d, e.begin() + (tokens[t] + 1) * d);
    }
    const int64_t q_dim = heads * head_dim, kv_dim = kv_heads * head_dim;
    for (int64_t l = 0; l < layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(t_len), k(t_len), v(t_len);
      for (size_t t = 0; t < t_len; ++t) {
        const auto h = rms(x[t], w(p + "input_layernorm.weight"));
        q[t] = matvec(w(p + "self_attn.q_proj.weight"), h, q_dim);
        k[t] = matvec(w(p + "self_attn.k_proj.weight"), h, kv_dim);
        v[t] = matvec(w(p + "self_attn.v_proj.weight"), h, kv_dim);
        for (int64_t hh = 0; hh < heads; ++hh) rope(q[t], hh, t);
        for (int64_t hh = 0; hh < kv_heads; ++hh) rope(k[t], hh, t);
      }
      for (size_t t = 0; t < t_len; ++t) {
        std::vector<double> attended(static_cast<size_t>(q_dim), 0.0);
        for (int64_t hh = 0; hh < heads; ++hh) {
          const int64_t g = hh / (heads / kv_heads);
          std::vector<double> s(t + 1);
          double mx = -1e300;
          for (size_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (int64_t i = 0; i < head_dim; ++i) {
              dot += q[t][hh * head_dim + i] * k[j][g * head_dim + i];
            }
            s[j] = dot / std::sqrt(static_cast<double>(head_dim));
            mx = std::max(mx, s[j]);
          }
          double z = 0;
          for (double& e : s) z += (e = std::exp(e - mx));
          for (size_t j = 0; j <= t; ++j) {
            for (int64_t i = 0; i < head_dim; ++i) {
              attended[hh * head_dim + i] += s[j] / z * v[j][g * head_dim + i];
            }
          }
        }
        const auto o = matvec(w(p + "self_attn.o_proj.weight"), attended, d);
        for (int64_t i = 0; i < d; ++i) x[t][i] += o[i];
        const auto h = rms(x[t], w(p + "post_attention_layernorm.weight"));
        auto gate = matvec(w(p + "mlp.gate_proj.weight"), h, ffn);
        const auto up = matvec(w(p + "mlp.up_proj.weight"), h, ffn);
        for (int64_t i = 0; i < ffn; ++i) {
          gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
        }
        const auto down = matvec(w(p + "mlp.down_proj.weight"), gate, d);
        for (int64_t i = 0; i < d; ++i) x[t][i] += down[i];
      }
    }
    std::vector<std::vector<double>> logits(t_len);
    const auto& head =
        tied ? w("model.embed_tokens.weight") : w("lm_head.weight");
    for (size_t t = 0; t < t_len; ++t) {
      logits[t] = matvec(head, rms(x[t], w("model.norm.weight")), vocab);
    }
    return logits;
  }
};

}  // namespace hlab::model::llama::testing

#endif  // HLAB_TESTS_MODEL_LLAMA_TEST_UTIL_H_
