// EvalRun: one EVAL task's run (eval/eval_task.h's RunEvalTask): the
// checkpoint's model and scorer, the records it emits, and one method per
// evaluation kind. The kinds' methods live in files by theme:
//   eval/eval_task.cc                      Run, data, val_loss
//   eval/internal/eval_run_longppl.cc      longppl, receptive_field
//   eval/internal/eval_run_mechanisms.cc   niah, gradient_profile, probing,
//                                          retrieval_heads
//   eval/internal/eval_run_multiple_choice.cc   multiple_choice
//   eval/internal/eval_run_ruler.cc        ruler
// A new kind adds a Run<Kind> method here and its file, and one line in
// Run().
//
// Thread-safety: one thread runs an EvalRun (and LibTorch's intra-op pool).
#ifndef HLAB_EVAL_INTERNAL_EVAL_RUN_H_
#define HLAB_EVAL_INTERNAL_EVAL_RUN_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/corpus.h"
#include "data/tokenizer.h"
#include "eval/checkpoint_model.h"
#include "eval/eval_data.h"
#include "eval/eval_task.h"
#include "eval/longppl.h"
#include "eval/multiple_choice.h"
#include "eval/token_scorer.h"
#include "eval/validation_loss.h"
#include "task/eval_task.h"
#include "train/training_data.h"

namespace hlab::eval::internal {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class EvalRun {
 public:
  EvalRun(const task::EvalTask& task, const RecordSink& emit)
      : task_(task), emit_(emit) {}

  absl::Status Run();

 private:
  void Warn(const std::string& message);
  void Result(const std::string& metric, const Json& value,
              const Json& details);
  void Progress(const std::string& eval, int64_t done, int64_t total,
                const std::string& phase);
  absl::Status OpenRunData();
  // The tokenizer NIAH samples are written in: `spec` (the field
  // <field>.tokenizer), or the model's.
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> SampleTokenizer(
      const std::string& spec, const std::string& field);
  // The tokenizer spec (and its base directory) for importing JSONL.
  absl::Status TokenizerSpec(const task::EvalDataSpec& d,
                             const std::string& field, std::string* spec,
                             std::string* dir);
  // The documents of `d` (the run's long held-out documents when empty).
  absl::StatusOr<std::unique_ptr<EvalData>> OpenData(
      const task::EvalDataSpec& d, const std::string& field);
  // The validation loss of the model as it stands (hooks included).
  absl::StatusOr<ValidationLossResult> ComputeValLoss(
      const task::ValLossSpec& spec, std::string* source);
  absl::Status RunValLoss(const task::ValLossSpec& spec);

  // eval/internal/eval_run_longppl.cc
  absl::Status RunLongPpl(const task::LongPplSpec& spec);
  // log(LongPPL) on key tokens chosen elsewhere (evals.longppl.key_tokens):
  // the file's texts, encoded with the model's tokenizer and cut to
  // context_len tokens; a token is key when its byte span lies inside a key
  // range (data/key_spans.h). Token 0, with no prediction, is never scored.
  absl::Status RunLongPplOnKeySpans(const task::LongPplSpec& spec);
  // Scores the evaluated model on `keys` and records log_longppl, pooled or
  // per document as spec.aggregation says, both in the details.
  absl::Status ScoreAndRecordLongPpl(const task::LongPplSpec& spec,
                                     KeyTokens keys,
                                     std::unique_ptr<EvalData> docs,
                                     int64_t too_short, Json details,
                                     Clock::time_point start);
  // "rf_<full|efficient>_delta_val_loss" and, with LongPPL measured,
  // "rf_<...>_delta_log_longppl": restricted minus unrestricted. A
  // restriction the model has no layers for is recorded as null, with why.
  absl::Status RunReceptiveField(const task::ReceptiveFieldSpec& spec);

  // eval/internal/eval_run_mechanisms.cc
  // Needle in a haystack (eval/niah.h): "niah_acc" over all cells (details:
  // the per kind/length/depth table) and "niah_acc/<kind>" per kind.
  absl::Status RunNiah(const task::NiahSpec& spec);
  // Appendix D.3 (eval/gradient_profile.h): "grad_reach", with G(d) binned.
  absl::Status RunGradientProfile(const task::GradientProfileSpec& spec);
  // Appendix D.2 (eval/probing.h): "probe_acc/l<k>" per layer (0: the
  // embeddings) and "probe_acc", the peak layer's, with every layer in its
  // details.
  absl::Status RunProbing(const task::ProbingSpec& spec);
  // Appendix D.4 (eval/retrieval_heads.h): "retrieval_score" and
  // "retrieval_mass", the top head's, with every head in the details.
  absl::Status RunRetrievalHeads(const task::RetrievalHeadsSpec& spec);

  // eval/internal/eval_run_multiple_choice.cc
  // Loads, checks and encodes every task of evals.multiple_choice before
  // any evaluation runs (a bad file, a bad line or a question longer than
  // seq_len ends the task with nothing measured): errors name the task
  // ("evals.multiple_choice.tasks[i]") and the file and line.
  absl::Status PrepareMultipleChoice(const task::MultipleChoiceSpec& spec);
  // "mc_acc/<name>" and "mc_acc_norm/<name>" per task, the details of
  // eval/multiple_choice.h's McResultToJson.
  absl::Status RunMultipleChoice();

  // eval/internal/eval_run_ruler.cc
  absl::Status RunRuler(const task::RulerSpec& spec);

  const task::EvalTask& task_;
  const RecordSink& emit_;
  CheckpointModel model_;
  int64_t step_ = 0;
  std::string tokenizer_;
  std::unique_ptr<train::TrainingData> run_data_;
  std::unique_ptr<ModelScorer> scorer_;
  // Unrestricted results, and LongPPL's documents and key tokens, for the
  // receptive-field constraint.
  std::optional<double> val_loss_, log_longppl_;
  std::unique_ptr<EvalData> longppl_docs_;
  std::optional<KeyTokens> longppl_keys_;
  // The documents of evals.longppl.key_tokens, encoded (longppl_docs_
  // borrows them).
  std::unique_ptr<data::Corpus> key_span_corpus_;
  // evals.multiple_choice's tasks, prepared by PrepareMultipleChoice.
  std::vector<McPreparedTask> multiple_choice_;
};

}  // namespace hlab::eval::internal

#endif  // HLAB_EVAL_INTERNAL_EVAL_RUN_H_
