#include "eval/internal/task_checks.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "eval/checkpoint_model.h"
#include "eval/token_scorer.h"

namespace hlab::eval::internal {

using task::EvalDataSpec;
using task::EvalTask;
using task::LongPplPlan;
using task::LongPplSpec;
using task::ProbingSpec;

absl::Status Prefixed(const std::string& prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

// A checkpoint's header, with errors that name `field` and say what to do.
absl::StatusOr<train::CheckpointMeta> ReadHeader(const std::string& path,
                                                 const std::string& field) {
  auto meta = train::ReadCheckpointMeta(path);
  if (meta.ok()) return meta;
  const bool missing = meta.status().code() == absl::StatusCode::kNotFound;
  return absl::Status(
      meta.status().code(),
      absl::StrCat(field, ": ", meta.status().message(),
                   missing ? ": check the path, or re-run the training task "
                             "that writes it"
                           : ": the file is corrupt; re-run the training task "
                             "or choose another checkpoint"));
}

// FailedPrecondition when `length` tokens exceed the run's trained seq_len
// and the model cannot extrapolate (full attention with RoPE).
absl::Status CheckContext(const std::string& field, int64_t length,
                          const EvalTask& task,
                          const model::ModelConfig& config) {
  if (length <= task.run.seq_len || task.allow_extrapolation ||
      CanExtrapolate(config)) {
    return absl::OkStatus();
  }
  size_t layer = 0;
  while (layer < config.layers.size() &&
         !(model::IsFullAttention(config.layers[layer].kind) &&
           !config.layers[layer].nope)) {
    ++layer;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      field, ": ", length, " tokens exceed the model's trained seq_len (",
      task.run.seq_len, ") and layer ", layer,
      " has full attention with RoPE, which does not extrapolate beyond its "
      "trained length: use at most ",
      task.run.seq_len,
      ", or set allow_extrapolation: true to measure it anyway"));
}

// The reference must tokenize like the evaluated model: key tokens are
// positions in one tokenization.
absl::Status CheckReference(const model::ModelConfig& model,
                            const std::string& model_tokenizer,
                            const model::ModelConfig& reference,
                            const std::string& reference_tokenizer,
                            std::vector<std::string>* warnings) {
  const std::string field = "evals.longppl.reference.checkpoint";
  if (reference.vocab_size != model.vocab_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": vocab/tokenizer differ: the reference has a vocabulary of ",
        reference.vocab_size, " tokens, the evaluated model ", model.vocab_size,
        ": key tokens are positions in one tokenization; use a reference "
        "trained with the evaluated model's tokenizer"));
  }
  if (!model_tokenizer.empty() && !reference_tokenizer.empty() &&
      model_tokenizer != reference_tokenizer) {
    return absl::FailedPreconditionError(absl::StrCat(
        field,
        ": vocab/tokenizer differ: the reference was trained with "
        "tokenizer '",
        reference_tokenizer, "', the evaluated model with '", model_tokenizer,
        "': use a reference trained with the evaluated model's tokenizer"));
  }
  if (reference_tokenizer.empty()) {
    warnings->push_back(
        absl::StrCat(field,
                     ": the reference checkpoint records no tokenizer (written "
                     "before checkpoints did); only the vocabulary sizes were "
                     "compared"));
  }
  return absl::OkStatus();
}

// Probing's sample length: the spec's, or seq_len.
int64_t ProbingContext(const ProbingSpec& spec, int64_t seq_len) {
  return spec.context_length > 0 ? spec.context_length : seq_len;
}

namespace {

// FailedPrecondition naming `field` for a model without a full-attention
// layer: the mechanism analyses trace what full attention carries.
absl::Status RequireFullAttention(const std::string& field,
                                  const std::string& analysis,
                                  const model::ModelConfig& config) {
  const bool has_full = std::any_of(
      config.layers.begin(), config.layers.end(),
      [](const model::MixerSpec& l) { return model::IsFullAttention(l.kind); });
  if (has_full) return absl::OkStatus();
  std::vector<std::string> mixers;
  for (const model::MixerSpec& l : config.layers) {
    mixers.emplace_back(model::MixerKindName(l.kind));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      field, ": the model has no full-attention layer (",
      config.arch.empty() ? "" : absl::StrCat("arch '", config.arch, "', "),
      "layers ", absl::StrJoin(mixers, ", "), "); ", analysis,
      ": run it on a hybrid or full-attention run"));
}

}  // namespace

// Layer-wise probing is an analysis of what full attention carries: refused
// for a model without a full-attention layer. Its samples must fit.
absl::Status CheckProbing(const EvalTask& task,
                          const model::ModelConfig& config) {
  HLAB_RETURN_IF_ERROR(RequireFullAttention(
      "evals.probing",
      "layer-wise probing traces how the full-attention layers of a hybrid "
      "carry retrieval (appendix D.2)",
      config));
  return CheckContext("evals.probing.context_length",
                      ProbingContext(*task.evals.probing, task.run.seq_len),
                      task, config);
}

int64_t RetrievalContext(const task::RetrievalHeadsSpec& spec,
                         int64_t seq_len) {
  return spec.context_length > 0 ? spec.context_length : seq_len;
}

absl::Status CheckRetrievalHeads(const EvalTask& task,
                                 const model::ModelConfig& config) {
  HLAB_RETURN_IF_ERROR(RequireFullAttention(
      "evals.retrieval_heads",
      "retrieval-head tracing scores the full-attention heads (appendix "
      "D.4)",
      config));
  return CheckContext(
      "evals.retrieval_heads.context_length",
      RetrievalContext(*task.evals.retrieval_heads, task.run.seq_len), task,
      config);
}

std::string DataDescription(const EvalDataSpec& d, const EvalTask& task,
                            bool long_docs) {
  if (!d.jsonl.empty()) return absl::StrCat("jsonl:", d.jsonl);
  if (!d.prepared.empty()) {
    return absl::StrCat("prepared:", d.prepared, " (", d.split, ")");
  }
  const std::string what =
      long_docs ? "long held-out documents" : "held-out sequences";
  if (task.run.data.source == "synthetic") {
    return absl::StrCat("synthetic ", what, " (data seed ", task.run.data.seed,
                        ")");
  }
  return absl::StrCat(
      "prepared ", what, " of ",
      long_docs ? task.run.data.long_dir
                : task.run.data.long_dir + " / " + task.run.data.short_dir);
}

// ValidateKeyTokenConfig naming the task's fields.
absl::Status ValidateLongPplConfig(const KeyTokenConfig& config) {
  const absl::Status valid = ValidateKeyTokenConfig(config);
  if (valid.ok()) return valid;
  std::string message(valid.message());
  for (const auto& [ours, theirs] :
       {std::pair<const char*, const char*>{"short_context", "trunc_len"},
        {"window", "sliding_window"},
        {"max_tokens", "context_len"}}) {
    if (absl::StartsWith(message, ours)) {
      message = absl::StrCat(theirs, message.substr(std::strlen(ours)));
      break;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("evals.longppl.", message));
}

KeyTokenConfig KeyConfig(const LongPplSpec& spec, const LongPplPlan& plan) {
  return {.short_context = plan.trunc_len,
          .window = plan.sliding_window,
          .alpha = spec.alpha,
          .beta = spec.beta,
          .max_tokens = plan.context_len,
          .min_key_tokens = spec.min_key_tokens};
}

McTaskConfig MultipleChoiceConfig(const task::MultipleChoiceSpec& spec,
                                  size_t i) {
  const task::MultipleChoiceTaskSpec& t = spec.tasks.at(i);
  McTaskConfig c;
  c.name = task::MultipleChoiceTaskName(t);
  c.file = t.file;
  c.fewshot_file = t.fewshot_file;
  c.num_fewshot = t.num_fewshot;
  c.seed = spec.seed;
  c.target_delimiter = t.target_delimiter;
  c.fewshot_delimiter = t.fewshot_delimiter;
  c.limit = t.limit;
  return c;
}

int64_t MultipleChoiceMaxTokens(const EvalTask& task) {
  return task.allow_extrapolation ? 0 : task.run.seq_len;
}

}  // namespace hlab::eval::internal
