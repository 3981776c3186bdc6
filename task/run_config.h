// RunConfig: a run's canonical config ("format": "hlab.run.v1"), the JSON
// whose SHA-256 is the run's id (coordinator/sweep/run_config.h), and the
// training task it means.
//
// The coordinator writes it once per run at expansion, stores it with the
// run, and at lease time turns it into the run's hlab-train task
// (TrainTaskForRun). hlab-eval reads it as an EVAL task's "config". Both go
// through the one field list below, so a run config has one reader and one
// writer.
//
// Thread-safety: plain data; pure functions.
//
//   HLAB_ASSIGN_OR_RETURN(RunConfig run, RunConfigFromJson(config_json));
//   HLAB_ASSIGN_OR_RETURN(TrainTask task, TrainTaskForRun(run));
#ifndef HLAB_TASK_RUN_CONFIG_H_
#define HLAB_TASK_RUN_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/config/model_config.h"
#include "task/json_fields.h"
#include "task/train_task.h"

namespace hlab::task {

inline constexpr char kRunConfigFormat[] = "hlab.run.v1";

struct RunDataConfig {
  std::string source = "synthetic";  // "synthetic" | "prepared"
  std::optional<std::string> path;   // prepared: the `hlab-data` directory
  std::optional<int64_t> seed;       // synthetic: the corpus seed
  // synthetic: the generator's version (kSyntheticCorpusVersion). Part of
  // the run id, so a sweep submitted after the corpus changes makes new runs
  // instead of continuing the old corpus's. Absent in runs made before v2.
  std::optional<int64_t> corpus_version;
  double long_fraction = 0.5;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("source", s.source);
    v("path", s.path);
    v("seed", s.seed);
    v("corpus_version", s.corpus_version);
    v("long_fraction", s.long_fraction);
  }
};

struct RunScheduleConfig {
  std::string kind = "wsd";
  double peak_lr = 3e-3;
  int64_t warmup_steps = 0;
  double decay_fraction = 0.1;
  std::string decay_shape = "linear";  // as the spec spells it
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;
  double grad_clip = 1.0;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("kind", s.kind);
    v("peak_lr", s.peak_lr);
    v("warmup_steps", s.warmup_steps);
    v("decay_fraction", s.decay_fraction);
    v("decay_shape", s.decay_shape);
    v("min_lr_ratio", s.min_lr_ratio);
    v("weight_decay", s.weight_decay);
    v("grad_clip", s.grad_clip);
  }
};

struct RunConfig {
  std::string format = kRunConfigFormat;
  model::ModelConfig model;
  int64_t seq_len = 0;
  int64_t batch_tokens = 0;
  int64_t tokens = 0;  // the budget D
  int64_t steps = 0;   // tokens / batch_tokens
  int64_t seed = 0;    // the training seed
  RunDataConfig data;
  RunScheduleConfig schedule;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("format", s.format);
    v.Required("model", s.model, "the run's resolved model");
    v.Required("seq_len", s.seq_len, "the run's context");
    v("batch_tokens", s.batch_tokens);
    v("tokens", s.tokens);
    v("steps", s.steps);
    v("seed", s.seed);
    v("data", s.data);
    v("schedule", s.schedule);
  }
};

// Reads a run config at `where` ("config" in an EVAL task, "" alone):
// InvalidArgument naming the field for an unknown field, a wrong type, a
// format other than hlab.run.v1, a seq_len below 2, a data source other
// than synthetic or prepared (with its path), or a synthetic run of another
// corpus version than this hlab generates (absent = v1, before commit
// 8b9f9ad): its results cannot be continued or re-evaluated.
absl::StatusOr<RunConfig> ReadRunConfig(const nlohmann::json& json,
                                        const std::string& where);
absl::StatusOr<RunConfig> RunConfigFromJson(absl::string_view text);
// Compact JSON with sorted keys: the text a run's id hashes.
std::string RunConfigToJson(const RunConfig& run);

// The run's training task: model (vocab_size at least kByteVocab on the
// byte-level synthetic corpus), data (a prepared run's <path>/long and
// <path>/short), seq_len, batch_tokens, budget_tokens = tokens, optimizer,
// schedule and seed; every other field at its default. The coordinator adds
// what the task kind and the worker decide (name, threads, checkpoints,
// branches, init_from).
absl::StatusOr<TrainTask> TrainTaskForRun(const RunConfig& run);

// The synthetic corpus this hlab generates (data/synthetic_corpus.h, which
// asserts the same number): 1 = the spelled-out `key QZXW is 4821.` format,
// 2 = one binding token per key and value, 3 = the Zipfian filler with
// filler-only short documents (docs/data.md).
inline constexpr int64_t kSyntheticCorpusVersion = 3;

// The byte-level tokenizer of the synthetic corpus: 256 bytes + 2 specials.
inline constexpr int64_t kByteVocab = 258;

}  // namespace hlab::task

#endif  // HLAB_TASK_RUN_CONFIG_H_
