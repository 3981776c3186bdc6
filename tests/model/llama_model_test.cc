// model/llama/llama_model.h against an independent fp64 forward pass in
// plain loops (tests/model/llama_test_util.h), on tiny random checkpoints
// written as Hugging Face files: GQA, Llama 3 rope scaling, tied and untied
// heads, BF16 weights, sharded weights; and the load-time refusals.
#include "model/llama/llama_model.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "model/kernels/linear_cross_entropy.h"
#include "tests/model/llama_test_util.h"

namespace hlab::model::llama {
namespace {

using testing::TinyLlama;

std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/llama_model_test_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

const std::vector<int> kTokens = {3, 17, 0, 36, 5, 5, 21, 9, 30, 2, 11, 8};

// Largest |logit - reference| over the sequence.
double MaxError(const LlamaModel& model, const TinyLlama& tiny) {
  std::vector<int64_t> ids(kTokens.begin(), kTokens.end());
  torch::Tensor logits = model.Forward(torch::tensor(ids).unsqueeze(0))
                             .squeeze(0)
                             .to(torch::kFloat64);
  const auto expected = tiny.Logits(kTokens);
  double worst = 0;
  for (size_t t = 0; t < kTokens.size(); ++t) {
    for (int64_t v = 0; v < tiny.vocab; ++v) {
      worst = std::max(worst,
                       std::abs(logits[t][v].item<double>() - expected[t][v]));
    }
  }
  return worst;
}

absl::StatusOr<std::unique_ptr<LlamaModel>> WriteAndLoad(
    TinyLlama& tiny, const std::string& name, const std::string& dtype = "") {
  const std::string dir = Dir(name);
  tiny.Write(dir);
  LlamaLoadOptions options;
  options.dtype = dtype;
  return LlamaModel::Load(dir, options);
}

TEST(LlamaModelTest, MatchesTheFp64ReferenceWithLlama3RopeAndGqa) {
  TinyLlama tiny;
  auto model = WriteAndLoad(tiny, "gqa");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->dtype(), torch::kFloat32);
  EXPECT_EQ((*model)->weights_description(), "model.safetensors");
  EXPECT_LT(MaxError(**model, tiny), 1e-5);
}

// The comparison can fail: the same weights read as plain RoPE, or as
// another theta, are far from the reference.
TEST(LlamaModelTest, TheOracleSeesTheRopeScaling) {
  TinyLlama tiny;
  auto model = WriteAndLoad(tiny, "oracle");
  ASSERT_TRUE(model.ok()) << model.status();
  TinyLlama plain = tiny;
  plain.llama3 = false;
  EXPECT_GT(MaxError(**model, plain), 1e-3);
  TinyLlama theta = tiny;
  theta.theta = 1000.0;
  EXPECT_GT(MaxError(**model, theta), 1e-3);
}

TEST(LlamaModelTest, MatchesWithPlainRopeTiedHeadAndNoGqa) {
  TinyLlama tiny;
  tiny.llama3 = false;
  tiny.tied = true;
  tiny.kv_heads = 4;
  auto model = WriteAndLoad(tiny, "tied");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_LT(MaxError(**model, tiny), 1e-5);
}

TEST(LlamaModelTest, Bf16WeightsAreReadAndComputedInFp32) {
  TinyLlama tiny;
  tiny.bf16 = true;  // the reference uses the same bf16-rounded values
  auto model = WriteAndLoad(tiny, "bf16", "fp32");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_LT(MaxError(**model, tiny), 1e-5);
}

TEST(LlamaModelTest, Bf16ComputeIsCloseToTheReference) {
  TinyLlama tiny;
  tiny.bf16 = true;
  auto model = WriteAndLoad(tiny, "bf16_compute", "bf16");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->dtype(), torch::kBFloat16);
  // bf16 keeps 8 bits of mantissa: logits of size ~1-3 agree to ~0.1.
  EXPECT_LT(MaxError(**model, tiny), 0.25);
}

TEST(LlamaModelTest, ShardedWeightsGiveTheSameLogits) {
  TinyLlama one, two;
  two.shards = 2;
  auto a = WriteAndLoad(one, "one_shard");
  auto b = WriteAndLoad(two, "two_shards");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->weights_description(),
            "model.safetensors.index.json (2 shards)");
  torch::Tensor ids =
      torch::tensor(std::vector<int64_t>{1, 2, 3, 4, 5}).unsqueeze(0);
  EXPECT_TRUE(torch::equal((*a)->Forward(ids), (*b)->Forward(ids)));
}

TEST(LlamaModelTest, BatchedRowsEqualSingleRows) {
  TinyLlama tiny;
  auto model = WriteAndLoad(tiny, "batch");
  ASSERT_TRUE(model.ok()) << model.status();
  torch::Tensor a = torch::tensor(std::vector<int64_t>{1, 2, 3, 4});
  torch::Tensor b = torch::tensor(std::vector<int64_t>{9, 8, 7, 6});
  torch::Tensor both = (*model)->Forward(torch::stack({a, b}));
  EXPECT_TRUE(torch::allclose(both[1], (*model)->Forward(b.unsqueeze(0))[0],
                              1e-6, 1e-6));
}

// Scoring's per-token NLL (one block of logits here) is the log-softmax of
// Forward's logits at the targets, bit for bit.
TEST(LlamaModelTest, TokenNllIsTheLogSoftmaxOfForward) {
  TinyLlama tiny;
  auto model = WriteAndLoad(tiny, "nll");
  ASSERT_TRUE(model.ok()) << model.status();
  const torch::Tensor in =
      torch::tensor(std::vector<int64_t>{1, 2, 3, 4, 9, 8, 7, 6}).view({2, 4});
  const torch::Tensor target =
      torch::tensor(std::vector<int64_t>{2, 3, 4, 5, 8, 7, 6, 5}).view({2, 4});
  const torch::Tensor want = -torch::log_softmax((*model)->Forward(in), -1)
                                  .gather(-1, target.unsqueeze(-1))
                                  .squeeze(-1);
  const torch::Tensor got = (*model)->TokenNll(in, target);
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::equal(got, want));
}

// Past one block of logits (5 x 220 tokens x 65,536 ids x 4 B = 288 MB),
// the blocked scorer: the same values as the log-softmax of Forward, to
// rounding.
TEST(LlamaModelTest, TokenNllInBlocksMatchesForward) {
  TinyLlama tiny;
  tiny.vocab = 65536;
  auto model = WriteAndLoad(tiny, "nll-blocks");
  ASSERT_TRUE(model.ok()) << model.status();
  torch::manual_seed(4);
  const torch::Tensor tokens = torch::randint(0, tiny.vocab, {5, 221});
  const torch::Tensor in = tokens.narrow(1, 0, 220);
  const torch::Tensor target = tokens.narrow(1, 1, 220);
  ASSERT_GT(LinearCrossEntropyBlockRows(in.numel(), tiny.vocab), 0);
  const torch::Tensor want = -torch::log_softmax((*model)->Forward(in), -1)
                                  .gather(-1, target.unsqueeze(-1))
                                  .squeeze(-1);
  const torch::Tensor got = (*model)->TokenNll(in, target);
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5))
      << (got - want).abs().max().item<float>();
}

TEST(LlamaModelTest, AMissingTensorIsNamed) {
  TinyLlama tiny;
  tiny.Generate();
  tiny.weights.erase("model.layers.1.mlp.up_proj.weight");
  auto model = WriteAndLoad(tiny, "missing");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(model.status().message())
                .find("'model.layers.1.mlp.up_proj.weight' is missing"),
            std::string::npos)
      << model.status();
}

TEST(LlamaModelTest, AWrongShapeNamesBothShapes) {
  TinyLlama tiny;
  tiny.Generate();
  tiny.shapes["model.norm.weight"] = {4, 6};  // 24 values, as [4, 6]
  auto model = WriteAndLoad(tiny, "shape");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(std::string(model.status().message())
                .find("'model.norm.weight' has shape [4, 6]"),
            std::string::npos)
      << model.status();
  EXPECT_NE(std::string(model.status().message()).find("gives [24]"),
            std::string::npos)
      << model.status();
}

TEST(LlamaModelTest, AnUnknownDtypeOptionIsRefused) {
  TinyLlama tiny;
  auto model = WriteAndLoad(tiny, "dtype", "fp8");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(model.status().message()).find("dtype: 'fp8'"),
            std::string::npos);
}

TEST(LlamaModelTest, ADirectoryWithoutWeightsSaysWhatItNeeds) {
  TinyLlama tiny;
  const std::string dir = Dir("no_weights");
  tiny.Write(dir);
  std::filesystem::remove(dir + "/model.safetensors");
  auto model = LlamaModel::Load(dir, {});
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(model.status().message())
                .find("neither model.safetensors nor "
                      "model.safetensors.index.json"),
            std::string::npos)
      << model.status();
}

// The second oracle: tests/model/llama_oracle.py, Hugging Face's
// modeling_llama written again in Python with Debian's python3-torch, in
// float64 (skipped without python3-torch).
TEST(LlamaModelTest, MatchesThePythonTorchOracle) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with torch (Debian's "
                    "python3-torch, which scripts/setup.sh installs)";
  }
  struct Case {
    std::string name;
    TinyLlama tiny;
  };
  std::vector<Case> cases(4);
  cases[0].name = "oracle_gqa";
  cases[1].name = "oracle_tied";
  cases[1].tiny.tied = true;
  cases[1].tiny.llama3 = false;
  cases[2].name = "oracle_bf16";
  cases[2].tiny.bf16 = true;
  cases[3].name = "oracle_shards";
  cases[3].tiny.shards = 2;
  for (Case& c : cases) {
    auto model = WriteAndLoad(c.tiny, c.name, "fp32");
    ASSERT_TRUE(model.ok()) << model.status();
    std::string command = std::string("/usr/bin/python3 ") + HLAB_SOURCE_DIR +
                          "/tests/model/llama_oracle.py " +
                          ::testing::TempDir() + "/llama_model_test_" + c.name;
    for (int id : kTokens) command += " " + std::to_string(id);
    FILE* pipe = ::popen(command.c_str(), "r");
    ASSERT_NE(pipe, nullptr) << command;
    std::string out;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
      out.append(buffer, n);
    }
    ASSERT_EQ(::pclose(pipe), 0) << command << "\n" << out;
    const nlohmann::json expected = nlohmann::json::parse(out);
    std::vector<int64_t> ids(kTokens.begin(), kTokens.end());
    torch::Tensor logits = (*model)
                               ->Forward(torch::tensor(ids).unsqueeze(0))
                               .squeeze(0)
                               .to(torch::kFloat64);
    ASSERT_EQ(expected.size(), kTokens.size());
    double worst = 0;
    for (size_t t = 0; t < kTokens.size(); ++t) {
      for (int64_t v = 0; v < c.tiny.vocab; ++v) {
        worst = std::max(worst, std::abs(logits[t][v].item<double>() -
                                         expected[t][v].get<double>()));
      }
    }
    EXPECT_LT(worst, 1e-5) << c.name;
    // And the two oracles agree with each other to float64 rounding.
    const auto fp64 = c.tiny.Logits(kTokens);
    EXPECT_NEAR(fp64[5][3], expected[5][3].get<double>(), 1e-9) << c.name;
  }
}

}  // namespace
}  // namespace hlab::model::llama
