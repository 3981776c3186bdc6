// EvalTask: one evaluation of one trained checkpoint, read from the EVAL
// task file of the coordinator/evaluator contract (docs/evaluation.md, "The
// task file"), and RunEvalTask, which runs it and emits the result records.
//
// The coordinator writes these files (coordinator/trainer_task.cc); users
// write them by hand (`hlab-eval --example-task`). Parsing rejects unknown
// fields and wrong types, naming the field ("evals.longppl.trunc_len: must
// be an integer"). "config" is the run's config: either the coordinator's
// canonical run config ("format": "hlab.run.v1") or an hlab-train task; the
// evaluator reads its seq_len and data from it. The model itself comes from
// the checkpoint's header.
//
// Records (train/records.h, one JSON object per line): start, progress,
// result (metric val_loss / log_longppl / niah_acc...), warning, done,
// error. Errors map to exit codes with train::ExitCodeFor: a bad task, a
// missing or corrupt checkpoint, a tokenizer mismatch, no document long
// enough, or a context above the trained length without
// allow_extrapolation are permanent (2).
//
// Thread-safety: plain data; RunEvalTask runs on the calling thread (and
// LibTorch's intra-op pool).
//
//   HLAB_ASSIGN_OR_RETURN(EvalTask task, LoadEvalTask("task.json"));
//   train::RecordWriter records(stdout, train::RecordWriter::Human::kNone);
//   absl::Status done = RunEvalTask(
//       task, [&](const nlohmann::json& r) { records.Emit(r); });
#ifndef HLAB_EVAL_EVAL_TASK_H_
#define HLAB_EVAL_EVAL_TASK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "train/task.h"

namespace hlab::eval {

// Where an evaluation's documents come from; all empty: the run's own
// held-out data. At most one of `jsonl` and `prepared`.
struct EvalDataSpec {
  std::string jsonl;                // a JSONL file (or .gz, or a directory)
  std::string text_field = "text";  // its text field ("a+b" joins two)
  std::string prepared;             // a dataset from `hlab-data prepare`
  std::string split = "heldout";    // its split: "train" or "heldout"
  // Tokenizer spec for `jsonl` (data/tokenizer.h); "" = the model's.
  std::string tokenizer;
  bool empty() const { return jsonl.empty() && prepared.empty(); }
};

struct ValLossSpec {
  int64_t tokens = 0;  // 0: kDefaultValLossTokens
  int64_t batch_sequences = 8;
  EvalDataSpec data;
};

struct LongPplSpec {
  int64_t trunc_len = 0;       // K; 0: seq_len / 4
  int64_t sliding_window = 0;  // W; 0: seq_len / 16
  int64_t context_len = 0;     // documents are cut to it; 0: seq_len
  double alpha = 2.0, beta = -2.0;
  int64_t min_key_tokens = 10;
  int64_t documents = 0;  // 0: kDefaultLongPplDocuments (or all, if fewer)
  std::string reference_run_id;           // informational
  std::string reference_checkpoint_path;  // as the sweep named it
  std::string reference_checkpoint;       // the resolved file (required)
  EvalDataSpec data;
};

// The task's evals.niah; converted to eval/niah.h's NiahConfig.
struct NiahSpec {
  std::vector<std::string> kinds;  // single, multikey, multivalue, passkey
  std::vector<int64_t> context_lengths;
  std::vector<double> depths;
  int64_t samples = 20;
  int64_t candidates = 8;
  uint64_t seed = 0;
  bool greedy = false;
  std::string haystack = "noise";  // "noise" | "synthetic" (eval/niah.h)
  std::string tokenizer;  // spec; empty: the model's (byte, or the prepared
                          // data's manifest)
};

// The receptive-field constraint of appendix D.1: val_loss and log(LongPPL)
// again with (a) the full-attention layers restricted to the keys
// [i-H, i], an exact mask, and (b) the efficient layers restricted instead,
// softmax ones exactly as (a) and recurrent ones by the paper's
// overlapping windows of 3H/2 tokens with stride H/2 and reset state, each
// giving its last H/2 outputs (each output sees H to 3H/2 - 1 previous
// tokens). Needs evals.val_loss (and uses evals.longppl when present): the
// results are the changes against them. H even, 2 <= H < seq_len (parsing
// checks both).
struct ReceptiveFieldSpec {
  int64_t limit = 0;  // H; 0: seq_len / 8 (the paper: ~2048 of 16K), even
};

// Gradient profiling (appendix D.3, eval/gradient_profile.h) on the run's
// long held-out documents (those of at least seq_len + 1 tokens), cut to
// seq_len + 1.
struct GradientProfileSpec {
  int64_t sequences = 16;
  int64_t batch_sequences = 8;
};

inline constexpr int64_t kDefaultValLossTokens = int64_t{1} << 16;
inline constexpr int64_t kDefaultLongPplDocuments = 64;

struct EvalTask {
  std::string task_id, run_id;
  int64_t step = -1;  // -1 (absent): the checkpoint's step
  std::string checkpoint;
  train::TrainTask run;  // seq_len and data of the run ("config")
  std::optional<ValLossSpec> val_loss;
  std::optional<LongPplSpec> longppl;
  std::optional<NiahSpec> niah;
  std::optional<ReceptiveFieldSpec> receptive_field;
  std::optional<GradientProfileSpec> gradient_profile;
  std::string cache_dir;  // "": no key-token cache
  int64_t threads = 0;    // 0: all cores
  bool allow_extrapolation = false;

  // "val_loss", "longppl", "niah", "receptive_field", "gradient_profile":
  // the evaluations present, in run order.
  std::vector<std::string> EvalNames() const;
};

// Parses and validates a task. InvalidArgument names the field.
absl::StatusOr<EvalTask> EvalTaskFromJson(absl::string_view json);
// Reads `path`; NotFound / InvalidArgument name the file.
absl::StatusOr<EvalTask> LoadEvalTask(const std::string& path);

// Resolved LongPPL parameters (defaults from the run's seq_len).
struct LongPplPlan {
  int64_t trunc_len = 0, sliding_window = 0, context_len = 0;
};
LongPplPlan PlanLongPpl(const LongPplSpec& spec, int64_t seq_len);

// H of a receptive-field spec (the default from seq_len: seq_len / 8,
// rounded down to even, at least 2).
int64_t ReceptiveFieldLimit(const ReceptiveFieldSpec& spec, int64_t seq_len);

// Validates the task against its checkpoints' headers without running a
// model: the checkpoints exist and have valid headers, the context lengths
// fit the model (or allow_extrapolation), the reference's vocabulary and
// tokenizer match. Returns the plan as one line of JSON (`hlab-eval
// --check`). Errors as RunEvalTask's.
absl::StatusOr<std::string> CheckEvalTask(const EvalTask& task);

// Receives each record (a train::RecordWriter's Emit, usually).
using RecordSink = std::function<void(const nlohmann::json&)>;

// Runs the task's evaluations in order, emitting records. The first error
// ends the task (its "error" record is the caller's to write).
absl::Status RunEvalTask(const EvalTask& task, const RecordSink& emit);

// A template task: the fields with their defaults and placeholder paths.
std::string ExampleEvalTaskJson();

// Every field, its default and meaning (for --help).
extern const char kEvalTaskFieldsHelp[];

}  // namespace hlab::eval

#endif  // HLAB_EVAL_EVAL_TASK_H_
