// TrainTask: everything one hlab-train process needs to train (and validate)
// one model: the task file of `hlab-train --task task.json`.
//
// The coordinator fills it from a run's config (task/run_config.h), the
// worker sets its directories, and users write them by hand to debug or
// benchmark. Each struct lists its fields once (Fields, task/json_fields.h);
// that list is how the file is read and how it is written. Every field, its
// default and its meaning is in kTaskFieldsHelp (`hlab-train --help`) and
// docs/training.md. Reading refuses unknown fields and wrong types, naming
// the field ("optimizer.peak_lr: must be a number"); ValidateTrainTask
// refuses inconsistent values, again naming the field.
//
// Three kinds of task share this one format:
//   * a plain run: trains from scratch (or its newest checkpoint) to its
//     budget;
//   * a WSD trunk: `branch_budgets_tokens` lists the budgets that share this
//     stable phase; it saves a branch checkpoint at each budget's decay start
//     and stops at the last one;
//   * a WSD decay: `init_from` names a branch checkpoint; it continues from
//     there to its own budget.
// A trunk segment is a trunk with `stop_at_tokens` at a branch point and,
// after the first, `init_from` the previous segment's branch checkpoint.
//
// No LibTorch: the coordinator, the worker and the CLI use it too.
// Thread-safety: plain data.
//
//   HLAB_ASSIGN_OR_RETURN(TrainTask task, LoadTrainTask("task.json"));
//   std::string text = TrainTaskToJson(task);
#ifndef HLAB_TASK_TRAIN_TASK_H_
#define HLAB_TASK_TRAIN_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/config/model_config.h"
#include "task/json_fields.h"
#include "task/lr_schedule.h"

namespace hlab::task {

struct SyntheticDataConfig {
  // 0 = derived from seq_len: a long document is exactly one sequence
  // (seq_len + 1 tokens, so every binding's recall is in it), short ones
  // are 16 .. seq_len / 4. The defaults are the recipe under which a tiny
  // full-attention model learns the recalls within ~1M tokens
  // (docs/data.md).
  int64_t long_min_tokens = 0, long_max_tokens = 0;
  int64_t short_min_tokens = 0, short_max_tokens = 0;
  int64_t min_distance = 4;
  // Long documents are dense with bindings (the recalls LongPPL and NIAH
  // test); short ones are filler only by default, the corpus's C4: their
  // loss is the local-structure Loss the paper fits (docs/data.md).
  double binding_rate = 1.0;
  double short_binding_rate = 0.0;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("long_min_tokens", s.long_min_tokens);
    v("long_max_tokens", s.long_max_tokens);
    v("short_min_tokens", s.short_min_tokens);
    v("short_max_tokens", s.short_max_tokens);
    v("min_distance", s.min_distance);
    v("binding_rate", s.binding_rate);
    v("short_binding_rate", s.short_binding_rate);
  }
};

struct DataConfig {
  std::string source = "synthetic";  // "synthetic" | "prepared"
  uint64_t seed = 0;
  double long_fraction = 0.5;
  SyntheticDataConfig synthetic;
  // Prepared datasets (`hlab-data prepare`): long and short documents.
  std::string long_dir, short_dir;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("source", s.source);
    v("seed", s.seed);
    v("long_fraction", s.long_fraction);
    v("synthetic", s.synthetic);
    v("long_dir", s.long_dir, Omit::kWhenEmpty);
    v("short_dir", s.short_dir, Omit::kWhenEmpty);
  }
};

struct OptimizerConfig {
  double peak_lr = 3e-3;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("peak_lr", s.peak_lr);
    v("beta1", s.beta1);
    v("beta2", s.beta2);
    v("eps", s.eps);
    v("weight_decay", s.weight_decay);
    v("grad_clip", s.grad_clip);
  }
};

struct ScheduleConfig {
  int64_t warmup_steps = 20;
  double decay_fraction = 0.1;
  DecayShape decay_shape = DecayShape::kLinear;
  double min_lr_ratio = 0.1;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("warmup_steps", s.warmup_steps);
    v("decay_fraction", s.decay_fraction);
    v("decay_shape", s.decay_shape);
    v("min_lr_ratio", s.min_lr_ratio);
  }
};

struct CheckpointConfig {
  std::string dir;          // empty: no checkpoints (and no resume)
  int64_t every_steps = 0;  // 0: only at the end (and branch points)
  int64_t keep_last = 2;
  // Also a checkpoint at every multiple of this step, never pruned
  // (kept-<step>.ckpt): evaluation.trajectory's points; 0: none.
  int64_t keep_every_steps = 0;
  // Resume only from a checkpoint at or before this step; -1: the newest.
  // hlab-worker gives the newest step its coordinator recorded a checkpoint
  // at: the points of every step up to it are stored, so none is lost with
  // an attempt that died before reporting them.
  int64_t resume_max_step = -1;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("dir", s.dir);
    v("every_steps", s.every_steps);
    v("keep_last", s.keep_last);
    v("keep_every_steps", s.keep_every_steps);
    v("resume_max_step", s.resume_max_step);
  }
};

struct EvalConfig {
  int64_t every_steps = 0;  // 0: only at branch points and at the end
  int64_t sequences = 32;   // held-out sequences per validation pass

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("every_steps", s.every_steps);
    v("sequences", s.sequences);
  }
};

// Training-time analysis hooks; they read the gradients and change nothing
// (the losses are bitwise those of a run without them).
struct AnalysisConfig {
  // Every N steps, each full-attention head's q_proj gradient Frobenius
  // norm (appendix D.4's formation curve) as an "analysis" record; 0: off.
  int64_t q_grad_every_steps = 0;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("q_grad_every_steps", s.q_grad_every_steps);
  }
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
  int64_t threads = 0;  // 0: all cores on the CPU, at most 4 on CUDA
  // "cpu" or "cuda" (a build against a CUDA LibTorch; data parallel over
  // NCCL). The worker sets "cuda" for tasks it gives GPUs.
  std::string device = "cpu";
  bool bf16 = false;  // bf16 autocast of the forward pass (CPU or CUDA)
  int64_t log_every_steps = 1;
  EvalConfig eval;
  AnalysisConfig analysis;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("name", s.name);
    v.Required("model", s.model, "the model config, docs/models.md");
    v("match_params", s.match_params);
    v("data", s.data);
    v("seq_len", s.seq_len);
    v("batch_tokens", s.batch_tokens);
    v("micro_batch_tokens", s.micro_batch_tokens);
    v("budget_tokens", s.budget_tokens, Omit::kWhenEmpty);
    v("tokens_per_param", s.tokens_per_param, Omit::kWhenEmpty);
    v("optimizer", s.optimizer);
    v("schedule", s.schedule);
    v("stop_at_tokens", s.stop_at_tokens);
    v("branch_budgets_tokens", s.branch_budgets_tokens);
    v("init_from", s.init_from);
    v("checkpoint", s.checkpoint);
    v("resume", s.resume);
    v("seed", s.seed);
    v("threads", s.threads);
    v("device", s.device);
    v("bf16", s.bf16);
    v("log_every_steps", s.log_every_steps);
    v("eval", s.eval);
    v("analysis", s.analysis);
  }
};

// A training task as a field of another file (an EVAL task's "config"): a
// run's canonical config ("format": "hlab.run.v1", read by ReadRunConfig and
// turned into its task by TrainTaskForRun, task/run_config.h) or an
// hlab-train task. Written as the hlab-train task; what the containing task
// needs of it is that task's to validate (ValidateEvalTask: seq_len, data).
template <>
struct FieldCodec<TrainTask> {
  static absl::Status Read(const nlohmann::json& j, const std::string& path,
                           TrainTask* out);
  static nlohmann::json Write(const TrainTask& value);
};

// The model config in a task file: model/config's own JSON form.
template <>
struct FieldCodec<model::ModelConfig> {
  static absl::Status Read(const nlohmann::json& j, const std::string& path,
                           model::ModelConfig* out);
  static nlohmann::json Write(const model::ModelConfig& value);
};

// "linear", "cosine" or "1-sqrt".
template <>
struct FieldCodec<DecayShape> {
  static absl::Status Read(const nlohmann::json& j, const std::string& path,
                           DecayShape* out);
  static nlohmann::json Write(const DecayShape& value);
};

// Reads the fields of a task without validating their values (types and
// names only). For those that fill a task in steps: the worker sets its
// directories, then hlab-train validates.
absl::StatusOr<TrainTask> ReadTrainTask(const nlohmann::json& json);
// Reads and validates a task. InvalidArgument names the field.
absl::StatusOr<TrainTask> TrainTaskFromJson(absl::string_view json);
// Reads `path`; NotFound / InvalidArgument name the file.
absl::StatusOr<TrainTask> LoadTrainTask(const std::string& path);
// The task file's JSON (reads back through TrainTaskFromJson to the same
// task).
std::string TrainTaskToJson(const TrainTask& task);

// Checks everything that does not need the parameter count.
absl::Status ValidateTrainTask(const TrainTask& task);

// A small valid task that trains on the synthetic corpus in under a minute.
std::string ExampleTaskJson();

// Every field, its default and meaning (for --help and the docs).
extern const char kTaskFieldsHelp[];

}  // namespace hlab::task

#endif  // HLAB_TASK_TRAIN_TASK_H_
