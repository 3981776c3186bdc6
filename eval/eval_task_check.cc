// CheckEvalTask (eval_task.h): `hlab-eval --check`, the task against its
// checkpoints' headers, without running a model.
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/key_spans.h"
#include "data/tokenizer.h"
#include "eval/eval_task.h"
#include "eval/internal/task_checks.h"
#include "eval/longppl_reference.h"
#include "eval/multiple_choice.h"
#include "model/config/param_count.h"

namespace hlab::eval {

using internal::CheckContext;
using internal::CheckProbing;
using internal::CheckReference;
using internal::CheckRetrievalHeads;
using internal::DataDescription;
using internal::KeyConfig;
using internal::MultipleChoiceConfig;
using internal::MultipleChoiceMaxTokens;
using internal::Prefixed;
using internal::ProbingContext;
using internal::ReadHeader;
using internal::RetrievalContext;
using internal::ValidateLongPplConfig;
using task::EvalTask;
using task::LongPplPlan;
using task::LongPplSpec;
using task::ProbingSpec;
using Json = nlohmann::json;

namespace {

// evals.multiple_choice: every task's files read and, when the tokenizer
// can be made here (the spec's, or the model's "byte"), every question
// encoded and checked against seq_len as a run checks it; otherwise the
// lengths are checked when the task runs.
absl::StatusOr<Json> CheckMultipleChoice(const EvalTask& task,
                                         const std::string& model_tokenizer) {
  const task::MultipleChoiceSpec& m = *task.evals.multiple_choice;
  const std::string spec =
      m.tokenizer.empty() && model_tokenizer == "byte" ? "byte" : m.tokenizer;
  std::unique_ptr<data::Tokenizer> tokenizer;
  if (!spec.empty()) {
    auto made = data::MakeTokenizer(spec);
    if (!made.ok()) {
      return Prefixed("evals.multiple_choice.tokenizer", made.status());
    }
    tokenizer = *std::move(made);
  }
  Json tasks = Json::array();
  for (size_t i = 0; i < m.tasks.size(); ++i) {
    const McTaskConfig config = MultipleChoiceConfig(m, i);
    const std::string at = absl::StrCat("evals.multiple_choice.tasks[", i, "]");
    Json entry = {{"name", config.name},
                  {"file", config.file},
                  {"num_fewshot", config.num_fewshot}};
    if (tokenizer != nullptr) {
      auto prepared =
          PrepareMcTask(config, *tokenizer, MultipleChoiceMaxTokens(task));
      if (!prepared.ok()) return Prefixed(at, prepared.status());
      entry["questions"] = prepared->requests.size();
      entry["longest_tokens"] = prepared->longest_tokens;
    } else {
      for (const std::string& file : {config.file, config.fewshot_file}) {
        if (file.empty()) continue;
        auto docs = ReadMcDocuments(file);
        if (!docs.ok()) return Prefixed(at, docs.status());
        if (file == config.file) entry["questions"] = docs->size();
      }
      entry["longest_tokens"] =
          "checked when run (give evals.multiple_choice.tokenizer to check "
          "it here)";
    }
    tasks.push_back(std::move(entry));
  }
  return Json{{"tasks", tasks},
              {"seed", m.seed},
              {"max_tokens", MultipleChoiceMaxTokens(task)}};
}

}  // namespace

absl::StatusOr<std::string> CheckEvalTask(const EvalTask& task) {
  auto meta = ReadHeader(task.checkpoint, "checkpoint");
  if (!meta.ok()) return meta.status();
  auto config = model::ModelConfigFromJson(meta->model_config);
  if (!config.ok()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint: '", task.checkpoint,
        "' holds an invalid model config: ", config.status().message()));
  }
  const auto count = model::CountParameters(*config);
  Json plan = {{"run_id", task.run_id},
               {"step", task.step >= 0 ? task.step : meta->step},
               {"checkpoint", task.checkpoint},
               {"checkpoint_step", meta->step},
               {"arch", config->arch},
               {"non_embedding_params", count.non_embedding},
               {"seq_len", task.run.seq_len},
               {"tokenizer", meta->tokenizer},
               {"cache_dir", task.cache_dir},
               {"threads", task.threads},
               {"evals", Json::object()}};
  if (task.evals.val_loss) {
    plan["evals"]["val_loss"] = {
        {"tokens", task.evals.val_loss->tokens > 0
                       ? task.evals.val_loss->tokens
                       : task::kDefaultValLossTokens},
        {"batch_sequences", task.evals.val_loss->batch_sequences},
        {"source", DataDescription(task.evals.val_loss->data, task, false)},
        {"documents", task.evals.val_loss->documents}};
  }
  if (task.evals.longppl && !task.evals.longppl->key_tokens.empty()) {
    // Key tokens chosen elsewhere: the files are read and checked.
    const LongPplSpec& l = *task.evals.longppl;
    const LongPplPlan p = PlanLongPpl(l, task.run.seq_len);
    HLAB_RETURN_IF_ERROR(CheckContext("evals.longppl.context_len",
                                      p.context_len, task, *config));
    const task::LongPplKeyTokensSpec& k = l.key_tokens;
    absl::StatusOr<std::vector<data::KeySpanDocument>> docs =
        k.file.empty() ? data::ReadLongPplSlices(k.slices, k.texts)
                       : data::ReadKeySpansJsonl(k.file);
    if (!docs.ok()) return Prefixed("evals.longppl.key_tokens", docs.status());
    plan["evals"]["longppl"] = {
        {"context_len", p.context_len},
        {"key_tokens", k.file.empty() ? k.slices : k.file},
        {"documents", docs->size()},
        {"aggregation", l.aggregation},
        {"min_key_tokens", l.min_key_tokens}};
  } else if (task.evals.longppl) {
    const LongPplSpec& l = *task.evals.longppl;
    const LongPplPlan p = PlanLongPpl(l, task.run.seq_len);
    HLAB_RETURN_IF_ERROR(ValidateLongPplConfig(KeyConfig(l, p)));
    HLAB_RETURN_IF_ERROR(CheckContext("evals.longppl.context_len",
                                      p.context_len, task, *config));
    std::vector<std::string> warnings;
    Json reference;
    if (!l.reference.hf_dir.empty()) {
      HLAB_ASSIGN_OR_RETURN(
          reference, CheckLlamaReference(l.reference, *config, meta->tokenizer,
                                         &warnings));
    } else {
      auto ref =
          ReadHeader(l.reference.File(), "evals.longppl.reference.checkpoint");
      if (!ref.ok()) return ref.status();
      auto ref_config = model::ModelConfigFromJson(ref->model_config);
      if (!ref_config.ok()) {
        return absl::DataLossError(absl::StrCat(
            "evals.longppl.reference.checkpoint: '", l.reference.File(),
            "' holds an invalid model config: ",
            ref_config.status().message()));
      }
      reference = {{"checkpoint", l.reference.File()}, {"step", ref->step}};
      if (l.reference.tokenizer.empty()) {
        HLAB_RETURN_IF_ERROR(CheckReference(
            *config, meta->tokenizer, *ref_config, ref->tokenizer, &warnings));
      } else {
        // Another tokenizer: it must be the reference's own.
        const std::string field = "evals.longppl.reference.tokenizer";
        auto tokenizer = data::MakeTokenizer(l.reference.tokenizer);
        if (!tokenizer.ok()) return Prefixed(field, tokenizer.status());
        const std::string& identity = (*tokenizer)->vocabulary().tokenizer;
        if (!ref->tokenizer.empty() && identity != ref->tokenizer) {
          return absl::FailedPreconditionError(absl::StrCat(
              field, ": '", l.reference.tokenizer, "' is tokenizer ", identity,
              ", but the reference was trained with ", ref->tokenizer,
              ": name the reference's own tokenizer"));
        }
        reference["tokenizer"] = identity;
      }
    }
    plan["evals"]["longppl"] = {
        {"trunc_len", p.trunc_len},
        {"sliding_window", p.sliding_window},
        {"context_len", p.context_len},
        {"documents",
         l.documents > 0 ? l.documents : task::kDefaultLongPplDocuments},
        {"reference", reference},
        {"source", DataDescription(l.data, task, true)},
        {"warnings", warnings}};
  }
  if (task.evals.niah) {
    for (size_t i = 0; i < task.evals.niah->context_lengths.size(); ++i) {
      HLAB_RETURN_IF_ERROR(
          CheckContext(absl::StrCat("evals.niah.context_lengths[", i, "]"),
                       task.evals.niah->context_lengths[i], task, *config));
    }
    plan["evals"]["niah"] = {
        {"kinds", task.evals.niah->kinds},
        {"context_lengths", task.evals.niah->context_lengths},
        {"depths", task.evals.niah->depths},
        {"samples", task.evals.niah->samples}};
  }
  if (task.evals.probing) {
    HLAB_RETURN_IF_ERROR(CheckProbing(task, *config));
    const ProbingSpec& p = *task.evals.probing;
    plan["evals"]["probing"] = {
        {"context_length", ProbingContext(p, task.run.seq_len)},
        {"samples", p.samples},
        {"classes", p.classes},
        {"layers", config->n_layers + 1}};
  }
  if (task.evals.retrieval_heads) {
    HLAB_RETURN_IF_ERROR(CheckRetrievalHeads(task, *config));
    const task::RetrievalHeadsSpec& r = *task.evals.retrieval_heads;
    plan["evals"]["retrieval_heads"] = {
        {"context_length", RetrievalContext(r, task.run.seq_len)},
        {"samples", r.samples},
        {"top_heads", r.top_heads}};
  }
  if (task.evals.multiple_choice) {
    HLAB_ASSIGN_OR_RETURN(plan["evals"]["multiple_choice"],
                          CheckMultipleChoice(task, meta->tokenizer));
  }
  if (task.evals.receptive_field) {
    const int64_t h =
        ReceptiveFieldLimit(*task.evals.receptive_field, task.run.seq_len);
    plan["evals"]["receptive_field"] = {
        {"limit", h},
        {"efficient_windows", {{"length", 3 * (h / 2)}, {"stride", h / 2}}}};
  }
  return plan.dump();
}

}  // namespace hlab::eval
