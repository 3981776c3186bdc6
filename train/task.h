// TrainTask: everything one hlab-train process needs to train (and evaluate)
// one model, read from a task JSON file (`hlab-train --task task.json`).
//
// The worker daemon writes these files from the coordinator's tasks; users
// write them by hand to debug or benchmark. Every field, its default and its
// meaning is in kTaskFieldsHelp (printed by `hlab-train --help`), and
// docs/training.md. Parsing rejects unknown fields and wrong types, naming
// the field ("optimizer.peak_lr: must be a number"); validation rejects
// inconsistent tasks (a budget smaller than the warmup, a batch that does not
// divide into sequences, ...), again naming the field.
//
// Three kinds of task share this one format:
//   * a plain run: trains from scratch (or its newest checkpoint) to its
//     budget;
//   * a WSD trunk: `branch_budgets_tokens` lists the budgets that share this
//     stable phase; it saves a branch checkpoint at each budget's decay start
//     and stops at the last one;
//   * a WSD decay: `init_from` names a branch checkpoint; it continues from
//     there to its own budget.
//
// Thread-safety: plain data.
//
//   HLAB_ASSIGN_OR_RETURN(TrainTask task, LoadTrainTask("task.json"));
//   TrainPlan plan = PlanTraining(task, n_params);
#ifndef HLAB_TRAIN_TASK_H_
#define HLAB_TRAIN_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/config/model_config.h"
#include "train/lr_schedule.h"

namespace hlab::train {

struct SyntheticDataConfig {
  // 0 = derived from seq_len: long documents fill a whole sequence
  // (seq_len + 1 .. 2 * seq_len), short ones are 16 .. seq_len / 4.
  int64_t long_min_tokens = 0, long_max_tokens = 0;
  int64_t short_min_tokens = 0, short_max_tokens = 0;
  int64_t min_distance = 16;
  double binding_rate = 0.3;
};

struct DataConfig {
  std::string source = "synthetic";  // "synthetic" | "prepared"
  uint64_t seed = 0;
  double long_fraction = 0.5;
  SyntheticDataConfig synthetic;
  // Prepared datasets (`hlab-data prepare`): long and short documents.
  std::string long_dir, short_dir;
};

struct OptimizerConfig {
  double peak_lr = 3e-3;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
};

struct ScheduleConfig {
  int64_t warmup_steps = 20;
  double decay_fraction = 0.1;
  DecayShape decay_shape = DecayShape::kLinear;
  double min_lr_ratio = 0.1;
};

struct CheckpointConfig {
  std::string dir;          // empty: no checkpoints (and no resume)
  int64_t every_steps = 0;  // 0: only at the end (and branch points)
  int64_t keep_last = 2;
  // Resume only from a checkpoint at or before this step; -1: the newest.
  // hlab-worker gives the newest step its coordinator recorded a checkpoint
  // at: the points of every step up to it are stored, so none is lost with
  // an attempt that died before reporting them.
  int64_t resume_max_step = -1;
};

struct EvalConfig {
  int64_t every_steps = 0;  // 0: only at branch points and at the end
  int64_t sequences = 32;   // held-out sequences per validation pass
};

struct TrainTask {
  std::string name;
  model::ModelConfig model;
  bool match_params = false;
  DataConfig data;
  int64_t seq_len = 128;
  int64_t batch_tokens = 4096;
  int64_t micro_batch_tokens = 0;  // 0: = batch_tokens (no accumulation)
  int64_t budget_tokens = 0;       // one of budget_tokens / tokens_per_param
  double tokens_per_param = 0;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  int64_t stop_at_tokens = 0;  // 0: the budget (or the last branch point)
  std::vector<int64_t> branch_budgets_tokens;
  std::string init_from;
  CheckpointConfig checkpoint;
  bool resume = true;
  uint64_t seed = 0;
  int64_t threads = 0;  // 0: all cores
  // "cpu" or "cuda" (a build against a CUDA LibTorch; data parallel over
  // NCCL). The worker sets "cuda" for tasks it gives GPUs.
  std::string device = "cpu";
  bool bf16 = false;  // bf16 autocast of the forward pass (CPU or CUDA)
  int64_t log_every_steps = 1;
  EvalConfig eval;
};

// Parses and validates a task. InvalidArgument names the field.
absl::StatusOr<TrainTask> TrainTaskFromJson(absl::string_view json);
// Reads `path`; NotFound / InvalidArgument name the file.
absl::StatusOr<TrainTask> LoadTrainTask(const std::string& path);
// Canonical JSON of a task (round-trips through TrainTaskFromJson).
std::string TrainTaskToJson(const TrainTask& task);

// Checks everything that does not need the parameter count.
absl::Status ValidateTrainTask(const TrainTask& task);

// The resolved step plan of a task for a model with `non_embedding_params`.
struct TrainPlan {
  int64_t sequences_per_step = 0;
  int64_t micro_batches = 0;  // gradient accumulation
  int64_t sequences_per_micro_batch = 0;
  int64_t budget_tokens = 0;            // as given, or ratio * N
  int64_t total_steps = 0;              // the schedule's length
  int64_t stop_step = 0;                // where this task stops
  std::vector<int64_t> branch_steps;    // ascending, one per branch budget
  std::vector<int64_t> branch_budgets;  // the budgets, in the same order
  WsdConfig schedule;
};

// Steps of a budget: round(budget / batch_tokens), at least 1.
int64_t StepsForTokens(int64_t tokens, int64_t batch_tokens);

// InvalidArgument naming the field when the plan is inconsistent (a budget
// smaller than the warmup, a branch budget above the task's budget, ...).
absl::StatusOr<TrainPlan> PlanTraining(const TrainTask& task,
                                       int64_t non_embedding_params);

// Validates a task completely without building a model (parameter counts
// from model/config) and returns its plan as one line of JSON: N, budget,
// steps, stop step, branch steps, micro-batches. For `hlab-train --check`.
absl::StatusOr<std::string> CheckTrainTask(const TrainTask& task);

// A small valid task that trains on the synthetic corpus in under a minute.
std::string ExampleTaskJson();

// Every field, its default and meaning (for --help and the docs).
extern const char kTaskFieldsHelp[];

}  // namespace hlab::train

#endif  // HLAB_TRAIN_TASK_H_
