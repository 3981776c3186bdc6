// hlab on CUDA against the CPU, at tiny scale: every architecture trains the
// same steps on both (the model is initialised on the CPU from the seed, so
// both start from the same weights and read the same batches): losses agree
// within 1e-4 in fp32 and 2e-2 under bf16 autocast. Exact resume on CUDA, and
// a CUDA run's checkpoint read back for evaluation on the CPU.
//
// Without a CUDA device (CI, any CPU machine) every test is skipped with the
// reason; scripts/gpu-check.sh runs them on a GPU and gathers the measured
// differences (the "max_abs_loss_diff" properties of --gtest_output=json).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "common/filesystem.h"
#include "eval/checkpoint_model.h"
#include "gtest/gtest.h"
#include "tests/cuda_test_util.h"
#include "train/checkpoint_file.h"
#include "train/trainer.h"

namespace hlab::train {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int64_t kBatch = 512;  // 4 sequences of 128 tokens
constexpr int64_t kSteps = 6;

fs::path TestRoot() {
  return fs::temp_directory_path() /
         ("hlab_cuda_train_" + std::to_string(::getpid()) + "_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// A tiny task: 2 layers of `arch` (4 for a 1:3 hybrid), 6 steps of 512
// tokens, no validation.
Json Task(const std::string& arch, const std::string& device, bool bf16,
          const fs::path& checkpoints) {
  Json j = Json::parse(R"({
    "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2,
              "vocab_size": 258},
    "seq_len": 128, "batch_tokens": 512,
    "optimizer": {"peak_lr": 0.003},
    "schedule": {"warmup_steps": 2, "decay_fraction": 0.3},
    "threads": 4, "log_every_steps": 1000,
    "eval": {"sequences": 0}
  })");
  j["model"]["arch"] = arch;
  // A 1:3 hybrid has one full layer in four.
  if (arch.find("-1to3") != std::string::npos) j["model"]["n_layers"] = 4;
  j["budget_tokens"] = kSteps * kBatch;
  j["device"] = device;
  j["bf16"] = bf16;
  j["checkpoint"] = {{"dir", checkpoints.string()}};
  return j;
}

std::unique_ptr<Trainer> Make(const Json& j) {
  auto task = task::TrainTaskFromJson(j.dump());
  EXPECT_TRUE(task.ok()) << task.status();
  if (!task.ok()) return nullptr;
  auto trainer = Trainer::Create(*task, nullptr);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  return trainer.ok() ? *std::move(trainer) : nullptr;
}

// The architectures of the study, at a window the 128-token context shows.
std::vector<std::string> Architectures() {
  return {"full",        "swa-32",    "swa-32-1to3", "swa-32-headwise",
          "swa-32-nope", "lightning", "mamba2",      "mamba2-conv",
          "gdn",         "gdn-conv"};
}

struct Case {
  std::string arch;
  bool bf16 = false;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.arch << (c.bf16 ? " bf16" : " fp32");
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const std::string& arch : Architectures()) {
    cases.push_back({arch, false});
    cases.push_back({arch, true});
  }
  return cases;
}

class CudaMatchesCpuTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { root_ = TestRoot(); }
  // Not fs::remove_all, which a pip libtorch.so breaks (common/filesystem.h).
  void TearDown() override { (void)RemoveTree(root_.string()); }
  fs::path root_;
};

TEST_P(CudaMatchesCpuTest, EveryStepsLoss) {
  const Case& c = GetParam();
  auto cpu = Make(Task(c.arch, "cpu", c.bf16, root_ / "cpu"));
  ASSERT_TRUE(cpu);  // the task is valid, also where the rest is skipped
  HLAB_SKIP_WITHOUT_CUDA();
  auto cuda = Make(Task(c.arch, "cuda", c.bf16, root_ / "cuda"));
  ASSERT_TRUE(cuda);
  ASSERT_TRUE(cpu->Run().ok());
  ASSERT_TRUE(cuda->Run().ok());
  ASSERT_EQ(cpu->losses().size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(cuda->losses().size(), cpu->losses().size());
  const double tolerance = c.bf16 ? 2e-2 : 1e-4;
  double worst = 0;
  for (size_t i = 0; i < cpu->losses().size(); ++i) {
    const double diff = std::abs(cpu->losses()[i] - cuda->losses()[i]);
    worst = std::max(worst, diff);
    EXPECT_LE(diff, tolerance)
        << c.arch << (c.bf16 ? " bf16" : " fp32") << " step " << i + 1
        << ": cpu " << cpu->losses()[i] << ", cuda " << cuda->losses()[i];
  }
  RecordProperty("max_abs_loss_diff", std::to_string(worst));
  RecordProperty("first_loss_cpu", std::to_string(cpu->losses()[0]));
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaMatchesCpuTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           std::string name =
                               param.param.arch +
                               (param.param.bf16 ? "_bf16" : "_fp32");
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

class CudaTrainTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = TestRoot(); }
  // Not fs::remove_all, which a pip libtorch.so breaks (common/filesystem.h).
  void TearDown() override { (void)RemoveTree(root_.string()); }
  fs::path root_;
};

TEST_F(CudaTrainTest, ResumeReproducesEveryLossBitwise) {
  HLAB_SKIP_WITHOUT_CUDA();
  for (const std::string arch : {"full", "swa-32", "mamba2", "gdn"}) {
    SCOPED_TRACE(arch);
    auto uninterrupted = Make(Task(arch, "cuda", true, root_ / arch / "full"));
    ASSERT_TRUE(uninterrupted && uninterrupted->Run().ok());
    Json first = Task(arch, "cuda", true, root_ / arch / "split");
    first["stop_at_tokens"] = 2 * kBatch;
    auto part1 = Make(first);
    ASSERT_TRUE(part1 && part1->Run().ok());
    auto part2 = Make(Task(arch, "cuda", true, root_ / arch / "split"));
    ASSERT_TRUE(part2);
    EXPECT_EQ(part2->start_step(), 2);
    ASSERT_TRUE(part2->Run().ok());
    std::vector<double> resumed = part1->losses();
    resumed.insert(resumed.end(), part2->losses().begin(),
                   part2->losses().end());
    EXPECT_EQ(resumed, uninterrupted->losses());
    EXPECT_EQ(part2->ParameterValues(), uninterrupted->ParameterValues());
  }
}

TEST_F(CudaTrainTest, ACudaCheckpointLoadsOnTheCpuForEvaluation) {
  HLAB_SKIP_WITHOUT_CUDA();
  auto trainer = Make(Task("gdn", "cuda", false, root_ / "ckpt"));
  ASSERT_TRUE(trainer && trainer->Run().ok());
  const std::vector<std::string> files =
      ListCheckpoints((root_ / "ckpt").string());
  ASSERT_FALSE(files.empty());
  auto loaded = eval::LoadCheckpointModel(files.front(), "checkpoint");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<float> values;
  for (const torch::Tensor& p : loaded->model->parameters()) {
    EXPECT_TRUE(p.device().is_cpu());
    const torch::Tensor flat =
        p.detach().to(torch::kFloat32).flatten().contiguous();
    values.insert(values.end(), flat.data_ptr<float>(),
                  flat.data_ptr<float>() + flat.numel());
  }
  EXPECT_EQ(values, trainer->ParameterValues());
}

}  // namespace
}  // namespace hlab::train
