// EvalTask: one evaluation of one trained checkpoint, the task file of
// `hlab-eval --task task.json` (docs/evaluation.md, "The task file").
//
// The coordinator fills it at lease time from the EVAL draft it planned
// (coordinator/planning/trainer_task.cc); users write them by hand (`hlab-eval
// --example-task`). Each struct lists its fields once (Fields,
// task/json_fields.h): the one reader and the one writer. "config" is the
// run's config: its canonical run config (task/run_config.h) or the
// hlab-train task it was trained with; the evaluator reads its seq_len and
// data. The model itself comes from the checkpoint's header. Running a task
// is eval/eval_task.h's.
//
// No LibTorch. Thread-safety: plain data; pure functions.
//
//   HLAB_ASSIGN_OR_RETURN(EvalTask task, LoadEvalTask("task.json"));
//   for (const std::string& name : task.evals.Names()) ...
#ifndef HLAB_TASK_EVAL_TASK_H_
#define HLAB_TASK_EVAL_TASK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "task/json_fields.h"
#include "task/train_task.h"

namespace hlab::task {

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

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("jsonl", s.jsonl);
    v("text_field", s.text_field);
    v("prepared", s.prepared);
    v("split", s.split);
    v("tokenizer", s.tokenizer);
  }
};

// Which of the run's held-out documents the validation loss reads (when no
// `data` is given): both kinds packed as in training, or one kind alone.
// The paper's Loss is the short kind's (C4); its log(LongPPL) reads long
// documents (GovReport).
inline constexpr char kValLossMixture[] = "mixture";
inline constexpr char kValLossShort[] = "short";
inline constexpr char kValLossLong[] = "long";
bool ValidValLossDocuments(const std::string& documents);

struct ValLossSpec {
  int64_t tokens = 0;  // 0: kDefaultValLossTokens
  int64_t batch_sequences = 8;
  EvalDataSpec data;
  std::string documents = kValLossMixture;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("tokens", s.tokens);
    v("batch_sequences", s.batch_sequences);
    v("data", s.data);
    v("documents", s.documents);
  }
};

// The model that selects LongPPL's key tokens: an hlab checkpoint, or a
// Hugging Face Llama directory (`hf_dir`: config.json + safetensors, as the
// paper's Llama-3.1-8B; model/llama/llama_model.h), computed in `dtype`
// ("fp32" or "bf16"; "" = bf16 on a GPU, fp32 on the CPU). A checkpoint
// whose tokenizer is not the evaluated model's names it in `tokenizer` (a
// spec: "gpt2:DIR", "hf:DIR", ...); key tokens then travel as character
// ranges (a Llama's is its directory's tokenizer.json).
struct LongPplReference {
  std::string run_id;           // informational: the reference run
  std::string checkpoint_path;  // as the sweep named it
  std::string checkpoint;       // the resolved file (the coordinator's)
  std::string hf_dir;
  std::string dtype;
  std::string tokenizer;
  // The file to load: checkpoint, or else checkpoint_path.
  const std::string& File() const {
    return checkpoint.empty() ? checkpoint_path : checkpoint;
  }

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("run_id", s.run_id);
    v("checkpoint_path", s.checkpoint_path);
    v("checkpoint", s.checkpoint);
    v("hf_dir", s.hf_dir);
    v("dtype", s.dtype);
    v("tokenizer", s.tokenizer);
  }
};

// evals.longppl.key_tokens: key tokens chosen elsewhere, as character
// ranges of each document (data/key_spans.h; docs/evaluation.md, "Key
// tokens from another tool"): hlab's JSONL form in `file`, or
// PKU-ML/LongPPL's slice_<i>.txt files in `slices` with their texts in
// `texts`. The documents are the file's texts, encoded with `tokenizer`
// ("" = the model's), whose identity must be the model's. No reference.
struct LongPplKeyTokensSpec {
  std::string file;
  std::string slices;
  std::string texts;
  std::string tokenizer;
  bool empty() const {
    return file.empty() && slices.empty() && texts.empty() && tokenizer.empty();
  }

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("file", s.file);
    v("slices", s.slices);
    v("texts", s.texts);
    v("tokenizer", s.tokenizer);
  }
};

// How log(LongPPL) pools documents: the key-token NLL pooled over all
// documents (the LongPPL code since July 2025), or the log of the
// key-token-weighted mean of per-document perplexities (its code before).
inline constexpr char kLongPplPooled[] = "pooled";
inline constexpr char kLongPplPerDocument[] = "per_document";

struct LongPplSpec {
  int64_t trunc_len = 0;       // K; 0: seq_len / 4
  int64_t sliding_window = 0;  // W; 0: seq_len / 16
  int64_t context_len = 0;     // documents are cut to it; 0: seq_len
  double alpha = 2.0, beta = -2.0;
  int64_t min_key_tokens = 10;
  // 0: kDefaultLongPplDocuments (or all, if fewer); with key_tokens, all.
  int64_t documents = 0;
  std::string aggregation = kLongPplPooled;
  LongPplReference reference;  // not with key_tokens
  EvalDataSpec data;           // not with key_tokens
  LongPplKeyTokensSpec key_tokens;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("trunc_len", s.trunc_len);
    v("sliding_window", s.sliding_window);
    v("context_len", s.context_len);
    v("alpha", s.alpha);
    v("beta", s.beta);
    v("min_key_tokens", s.min_key_tokens);
    v("documents", s.documents);
    v("aggregation", s.aggregation);
    v("reference", s.reference);  // its file is required (validation)
    v("data", s.data);
    v("key_tokens", s.key_tokens);
  }
};

// evals.niah; converted to eval/niah.h's NiahConfig.
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

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("kinds", s.kinds);
    v("context_lengths", s.context_lengths);
    v("depths", s.depths);
    v("samples", s.samples);
    v("candidates", s.candidates);
    v("seed", s.seed);
    v("greedy", s.greedy);
    v("haystack", s.haystack);
    v("tokenizer", s.tokenizer);
  }
};

// The receptive-field constraint of appendix D.1: val_loss and log(LongPPL)
// again with (a) the full-attention layers restricted to the keys
// [i-H, i], an exact mask, and (b) the efficient layers restricted instead,
// softmax ones exactly as (a) and recurrent ones by the paper's
// overlapping windows of 3H/2 tokens with stride H/2 and reset state, each
// giving its last H/2 outputs (each output sees H to 3H/2 - 1 previous
// tokens). Needs evals.val_loss (and uses evals.longppl when present): the
// results are the changes against them. H even, 2 <= H < seq_len.
struct ReceptiveFieldSpec {
  int64_t limit = 0;  // H; 0: seq_len / 8 (the paper: ~2048 of 16K), even

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("limit", s.limit);
  }
};

// Gradient profiling (appendix D.3, eval/gradient_profile.h) on the run's
// long held-out documents (those of at least seq_len + 1 tokens), cut to
// seq_len + 1.
struct GradientProfileSpec {
  int64_t sequences = 16;
  int64_t batch_sequences = 8;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("sequences", s.sequences);
    v("batch_sequences", s.batch_sequences);
  }
};

// Layer-wise probing (appendix D.2, eval/probing.h): synthetic-haystack
// single-needle NIAH samples whose value is one of `classes` classes, a
// linear softmax probe per layer on the residual stream at the query
// position, test accuracy with a Wilson 95% interval. Needs a model with a
// full-attention layer (the paper's analysis of full attention's role).
struct ProbingSpec {
  int64_t samples = 512;        // kept samples, all classes
  int64_t context_length = 0;   // 0: seq_len
  std::vector<double> depths;   // empty: 0.1, 0.3, 0.5, 0.7, 0.9
  int64_t classes = 8;          // 2 .. 10 (the synthetic corpus's values)
  double test_fraction = 0.25;  // of each class, in (0, 1)
  double l2 = 1e-2;             // (l2 / 2) ||W||^2 on the mean CE
  uint64_t seed = 0;
  int64_t batch_sequences = 8;
  std::string tokenizer;  // as evals.niah.tokenizer

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("samples", s.samples);
    v("context_length", s.context_length);
    v("depths", s.depths);
    v("classes", s.classes);
    v("test_fraction", s.test_fraction);
    v("l2", s.l2);
    v("seed", s.seed);
    v("batch_sequences", s.batch_sequences);
    v("tokenizer", s.tokenizer);
  }
};

// Retrieval-head tracing (appendix D.4, eval/retrieval_heads.h): every
// full-attention head on synthetic-haystack single-needle NIAH samples,
// teacher-forced on the true answer: the Retrieval_Head score (its top-1
// key lies in the needle and the generated token equals the token there),
// the attention mass on the needle and the normalised attention entropy;
// the top heads. Needs a model with a full-attention layer.
struct RetrievalHeadsSpec {
  int64_t samples = 64;
  int64_t context_length = 0;  // 0: seq_len
  std::vector<double> depths;  // empty: 0.1, 0.3, 0.5, 0.7, 0.9
  int64_t top_heads = 2;
  uint64_t seed = 0;
  std::string tokenizer;  // as evals.niah.tokenizer

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("samples", s.samples);
    v("context_length", s.context_length);
    v("depths", s.depths);
    v("top_heads", s.top_heads);
    v("seed", s.seed);
    v("tokenizer", s.tokenizer);
  }
};

// One task of evals.multiple_choice (eval/multiple_choice.h;
// docs/evaluation.md, "Multiple-choice tasks"): a JSONL file of questions
// {"context", "choices", "gold"}, scored as lm-eval scores
// `output_type: multiple_choice`.
struct MultipleChoiceTaskSpec {
  std::string name;          // metrics mc_acc/<name>; "": the file's stem
  std::string file;          // required
  std::string fewshot_file;  // examples' source; "": zero-shot
  int64_t num_fewshot = 0;
  std::string target_delimiter = " ";
  std::string fewshot_delimiter = "\n\n";
  int64_t limit = 0;  // the first `limit` questions; 0: all

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("name", s.name);
    v("file", s.file);
    v("fewshot_file", s.fewshot_file);
    v("num_fewshot", s.num_fewshot);
    v("target_delimiter", s.target_delimiter);
    v("fewshot_delimiter", s.fewshot_delimiter);
    v("limit", s.limit);
  }
};

// lm-eval's default fewshot_seed.
inline constexpr uint64_t kDefaultMultipleChoiceSeed = 1234;

// The metric suffix of a task: its name, or its file's base name without
// the extension ("data/arc_easy.jsonl" -> "arc_easy").
std::string MultipleChoiceTaskName(const MultipleChoiceTaskSpec& spec);

// evals.multiple_choice: tasks in lm-evaluation-harness's conventions,
// stored as mc_acc/<name> and mc_acc_norm/<name>.
struct MultipleChoiceSpec {
  std::vector<MultipleChoiceTaskSpec> tasks;   // at least one
  uint64_t seed = kDefaultMultipleChoiceSeed;  // few-shot draws
  std::string tokenizer;                       // as evals.niah.tokenizer

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("tasks", s.tasks);
    v("seed", s.seed);
    v("tokenizer", s.tokenizer);
  }
};

// InvalidArgument naming the field under `where` ("evals.multiple_choice",
// or a sweep spec's "evaluation.multiple_choice"): no tasks, a task without
// a file, a name that is not letters, digits, '_', '-' and '.' or names two
// tasks, a negative num_fewshot or limit, num_fewshot > 0 without a
// fewshot_file. (The files are read where the task runs.)
absl::Status ValidateMultipleChoice(const MultipleChoiceSpec& spec,
                                    const std::string& where);

// RULER's synthetic tasks (eval/ruler/ruler.h): greedy decoding of each
// sample, RULER's string-match metrics. Task names as RULER's; empty: every
// task whose files are given and whose length fits.
struct RulerSpec {
  std::vector<std::string> tasks;
  std::vector<int64_t> lengths;  // tokens, generated ones included; empty:
                                 // seq_len
  int64_t samples = 20;          // per task and length
  uint64_t seed = 0;
  int64_t tokens_to_generate = 0;         // 0: each task's (RULER's)
  std::string essay_file;                 // the essay haystack (any long text)
  std::string squad_file, hotpotqa_file;  // qa_1, qa_2
  std::string tokenizer;                  // as evals.niah.tokenizer

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("tasks", s.tasks);
    v("lengths", s.lengths);
    v("samples", s.samples);
    v("seed", s.seed);
    v("tokens_to_generate", s.tokens_to_generate);
    v("essay_file", s.essay_file);
    v("squad_file", s.squad_file);
    v("hotpotqa_file", s.hotpotqa_file);
    v("tokenizer", s.tokenizer);
  }
};

inline constexpr int64_t kDefaultValLossTokens = int64_t{1} << 16;
inline constexpr int64_t kDefaultLongPplDocuments = 64;

// The evaluations of a task ("evals"), each present or absent.
struct EvalKinds {
  std::optional<ValLossSpec> val_loss;
  std::optional<LongPplSpec> longppl;
  std::optional<NiahSpec> niah;
  std::optional<ReceptiveFieldSpec> receptive_field;
  std::optional<GradientProfileSpec> gradient_profile;
  std::optional<ProbingSpec> probing;
  std::optional<RetrievalHeadsSpec> retrieval_heads;
  std::optional<MultipleChoiceSpec> multiple_choice;
  std::optional<RulerSpec> ruler;

  // "val_loss", "longppl", "niah", "receptive_field", "gradient_profile",
  // "probing", "retrieval_heads", "multiple_choice", "ruler": the
  // evaluations present, in run order.
  std::vector<std::string> Names() const;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("val_loss", s.val_loss);
    v("longppl", s.longppl);
    v("niah", s.niah);
    v("receptive_field", s.receptive_field);
    v("gradient_profile", s.gradient_profile);
    v("probing", s.probing);
    v("retrieval_heads", s.retrieval_heads);
    v("multiple_choice", s.multiple_choice);
    v("ruler", s.ruler);
  }
};

// Every evaluation kind's name, in run order.
const std::vector<std::string>& AllEvalNames();

struct EvalTask {
  std::string kind = "eval";
  std::string task_id, run_id;
  int64_t step = -1;  // -1: the checkpoint's step
  std::string checkpoint;
  TrainTask run;  // seq_len and data of the run ("config")
  EvalKinds evals;
  std::string cache_dir;  // "": no key-token cache
  int64_t threads = 0;    // 0: all cores
  bool allow_extrapolation = false;

  template <class V, class S>
  static void Fields(V& v, S& s) {
    v("kind", s.kind);
    v("task_id", s.task_id);
    v("run_id", s.run_id);
    v("step", s.step);
    v("checkpoint", s.checkpoint);
    v.Required("config", s.run, "the run's config: its seq_len and data");
    v.Required("evals", s.evals,
               "one or more of val_loss, longppl, niah, receptive_field, "
               "gradient_profile, probing, retrieval_heads, "
               "multiple_choice, ruler");
    v("cache_dir", s.cache_dir);
    v("threads", s.threads);
    v("allow_extrapolation", s.allow_extrapolation);
  }
};

// Reads the fields of a task without validating their values. For those
// that fill a task in steps (the coordinator from its draft, the worker).
absl::StatusOr<EvalTask> ReadEvalTask(const nlohmann::json& json);
// Reads and validates a task. InvalidArgument names the field.
absl::StatusOr<EvalTask> EvalTaskFromJson(absl::string_view json);
// Reads `path`; NotFound / InvalidArgument name the file.
absl::StatusOr<EvalTask> LoadEvalTask(const std::string& path);
// The task file's JSON (reads back through EvalTaskFromJson to the same
// task; "config" is written as the hlab-train task).
std::string EvalTaskToJson(const EvalTask& task);

// InvalidArgument naming the field: an unknown kind, no checkpoint or no
// evaluation, a negative count, an unknown NIAH kind or haystack, a depth
// outside [0, 1], a LongPPL reference without a file, a receptive-field
// limit that is odd or not below seq_len or without val_loss, probing
// classes outside [2, 10], fewer than 2 probing samples per class, a test
// fraction outside (0, 1), a negative l2, fewer than one retrieval-heads
// sample or top head, a multiple-choice spec without tasks, a task without
// a file, a bad or repeated task name, num_fewshot > 0 without a
// fewshot_file, a negative num_fewshot or limit. (Context lengths above the
// model's are checked against its checkpoint, by hlab-eval.)
absl::Status ValidateEvalTask(const EvalTask& task);

// Resolved LongPPL parameters (defaults from the run's seq_len).
struct LongPplPlan {
  int64_t trunc_len = 0, sliding_window = 0, context_len = 0;
};
LongPplPlan PlanLongPpl(const LongPplSpec& spec, int64_t seq_len);

// H of a receptive-field spec (the default from seq_len: seq_len / 8,
// rounded down to even, at least 2).
int64_t ReceptiveFieldLimit(const ReceptiveFieldSpec& spec, int64_t seq_len);

// A template task: the fields with their defaults and placeholder paths.
std::string ExampleEvalTaskJson();

// Every field, its default and meaning (for --help).
extern const char kEvalTaskFieldsHelp[];

}  // namespace hlab::task

#endif  // HLAB_TASK_EVAL_TASK_H_
