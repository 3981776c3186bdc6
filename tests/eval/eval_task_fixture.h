// The EVAL-task test fixture shared by eval_task_test and
// eval_task_llama_test: the task file the coordinator writes
// (ContractTask), and EvalTaskRunTest, which runs tasks against tiny
// checkpoints written into a temporary directory.
#ifndef HLAB_TESTS_EVAL_EVAL_TASK_FIXTURE_H_
#define HLAB_TESTS_EVAL_EVAL_TASK_FIXTURE_H_

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/eval_task.h"
#include "eval_test_util.h"
#include "gtest/gtest.h"

namespace hlab::eval::testing {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A task as the coordinator writes it (canonical run config).
inline Json ContractTask() {
  return Json::parse(R"({
    "kind": "eval", "task_id": "t-1", "run_id": "r-1", "step": 10,
    "checkpoint": "/nonexistent/step-0000000010.ckpt",
    "config": {"format": "hlab.run.v1",
               "model": {"arch": "swa-16", "d_model": 32, "n_layers": 2,
                         "n_heads": 2, "n_kv_heads": 1, "vocab_size": 258},
               "seq_len": 64, "batch_tokens": 256, "tokens": 2560,
               "steps": 10, "seed": 0,
               "data": {"source": "synthetic", "seed": 0,
                        "corpus_version": 3, "long_fraction": 0.5},
               "schedule": {"kind": "wsd", "peak_lr": 0.003}},
    "evals": {
      "val_loss": {"tokens": 0},
      "longppl": {"trunc_len": 0, "sliding_window": 0, "context_len": 0,
                  "reference": {"run_id": "r-ref", "checkpoint_path": "",
                                "checkpoint": "/nonexistent/ref.ckpt"}},
      "niah": {"context_lengths": [64], "depths": [0.5], "samples": 20}
    },
    "cache_dir": "", "threads": 0, "allow_extrapolation": false
  })");
}

inline absl::StatusOr<task::EvalTask> Parse(const Json& j) {
  return task::EvalTaskFromJson(j.dump());
}

// Runs tasks against checkpoints written into a temporary directory.
class EvalTaskRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TestDir();
    model_ = (dir_ / "model" / "step-0000000010.ckpt").string();
    reference_ = (dir_ / "reference" / "step-0000000020.ckpt").string();
    WriteTinyCheckpoint(model_, TinyConfig("swa-16"), "byte", 1, 10);
    reference_sha_ =
        WriteTinyCheckpoint(reference_, TinyConfig("full"), "byte", 2, 20);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Json Task() {
    Json j = ContractTask();
    j["checkpoint"] = model_;
    j["evals"].erase("niah");
    j["evals"]["val_loss"]["tokens"] = 1000;
    j["evals"]["longppl"]["documents"] = 4;
    j["evals"]["longppl"]["reference"]["checkpoint"] = reference_;
    j["cache_dir"] = (dir_ / "cache").string();
    j["threads"] = 1;
    return j;
  }

  // Runs `j`; the records go to records_.
  absl::Status Run(const Json& j) {
    records_.clear();
    auto task = Parse(j);
    if (!task.ok()) return task.status();
    return RunEvalTask(*task, [&](const Json& r) { records_.push_back(r); });
  }

  fs::path dir_;
  std::string model_, reference_, reference_sha_;
  std::vector<Json> records_;
};

}  // namespace hlab::eval::testing

#endif  // HLAB_TESTS_EVAL_EVAL_TASK_FIXTURE_H_
