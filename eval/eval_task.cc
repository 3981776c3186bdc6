// Running EVAL tasks (eval/eval_task.h): EvalRun's core (the model, the
// records, the data) and val_loss; the other kinds are in
// eval/internal/eval_run_*.cc (eval/internal/eval_run.h). The file format
// is task/eval_task.h's, `--check` is eval_task_check.cc, and the checks
// both share are eval/internal/task_checks.h.
#include "eval/eval_task.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/shard_format.h"
#include "data/tokenizer.h"
#include "eval/checkpoint_model.h"
#include "eval/eval_data.h"
#include "eval/eval_task.h"
#include "eval/internal/eval_run.h"
#include "eval/internal/task_checks.h"
#include "eval/token_scorer.h"
#include "eval/validation_loss.h"
#include "train/libtorch_status.h"
#include "train/training_data.h"

namespace hlab::eval::internal {

using task::EvalDataSpec;
using task::EvalTask;
using task::ValLossSpec;

absl::Status EvalRun::Run() {
  const auto start = Clock::now();
  at::set_num_threads(static_cast<int>(
      task_.threads > 0 ? task_.threads
                        : std::max(1u, std::thread::hardware_concurrency())));
  HLAB_ASSIGN_OR_RETURN(model_,
                        LoadCheckpointModel(task_.checkpoint, "checkpoint"));
  step_ = task_.step >= 0 ? task_.step : model_.meta.step;
  emit_({{"type", "start"},
         {"task_id", task_.task_id},
         {"run_id", task_.run_id},
         {"step", step_},
         {"checkpoint_step", model_.meta.step},
         {"arch", model_.config.arch},
         {"threads", at::get_num_threads()},
         {"evals", task_.evals.Names()}});
  if (task_.step >= 0 && task_.step != model_.meta.step) {
    Warn(absl::StrCat("step: the task says ", task_.step,
                      " but the checkpoint is at step ", model_.meta.step,
                      "; results are recorded at ", task_.step));
  }
  tokenizer_ = model_.meta.tokenizer;
  if (tokenizer_.empty()) {
    HLAB_RETURN_IF_ERROR(OpenRunData());
    tokenizer_ = run_data_->vocabulary().tokenizer;
  }
  if (task_.evals.probing) {
    HLAB_RETURN_IF_ERROR(CheckProbing(task_, model_.config));
  }
  if (task_.evals.retrieval_heads) {
    HLAB_RETURN_IF_ERROR(CheckRetrievalHeads(task_, model_.config));
  }
  if (task_.evals.multiple_choice) {
    HLAB_RETURN_IF_ERROR(PrepareMultipleChoice(*task_.evals.multiple_choice));
  }
  if (task_.evals.ruler) {  // before anything runs
    const std::vector<int64_t>& lengths = task_.evals.ruler->lengths;
    for (size_t i = 0; i < lengths.size(); ++i) {
      HLAB_RETURN_IF_ERROR(
          CheckContext(absl::StrCat("evals.ruler.lengths[", i, "]"), lengths[i],
                       task_, model_.config));
    }
  }
  scorer_ = std::make_unique<ModelScorer>(model_.model);
  if (task_.evals.val_loss)
    HLAB_RETURN_IF_ERROR(RunValLoss(*task_.evals.val_loss));
  if (task_.evals.longppl)
    HLAB_RETURN_IF_ERROR(RunLongPpl(*task_.evals.longppl));
  if (task_.evals.niah) {
    for (size_t i = 0; i < task_.evals.niah->context_lengths.size(); ++i) {
      HLAB_RETURN_IF_ERROR(CheckContext(
          absl::StrCat("evals.niah.context_lengths[", i, "]"),
          task_.evals.niah->context_lengths[i], task_, model_.config));
    }
    HLAB_RETURN_IF_ERROR(RunNiah(*task_.evals.niah));
  }
  if (task_.evals.receptive_field) {
    HLAB_RETURN_IF_ERROR(RunReceptiveField(*task_.evals.receptive_field));
  }
  if (task_.evals.gradient_profile) {
    HLAB_RETURN_IF_ERROR(RunGradientProfile(*task_.evals.gradient_profile));
  }
  if (task_.evals.probing)
    HLAB_RETURN_IF_ERROR(RunProbing(*task_.evals.probing));
  if (task_.evals.retrieval_heads) {
    HLAB_RETURN_IF_ERROR(RunRetrievalHeads(*task_.evals.retrieval_heads));
  }
  if (task_.evals.multiple_choice) HLAB_RETURN_IF_ERROR(RunMultipleChoice());
  if (task_.evals.ruler) HLAB_RETURN_IF_ERROR(RunRuler(*task_.evals.ruler));
  emit_({{"type", "done"}, {"seconds", SecondsSince(start)}});
  return absl::OkStatus();
}

void EvalRun::Warn(const std::string& message) {
  emit_({{"type", "warning"}, {"message", message}});
}

void EvalRun::Result(const std::string& metric, const Json& value,
                     const Json& details) {
  emit_({{"type", "result"},
         {"run_id", task_.run_id},
         {"step", step_},
         {"metric", metric},
         {"value", value},
         {"details", details}});
}

void EvalRun::Progress(const std::string& eval, int64_t done, int64_t total,
                       const std::string& phase) {
  emit_({{"type", "progress"},
         {"eval", eval},
         {"done", done},
         {"total", total},
         {"phase", phase}});
}

absl::Status EvalRun::OpenRunData() {
  if (run_data_) return absl::OkStatus();
  task::TrainTask run = task_.run;
  run.model = model_.config;
  auto data = train::TrainingData::Create(run);
  if (!data.ok()) return Prefixed("config.data", data.status());
  run_data_ = *std::move(data);
  return absl::OkStatus();
}

// The tokenizer NIAH samples are written in: `spec` (the field
// <field>.tokenizer), or the model's.
absl::StatusOr<std::unique_ptr<data::Tokenizer>> EvalRun::SampleTokenizer(
    const std::string& spec, const std::string& field) {
  EvalDataSpec tokenizer_only;
  tokenizer_only.tokenizer = spec;
  std::string tokenizer_spec, tokenizer_dir;
  HLAB_RETURN_IF_ERROR(
      TokenizerSpec(tokenizer_only, field, &tokenizer_spec, &tokenizer_dir));
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer =
      data::MakeTokenizer(tokenizer_spec, tokenizer_dir);
  if (!tokenizer.ok()) {
    return Prefixed(field + ".tokenizer", tokenizer.status());
  }
  return tokenizer;
}

// The tokenizer spec (and its base directory) for importing JSONL.
absl::Status EvalRun::TokenizerSpec(const EvalDataSpec& d,
                                    const std::string& field, std::string* spec,
                                    std::string* dir) {
  if (!d.tokenizer.empty()) {
    *spec = d.tokenizer;
    return absl::OkStatus();
  }
  if (tokenizer_ == "byte") {
    *spec = "byte";
    return absl::OkStatus();
  }
  if (task_.run.data.source == "prepared") {
    const std::string run_dir = task_.run.data.long_fraction > 0
                                    ? task_.run.data.long_dir
                                    : task_.run.data.short_dir;
    auto manifest = data::ReadManifest(run_dir);
    if (manifest.ok()) {
      *spec = manifest->tokenizer_spec;
      *dir = run_dir;
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      field, ".tokenizer: give the spec of the model's tokenizer ('",
      tokenizer_, "'), e.g. \"gpt2:DIR\" (data/tokenizer.h)"));
}

// The documents of `d` (the run's long held-out documents when empty).
absl::StatusOr<std::unique_ptr<EvalData>> EvalRun::OpenData(
    const EvalDataSpec& d, const std::string& field) {
  std::unique_ptr<EvalData> docs;
  if (!d.jsonl.empty()) {
    std::string spec, dir;
    HLAB_RETURN_IF_ERROR(TokenizerSpec(d, field, &spec, &dir));
    HLAB_ASSIGN_OR_RETURN(
        docs, EvalData::OpenJsonl(d.jsonl, d.text_field, spec, dir,
                                  task_.cache_dir, field + ".jsonl"));
  } else if (!d.prepared.empty()) {
    HLAB_ASSIGN_OR_RETURN(
        docs, EvalData::OpenPrepared(d.prepared, d.split, field + ".prepared"));
  } else {
    HLAB_RETURN_IF_ERROR(OpenRunData());
    if (run_data_->long_held_out() == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(field,
                       ": the run's data has no long documents "
                       "(long_fraction 0): give long documents in ",
                       field));
    }
    docs = EvalData::Borrow(run_data_->long_held_out(),
                            DataDescription(d, task_, true));
  }
  const std::string& theirs = docs->corpus().vocabulary().tokenizer;
  if (theirs != tokenizer_) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": the data is tokenized with '", theirs,
                     "' but the model was trained with '", tokenizer_,
                     "': prepare it with the model's tokenizer"));
  }
  return docs;
}

// The validation loss of the model as it stands (hooks included).
absl::StatusOr<ValidationLossResult> EvalRun::ComputeValLoss(
    const ValLossSpec& spec, std::string* source) {
  const ValidationLossOptions options = {
      .tokens = spec.tokens > 0 ? spec.tokens : task::kDefaultValLossTokens,
      .batch_sequences = spec.batch_sequences};
  if (spec.data.empty()) {
    HLAB_RETURN_IF_ERROR(OpenRunData());
    *source = DataDescription(spec.data, task_, false);
    if (spec.documents != task::kValLossMixture) {
      absl::StatusOr<data::SequenceMixture> one_kind =
          run_data_->ValidationWith(spec.documents == task::kValLossLong ? 1.0
                                                                         : 0.0);
      if (!one_kind.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "evals.val_loss.documents: '", spec.documents,
            "' needs the run's held-out ", spec.documents,
            " documents, but it has none (", one_kind.status().message(),
            "): use documents: mixture"));
      }
      absl::StrAppend(source, ", ", spec.documents, " documents only");
      auto result = MixtureValidationLoss(*scorer_, *one_kind, options);
      if (!result.ok()) return Prefixed("evals.val_loss", result.status());
      return *result;
    }
    auto result =
        MixtureValidationLoss(*scorer_, run_data_->validation(), options);
    if (!result.ok()) return Prefixed("evals.val_loss", result.status());
    return *result;
  }
  HLAB_ASSIGN_OR_RETURN(auto docs, OpenData(spec.data, "evals.val_loss.data"));
  *source = docs->source();
  auto result = CorpusValidationLoss(*scorer_, docs->corpus(),
                                     task_.run.seq_len, options);
  if (!result.ok()) return Prefixed("evals.val_loss", result.status());
  return *result;
}

absl::Status EvalRun::RunValLoss(const ValLossSpec& spec) {
  const auto start = Clock::now();
  std::string source;
  HLAB_ASSIGN_OR_RETURN(const ValidationLossResult r,
                        ComputeValLoss(spec, &source));
  val_loss_ = r.loss;
  Result("val_loss", r.loss,
         {{"tokens", r.tokens},
          {"documents", r.documents},
          {"sequences", r.sequences},
          {"seq_len", task_.run.seq_len},
          {"source", source},
          {"seconds", SecondsSince(start)}});
  return absl::OkStatus();
}

}  // namespace hlab::eval::internal

namespace hlab::eval {

using task::EvalTask;

absl::Status RunEvalTask(const EvalTask& task, const RecordSink& emit) {
  try {
    return internal::EvalRun(task, emit).Run();
  } catch (const c10::Error& e) {
    return train::LibTorchStatus(e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory: lower evals.val_loss.batch_sequences or context_len, "
        "or retry on a machine with more memory");
  }
}

}  // namespace hlab::eval
