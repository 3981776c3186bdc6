// Helpers for the evaluator's tests: tiny checkpoints written directly, or
// trained with the real trainer; JSON-lines record parsing; shared data.
//
// Thread-safety: call from the test's thread (LibTorch's global seed).
//
//   WriteTinyCheckpoint(dir + "/m.ckpt", TinyConfig("swa-16"));
//   std::string newest = Train(task);  // a trained reference
//   auto records = ParseRecords(stdout_text);
//   nlohmann::json r = FindRecord(records, "result", "val_loss");
#ifndef HLAB_TESTS_EVAL_EVAL_TEST_UTIL_H_
#define HLAB_TESTS_EVAL_EVAL_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "gtest/gtest.h"
#include "model/config/model_config.h"
#include "model/hybrid_lm.h"
#include "task/train_task.h"
#include "train/checkpoint_file.h"
#include "train/optimizer.h"
#include "train/records.h"
#include "train/trainer.h"
#include "train/training_state.h"

namespace hlab::eval::testing {

// A small byte-level model config of architecture `arch` ("full", "swa-16").
inline model::ModelConfig TinyConfig(const std::string& arch,
                                     int64_t vocab = 258) {
  auto config = model::ModelConfigFromJson(nlohmann::json{
      {"arch", arch},
      {"d_model", 32},
      {"n_layers", 2},
      {"n_heads", 2},
      {"n_kv_heads", 1},
      {"vocab_size", vocab}}.dump());
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// Writes an untrained (seeded) model as a checkpoint; returns its payload
// SHA-256.
inline std::string WriteTinyCheckpoint(const std::string& path,
                                       const model::ModelConfig& config,
                                       const std::string& tokenizer = "byte",
                                       uint64_t seed = 0, int64_t step = 10) {
  torch::manual_seed(seed);
  model::HybridLM lm(config);
  auto optimizer = train::MakeAdamW(*lm, {.lr = 1e-3});
  train::CheckpointMeta meta;
  meta.step = step;
  meta.tokens = step * 256;
  meta.kind = "latest";
  meta.model_config = model::ModelConfigToJson(config);
  meta.fingerprint = "test";
  meta.tokenizer = tokenizer;
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  auto sha = train::WriteCheckpoint(path, meta,
                                    train::SaveTrainingState(*lm, *optimizer));
  EXPECT_TRUE(sha.ok()) << sha.status();
  return sha.ok() ? *sha : "";
}

// Trains `task` with the real trainer (records dropped) and returns the
// newest checkpoint in its checkpoint.dir.
inline std::string Train(const task::TrainTask& task) {
  train::RecordWriter records(nullptr, train::RecordWriter::Human::kNone);
  auto trainer = train::Trainer::Create(task, &records);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (!trainer.ok()) return "";
  const absl::Status done = (*trainer)->Run();
  EXPECT_TRUE(done.ok()) << done;
  const auto files = train::ListCheckpoints(task.checkpoint.dir);
  EXPECT_FALSE(files.empty());
  return files.empty() ? "" : files.front();
}

// JSON lines of `text`, parsed.
inline std::vector<nlohmann::json> ParseRecords(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// The first record of `type` (and `metric`, for results); null if none.
inline nlohmann::json FindRecord(const std::vector<nlohmann::json>& records,
                                 const std::string& type,
                                 const std::string& metric = "") {
  for (const auto& r : records) {
    if (r.value("type", "") != type) continue;
    if (!metric.empty() && r.value("metric", "") != metric) continue;
    return r;
  }
  return nullptr;
}

// $HLAB_SHARED_DIR/data/<relative> (default <repo>/../shared), "" if absent.
inline std::string SharedDataPath(const std::string& relative) {
  const char* shared = std::getenv("HLAB_SHARED_DIR");
  std::string dir = shared != nullptr ? shared : "../shared";
  if (dir.empty() || dir[0] != '/') {
    dir = std::string(HLAB_REPO_ROOT) + "/" + dir;
  }
  const std::string path = dir + "/data/" + relative;
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? path : "";
}

// A fresh temporary directory named after the running test.
inline std::filesystem::path TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() /
             (std::string("hlab_eval_") + std::to_string(::getpid()) + "_" +
              info->test_suite_name() + "_" + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace hlab::eval::testing

#endif  // HLAB_TESTS_EVAL_EVAL_TEST_UTIL_H_
