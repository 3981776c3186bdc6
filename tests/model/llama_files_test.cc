// model/llama/safetensors.h and llama_config.h without LibTorch: the
// safetensors header checks, shards, config.json's refusals and Llama 3's
// rotary frequencies.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/llama/llama_config.h"
#include "model/llama/safetensors.h"
#include "tests/model/llama_test_util.h"

namespace hlab::model::llama {
namespace {

using testing::TinyLlama;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

SafetensorsEntry F32(const std::string& name, std::vector<int64_t> shape,
                     size_t values) {
  return {name, SafetensorsDType::kF32, std::move(shape),
          std::string(values * 4, '\x01')};
}

TEST(SafetensorsTest, EncodedFilesParseBack) {
  const std::string bytes = EncodeSafetensors(
      {F32("a", {2, 3}, 6),
       {"b", SafetensorsDType::kBF16, {4}, std::string(8, 'x')}},
      {{"format", "pt"}});
  EXPECT_EQ((bytes.size() - 8 - 6 * 4 - 8) % 8, 0u);  // header padded to 8
  auto tensors = ParseSafetensors(bytes, "m.safetensors");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  ASSERT_EQ(tensors->size(), 2u);
  const SafetensorsTensor& b = tensors->at("b");
  EXPECT_EQ(b.dtype, SafetensorsDType::kBF16);
  EXPECT_EQ(b.shape, std::vector<int64_t>{4});
  EXPECT_EQ(b.bytes, 8u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data), 8), "xxxxxxxx");
}

// A file whose header is `header` and whose data has `data_bytes` bytes.
std::string Raw(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  return out + header + std::string(data_bytes, '\0');
}

TEST(SafetensorsTest, MalformedHeadersAreNamed) {
  struct Case {
    std::string bytes, expected;
  };
  const std::vector<Case> cases = {
      {"abc", "fewer than the 8-byte header length"},
      {std::string("\xff\xff\xff\xff\0\0\0\0", 8), "exceeds the file"},
      {Raw("[1]", 0), "its header is not a map"},
      {Raw("{\"x\": {\"dtype\": \"I64\", \"shape\": [1], "
           "\"data_offsets\": [0, 8]}}",
           8),
       "tensor 'x': dtype I64 is not read by hlab"},
      {Raw("{\"x\": {\"dtype\": \"F32\", \"shape\": [3], "
           "\"data_offsets\": [0, 8]}}",
           8),
       "hold 8 bytes, but F32 [3] needs 12"},
      {Raw("{\"x\": {\"dtype\": \"F32\", \"shape\": [2], "
           "\"data_offsets\": [0, 8]}}",
           4),
       "lie outside the 4 bytes of data"},
      {Raw("{\"x\": {\"dtype\": \"F32\", \"shape\": [-2], "
           "\"data_offsets\": [0, 8]}}",
           8),
       "not an integer >= 0"},
      {Raw("{\"x\": {\"dtype\": \"F32\", \"shape\": [2], "
           "\"data_offsets\": [0, 8]}, \"y\": {\"dtype\": \"F32\", "
           "\"shape\": [1], \"data_offsets\": [4, 8]}}",
           8),
       "two tensors share bytes"},
      {Raw("{\"x\": 3", 0), "malformed JSON"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseSafetensors(c.bytes, "m.safetensors");
    ASSERT_FALSE(parsed.ok()) << c.expected;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(Message(parsed.status()).find(c.expected), std::string::npos)
        << parsed.status();
    EXPECT_NE(Message(parsed.status()).find("m.safetensors"),
              std::string::npos);
  }
}

TEST(SafetensorsTest, ShardsAreFoundThroughTheIndex) {
  const std::string dir = ::testing::TempDir() + "/llama_files_shards";
  std::filesystem::remove_all(dir);
  TinyLlama tiny;
  tiny.shards = 2;
  tiny.Write(dir);
  auto weights = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(weights.ok()) << weights.status();
  EXPECT_EQ((*weights)->tensors().size(), tiny.weights.size());
  const SafetensorsTensor* norm = (*weights)->Find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->shape, std::vector<int64_t>{tiny.d});
  EXPECT_EQ((*weights)->Find("nope"), nullptr);

  // An index that puts a tensor in a shard that lacks it (the embedding is
  // in the second).
  nlohmann::json index = {
      {"weight_map",
       {{"model.norm.weight", "model-00001-of-00002.safetensors"},
        {"model.embed_tokens.weight", "model-00001-of-00002.safetensors"}}}};
  TinyLlama::WriteFile(dir + "/model.safetensors.index.json", index.dump());
  auto bad = SafetensorsCheckpoint::Open(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Message(bad.status()).find("is not in model-0000"),
            std::string::npos)
      << bad.status();
}

absl::StatusOr<LlamaConfig> ParseWith(const std::string& key,
                                      const nlohmann::json& value) {
  nlohmann::json c = TinyLlama().Config();
  if (value.is_discarded()) {
    c.erase(key);
  } else {
    c[key] = value;
  }
  return ParseLlamaConfig(c.dump(), "config.json");
}

TEST(LlamaConfigTest, TheTinyConfigReadsBack) {
  auto c = ParseWith("vocab_size", 37);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->head_dim, 6);
  EXPECT_TRUE(c->rope_scaling.llama3);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 64);
  EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(LlamaConfigTest, FieldsThatWouldChangeTheModelAreRefusedByName) {
  struct Case {
    std::string key;
    nlohmann::json value;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"model_type", "mistral", "config.json: model_type: 'mistral'"},
      {"sliding_window", 4096, "config.json: sliding_window: 4096"},
      {"attention_bias", true, "config.json: attention_bias: true"},
      {"mlp_bias", true, "config.json: mlp_bias: true"},
      {"hidden_act", "gelu", "config.json: hidden_act: \"gelu\""},
      {"rope_scaling",
       {{"rope_type", "yarn"}, {"factor", 4.0}},
       "config.json: rope_scaling.rope_type: 'yarn'"},
      {"partial_rotary_factor", 0.5,
       "config.json: partial_rotary_factor: not a field"},
      {"architectures", {"MistralForCausalLM"}, "config.json: architectures"},
      {"num_key_value_heads", 3, "config.json: num_key_value_heads: 3"},
      {"hidden_size", -4, "config.json: hidden_size: must be an integer > 0"},
      {"vocab_size", nlohmann::json(nlohmann::json::value_t::discarded),
       "config.json: vocab_size: missing"},
      {"rms_norm_eps", "small", "config.json: rms_norm_eps: must be a number"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseWith(c.key, c.value);
    ASSERT_FALSE(parsed.ok()) << c.key;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(Message(parsed.status()).find(c.expected), std::string::npos)
        << parsed.status();
  }
  // A null sliding window is Llama's own default, not a window.
  EXPECT_TRUE(ParseWith("sliding_window", nullptr).ok());
}

TEST(LlamaConfigTest, Llama3FrequenciesFollowTheThreeBands) {
  // Llama 3.1 8B: theta 500000, head_dim 128, factor 8, bands 1 and 4 of an
  // 8192 original context.
  LlamaConfig c;
  c.hidden_size = 4096;
  c.num_attention_heads = 32;
  c.head_dim = 128;
  c.rope_theta = 500000.0;
  c.rope_scaling.llama3 = true;
  const std::vector<double> scaled = RopeInverseFrequencies(c);
  c.rope_scaling.llama3 = false;
  const std::vector<double> plain = RopeInverseFrequencies(c);
  ASSERT_EQ(scaled.size(), 64u);
  const double pi = std::acos(-1.0);
  int high = 0, low = 0, medium = 0;
  for (size_t i = 0; i < 64; ++i) {
    const double wavelen = 2 * pi / plain[i];
    if (wavelen < 8192.0 / 4) {  // high frequencies: kept
      EXPECT_DOUBLE_EQ(scaled[i], plain[i]);
      ++high;
    } else if (wavelen > 8192.0) {  // low frequencies: divided by 8
      EXPECT_DOUBLE_EQ(scaled[i], plain[i] / 8);
      ++low;
    } else {  // between: a blend, strictly inside
      const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
      EXPECT_NEAR(scaled[i], (1 - smooth) * plain[i] / 8 + smooth * plain[i],
                  1e-18);
      ++medium;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(medium, 0);
  EXPECT_DOUBLE_EQ(scaled[0], 1.0);
}

TEST(LlamaConfigTest, ParameterCountOfLlama31_8B) {
  LlamaConfig c;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  EXPECT_EQ(LlamaParameterCount(c), 8030261248);  // Meta's 8.03B
}

}  // namespace
}  // namespace hlab::model::llama
