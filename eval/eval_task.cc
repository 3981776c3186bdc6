// Checking and running EVAL tasks (eval/eval_task.h); the file format is
// task/eval_task.h's.
#include "eval/eval_task.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/shard_format.h"
#include "data/synthetic_corpus.h"
#include "data/tokenizer.h"
#include "eval/checkpoint_model.h"
#include "eval/eval_data.h"
#include "eval/gradient_profile.h"
#include "eval/key_token_cache.h"
#include "eval/longppl.h"
#include "eval/niah.h"
#include "eval/token_scorer.h"
#include "eval/validation_loss.h"
#include "model/config/param_count.h"
#include "train/training_data.h"

namespace hlab::eval {

using task::EvalDataSpec;
using task::EvalTask;
using task::GradientProfileSpec;
using task::LongPplPlan;
using task::LongPplSpec;
using task::NiahSpec;
using task::ReceptiveFieldSpec;
using task::ValLossSpec;

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

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

class EvalRun {
 public:
  EvalRun(const EvalTask& task, const RecordSink& emit)
      : task_(task), emit_(emit) {}

  absl::Status Run() {
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
    emit_({{"type", "done"}, {"seconds", SecondsSince(start)}});
    return absl::OkStatus();
  }

 private:
  void Warn(const std::string& message) {
    emit_({{"type", "warning"}, {"message", message}});
  }

  void Result(const std::string& metric, const Json& value,
              const Json& details) {
    emit_({{"type", "result"},
           {"run_id", task_.run_id},
           {"step", step_},
           {"metric", metric},
           {"value", value},
           {"details", details}});
  }

  void Progress(const std::string& eval, int64_t done, int64_t total,
                const std::string& phase) {
    emit_({{"type", "progress"},
           {"eval", eval},
           {"done", done},
           {"total", total},
           {"phase", phase}});
  }

  absl::Status OpenRunData() {
    if (run_data_) return absl::OkStatus();
    task::TrainTask run = task_.run;
    run.model = model_.config;
    auto data = train::TrainingData::Create(run);
    if (!data.ok()) return Prefixed("config.data", data.status());
    run_data_ = *std::move(data);
    return absl::OkStatus();
  }

  // Needle in a haystack (eval/niah.h): "niah_acc" over all cells (details:
  // the per kind/length/depth table) and "niah_acc/<kind>" per kind.
  absl::Status RunNiah(const NiahSpec& spec) {
    EvalDataSpec tokenizer_only;
    tokenizer_only.tokenizer = spec.tokenizer;
    std::string tokenizer_spec, tokenizer_dir;
    HLAB_RETURN_IF_ERROR(TokenizerSpec(tokenizer_only, "evals.niah",
                                       &tokenizer_spec, &tokenizer_dir));
    absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer =
        data::MakeTokenizer(tokenizer_spec, tokenizer_dir);
    if (!tokenizer.ok()) {
      return Prefixed("evals.niah.tokenizer", tokenizer.status());
    }
    NiahConfig config;
    config.haystack.source = spec.haystack;
    config.haystack.corpus_seed = task_.run.data.seed;
    config.kinds =
        spec.kinds.empty() ? NiahKindsFor(config.haystack) : spec.kinds;
    config.context_lengths = spec.context_lengths;
    if (config.context_lengths.empty()) {
      config.context_lengths = {task_.run.seq_len};
    }
    if (!spec.depths.empty()) config.depths = spec.depths;
    config.samples = spec.samples;
    config.candidates = static_cast<int>(spec.candidates);
    config.seed = spec.seed;
    config.greedy = spec.greedy;
    HLAB_RETURN_IF_ERROR(Prefixed("evals.niah", ValidateNiahConfig(config)));
    if (spec.kinds.empty()) {
      // Default kinds: those whose needles, question and answer fit the
      // shortest length (small models train on short sequences, and a
      // passkey prompt alone takes ~250 byte tokens); the others are skipped
      // with a warning. Kinds given explicitly must fit.
      const int64_t shortest = *std::min_element(config.context_lengths.begin(),
                                                 config.context_lengths.end());
      std::vector<std::string> fitting;
      for (const std::string& kind : config.kinds) {
        absl::Status fits = absl::OkStatus();
        for (int64_t i = 0; i < config.samples && fits.ok(); ++i) {
          fits = GenerateNiahSample(**tokenizer, kind, shortest,
                                    config.depths.front(), config.seed, i,
                                    config.candidates, config.haystack)
                     .status();
        }
        if (fits.ok()) {
          fitting.push_back(kind);
        } else {
          Warn(absl::StrCat("evals.niah: kind '", kind,
                            "' skipped: ", fits.message(),
                            "; list evals.niah.kinds, or give longer "
                            "context_lengths"));
        }
      }
      if (fitting.empty()) {
        Result("niah_acc", Json(nullptr),
               {{"not_measured",
                 absl::StrCat("no NIAH kind fits a context length of ",
                              shortest, " tokens")}});
        return absl::OkStatus();
      }
      config.kinds = fitting;
    }
    absl::StatusOr<NiahResult> evaluated = EvaluateNiah(
        *scorer_, **tokenizer, config, [this](int64_t done, int64_t total) {
          Progress("niah", done, total, "scoring");
        });
    if (!evaluated.ok()) return Prefixed("evals.niah", evaluated.status());
    const NiahResult& result = *evaluated;
    Json details = Json::parse(NiahResultToJson(result));
    Result("niah_acc", result.accuracy, details);
    for (const auto& [kind, accuracy] : result.accuracy_by_kind) {
      Json cells = Json::array();
      for (const Json& cell : details.value("cells", Json::array())) {
        if (cell.value("kind", "") == kind) cells.push_back(cell);
      }
      Result("niah_acc/" + kind, accuracy,
             {{"candidates", result.candidates}, {"cells", cells}});
    }
    return absl::OkStatus();
  }

  // The tokenizer spec (and its base directory) for importing JSONL.
  absl::Status TokenizerSpec(const EvalDataSpec& d, const std::string& field,
                             std::string* spec, std::string* dir) {
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
  absl::StatusOr<std::unique_ptr<EvalData>> OpenData(const EvalDataSpec& d,
                                                     const std::string& field) {
    std::unique_ptr<EvalData> docs;
    if (!d.jsonl.empty()) {
      std::string spec, dir;
      HLAB_RETURN_IF_ERROR(TokenizerSpec(d, field, &spec, &dir));
      HLAB_ASSIGN_OR_RETURN(
          docs, EvalData::OpenJsonl(d.jsonl, d.text_field, spec, dir,
                                    task_.cache_dir, field + ".jsonl"));
    } else if (!d.prepared.empty()) {
      HLAB_ASSIGN_OR_RETURN(docs, EvalData::OpenPrepared(d.prepared, d.split,
                                                         field + ".prepared"));
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
  absl::StatusOr<ValidationLossResult> ComputeValLoss(const ValLossSpec& spec,
                                                      std::string* source) {
    const ValidationLossOptions options = {
        .tokens = spec.tokens > 0 ? spec.tokens : task::kDefaultValLossTokens,
        .batch_sequences = spec.batch_sequences};
    if (spec.data.empty()) {
      HLAB_RETURN_IF_ERROR(OpenRunData());
      *source = DataDescription(spec.data, task_, false);
      auto result =
          MixtureValidationLoss(*scorer_, run_data_->validation(), options);
      if (!result.ok()) return Prefixed("evals.val_loss", result.status());
      return *result;
    }
    HLAB_ASSIGN_OR_RETURN(auto docs,
                          OpenData(spec.data, "evals.val_loss.data"));
    *source = docs->source();
    auto result = CorpusValidationLoss(*scorer_, docs->corpus(),
                                       task_.run.seq_len, options);
    if (!result.ok()) return Prefixed("evals.val_loss", result.status());
    return *result;
  }

  absl::Status RunValLoss(const ValLossSpec& spec) {
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

  absl::Status RunLongPpl(const LongPplSpec& spec) {
    const auto start = Clock::now();
    const LongPplPlan plan = PlanLongPpl(spec, task_.run.seq_len);
    const KeyTokenConfig config = KeyConfig(spec, plan);
    HLAB_RETURN_IF_ERROR(ValidateLongPplConfig(config));
    HLAB_RETURN_IF_ERROR(CheckContext("evals.longppl.context_len",
                                      plan.context_len, task_, model_.config));
    HLAB_ASSIGN_OR_RETURN(
        CheckpointModel reference,
        LoadCheckpointModel(spec.reference.File(),
                            "evals.longppl.reference.checkpoint"));
    std::vector<std::string> warnings;
    HLAB_RETURN_IF_ERROR(CheckReference(model_.config, tokenizer_,
                                        reference.config,
                                        reference.meta.tokenizer, &warnings));
    HLAB_ASSIGN_OR_RETURN(auto docs, OpenData(spec.data, "evals.longppl.data"));
    const data::Corpus& corpus = docs->corpus();
    const int64_t n = std::min(
        spec.documents > 0 ? spec.documents : task::kDefaultLongPplDocuments,
        corpus.num_documents());
    int64_t longest = 0;
    for (int64_t i = 0; i < n; ++i) {
      longest = std::max(longest, corpus.DocumentLength(i));
    }
    if (std::min(longest, plan.context_len) <= plan.trunc_len + 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "evals.longppl: no document is long enough: the longest of the ", n,
          " documents of ", docs->source(), " has ", longest,
          " tokens (cut to context_len ", plan.context_len,
          "), and key-token selection needs more than trunc_len + 1 = ",
          plan.trunc_len + 1,
          ": use longer documents (evals.longppl.data) or a smaller "
          "trunc_len"));
    }
    HLAB_ASSIGN_OR_RETURN(const std::string identity,
                          DocumentsIdentity(corpus, n, plan.context_len));
    KeyTokenCache cache(task_.cache_dir);
    const KeyTokenCacheKey key = {
        .reference_sha256 = reference.meta.payload_sha256,
        .dataset = identity,
        .documents = n,
        .config = config};
    CacheOutcome outcome = CacheOutcome::kDisabled;
    Progress("longppl", 0, 2, "selecting key tokens with the reference");
    auto keys = cache.GetOrCompute(
        key,
        [&]() -> absl::StatusOr<KeyTokens> {
          ModelScorer reference_scorer(reference.model);
          return SelectKeyTokens(reference_scorer, corpus, config, n);
        },
        &warnings, &outcome);
    for (const std::string& w : warnings) Warn(w);
    if (!keys.ok()) return Prefixed("evals.longppl", keys.status());
    Progress("longppl", 1, 2, "scoring key tokens");
    auto scored = ScoreLongPpl(*scorer_, corpus, *keys);
    // No document with min_key_tokens key tokens (a reference that uses no
    // long context selects almost none): log(LongPPL) is undefined. The run
    // is not at fault, so the result is recorded as null with the reason,
    // and the other evaluations go on.
    std::string not_measured;
    LongPplResult result_value;
    if (scored.ok()) {
      result_value = *scored;
    } else if (scored.status().code() ==
               absl::StatusCode::kFailedPrecondition) {
      not_measured = std::string(scored.status().message());
      result_value.documents_skipped =
          static_cast<int64_t>(keys->documents.size());
    } else {
      return Prefixed("evals.longppl", scored.status());
    }
    const LongPplResult* result = &result_value;
    Progress("longppl", 2, 2, "done");
    int64_t selected = 0;
    for (const auto& d : keys->documents) {
      selected += static_cast<int64_t>(d.positions.size());
    }
    Json details = {{"documents", result->documents},
                    {"documents_skipped", result->documents_skipped},
                    {"key_tokens", result->key_tokens},
                    {"key_tokens_selected", selected},
                    {"candidate_tokens", keys->candidate_tokens},
                    {"reference",
                     {{"checkpoint", spec.reference.File()},
                      {"run_id", spec.reference.run_id},
                      {"step", reference.meta.step},
                      {"payload_sha256", reference.meta.payload_sha256}}},
                    {"source", docs->source()},
                    {"trunc_len", plan.trunc_len},
                    {"sliding_window", plan.sliding_window},
                    {"context_len", plan.context_len},
                    {"cache", CacheOutcomeName(outcome)},
                    {"seconds", SecondsSince(start)}};
    if (dynamic_cast<const data::SyntheticCorpus*>(&corpus) != nullptr) {
      auto accuracy = CompareWithRecallPositions(corpus, *keys);
      if (!accuracy.ok()) return Prefixed("evals.longppl", accuracy.status());
      details["key_token_precision"] = accuracy->precision;
      details["key_token_recall"] = accuracy->recall;
      details["key_token_chance"] = accuracy->chance;
      details["true_recall_positions"] = accuracy->true_positions;
    }
    longppl_keys_ = *std::move(keys);
    longppl_docs_ = std::move(docs);
    if (!not_measured.empty()) {
      details["not_measured"] = not_measured;
      Warn(
          absl::StrCat("evals.longppl: log(LongPPL) not measured, recorded "
                       "as null: ",
                       not_measured));
      Result("log_longppl", Json(nullptr), details);
      return absl::OkStatus();
    }
    log_longppl_ = result->log_longppl;
    Result("log_longppl", result->log_longppl, details);
    return absl::OkStatus();
  }

  // Appendix D.1 (eval_task.h, ReceptiveFieldSpec): for each restriction,
  // "rf_<full|efficient>_delta_val_loss" and, with LongPPL measured,
  // "rf_<...>_delta_log_longppl": restricted minus unrestricted. A
  // restriction the model has no layers for is recorded as null, with why.
  absl::Status RunReceptiveField(const ReceptiveFieldSpec& spec) {
    const int64_t h = ReceptiveFieldLimit(spec, task_.run.seq_len);
    bool has_full = false, has_efficient = false;
    for (const model::MixerSpec& layer : model_.config.layers) {
      if (model::IsFullAttention(layer.kind)) {
        has_full = true;
      } else {
        has_efficient = true;
      }
    }
    model::HybridLM& m = model_.model;
    struct Restriction {
      const char* name;
      bool applies;
      const char* missing;
      std::function<void()> apply;
    };
    const Restriction restrictions[] = {
        {"full", has_full, "the model has no full-attention layer",
         [&] { m->set_full_attention_key_limit(h + 1); }},  // [i-H, i]
        {"efficient", has_efficient, "the model has no efficient layer",
         [&] { m->set_efficient_receptive_field(h / 2, 3); }}};
    int64_t done = 0;
    for (const Restriction& r : restrictions) {
      const auto start = Clock::now();
      Progress("receptive_field", done++, 2,
               absl::StrCat("restricting ", r.name));
      const std::string metric = absl::StrCat("rf_", r.name, "_delta_");
      Json details = {{"restricted", r.name}, {"limit", h}};
      if (!r.applies) {
        details["not_measured"] = r.missing;
        Warn(absl::StrCat("evals.receptive_field: restriction '", r.name,
                          "' not measured, recorded as null: ", r.missing));
        Result(metric + "val_loss", Json(nullptr), details);
        if (longppl_keys_)
          Result(metric + "log_longppl", Json(nullptr), details);
        continue;
      }
      r.apply();
      std::string source;
      absl::StatusOr<ValidationLossResult> loss =
          ComputeValLoss(*task_.evals.val_loss, &source);
      absl::StatusOr<LongPplResult> longppl =
          absl::FailedPreconditionError("not measured");
      if (longppl_keys_ && log_longppl_) {
        longppl =
            ScoreLongPpl(*scorer_, longppl_docs_->corpus(), *longppl_keys_);
      }
      m->set_full_attention_key_limit(0);
      m->set_efficient_receptive_field(0);
      if (!loss.ok()) return Prefixed("evals.receptive_field", loss.status());
      details["val_loss"] = loss->loss;
      details["unrestricted_val_loss"] = *val_loss_;
      details["seconds"] = SecondsSince(start);
      Result(metric + "val_loss", loss->loss - *val_loss_, details);
      if (!longppl_keys_) continue;
      Json lp = {{"restricted", r.name}, {"limit", h}};
      if (!log_longppl_) {
        lp["not_measured"] = "the unrestricted log(LongPPL) was not measured";
        Result(metric + "log_longppl", Json(nullptr), lp);
        continue;
      }
      if (!longppl.ok()) {
        return Prefixed("evals.receptive_field", longppl.status());
      }
      lp["log_longppl"] = longppl->log_longppl;
      lp["unrestricted_log_longppl"] = *log_longppl_;
      lp["key_tokens"] = longppl->key_tokens;
      Result(metric + "log_longppl", longppl->log_longppl - *log_longppl_, lp);
    }
    Progress("receptive_field", 2, 2, "done");
    return absl::OkStatus();
  }

  // Appendix D.3 (eval/gradient_profile.h): "grad_reach", with G(d) binned.
  absl::Status RunGradientProfile(const GradientProfileSpec& spec) {
    const auto start = Clock::now();
    HLAB_ASSIGN_OR_RETURN(auto docs,
                          OpenData(EvalDataSpec(), "evals.gradient_profile"));
    const data::Corpus& corpus = docs->corpus();
    const int64_t length = task_.run.seq_len + 1;
    std::vector<std::vector<int32_t>> sequences;
    for (int64_t i = 0; i < corpus.num_documents() &&
                        static_cast<int64_t>(sequences.size()) < spec.sequences;
         ++i) {
      if (corpus.DocumentLength(i) < length) continue;
      auto doc = corpus.GetDocument(i);
      if (!doc.ok()) return Prefixed("evals.gradient_profile", doc.status());
      doc->tokens.resize(static_cast<size_t>(length));
      sequences.push_back(std::move(doc->tokens));
    }
    if (sequences.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "evals.gradient_profile: no document of ", docs->source(),
          " has seq_len + 1 = ", length, " tokens"));
    }
    if (static_cast<int64_t>(sequences.size()) < spec.sequences) {
      Warn(absl::StrCat("evals.gradient_profile: only ", sequences.size(),
                        " documents have seq_len + 1 tokens; profiled those"));
    }
    Progress("gradient_profile", 0, 1, "backpropagating");
    absl::StatusOr<GradientProfileResult> g =
        ProfileGradients(model_.model, sequences, spec.batch_sequences);
    if (!g.ok()) return Prefixed("evals.gradient_profile", g.status());
    Json bins = Json::array();
    for (const GradientBin& b : g->bins) {
      bins.push_back(
          {{"from", b.from}, {"to", b.to}, {"g", b.g}, {"ratio", b.ratio}});
    }
    Progress("gradient_profile", 1, 1, "done");
    Result("grad_reach", g->reach,
           {{"bins", bins},
            {"baseline", g->baseline},
            {"reach_factor", kReachFactor},
            {"scalar", "the target logit at the last position"},
            {"sequences", g->sequences},
            {"seq_len", task_.run.seq_len},
            {"source", docs->source()},
            {"seconds", SecondsSince(start)}});
    return absl::OkStatus();
  }

  const EvalTask& task_;
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
};

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
        {"source", DataDescription(task.evals.val_loss->data, task, false)}};
  }
  if (task.evals.longppl) {
    const LongPplSpec& l = *task.evals.longppl;
    const LongPplPlan p = PlanLongPpl(l, task.run.seq_len);
    HLAB_RETURN_IF_ERROR(ValidateLongPplConfig(KeyConfig(l, p)));
    HLAB_RETURN_IF_ERROR(CheckContext("evals.longppl.context_len",
                                      p.context_len, task, *config));
    auto ref =
        ReadHeader(l.reference.File(), "evals.longppl.reference.checkpoint");
    if (!ref.ok()) return ref.status();
    auto ref_config = model::ModelConfigFromJson(ref->model_config);
    if (!ref_config.ok()) {
      return absl::DataLossError(absl::StrCat(
          "evals.longppl.reference.checkpoint: '", l.reference.File(),
          "' holds an invalid model config: ", ref_config.status().message()));
    }
    std::vector<std::string> warnings;
    HLAB_RETURN_IF_ERROR(CheckReference(*config, meta->tokenizer, *ref_config,
                                        ref->tokenizer, &warnings));
    plan["evals"]["longppl"] = {
        {"trunc_len", p.trunc_len},
        {"sliding_window", p.sliding_window},
        {"context_len", p.context_len},
        {"documents",
         l.documents > 0 ? l.documents : task::kDefaultLongPplDocuments},
        {"reference", l.reference.File()},
        {"reference_step", ref->step},
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
  if (task.evals.receptive_field) {
    const int64_t h =
        ReceptiveFieldLimit(*task.evals.receptive_field, task.run.seq_len);
    plan["evals"]["receptive_field"] = {
        {"limit", h},
        {"efficient_windows", {{"length", 3 * (h / 2)}, {"stride", h / 2}}}};
  }
  return plan.dump();
}

absl::Status RunEvalTask(const EvalTask& task, const RecordSink& emit) {
  try {
    return EvalRun(task, emit).Run();
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (absl::StrContains(what, "out of memory") ||
        absl::StrContains(what, "DefaultCPUAllocator")) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of memory: ", what));
    }
    return absl::InternalError(absl::StrCat("LibTorch error: ", what));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory: lower evals.val_loss.batch_sequences or context_len, "
        "or retry on a machine with more memory");
  }
}

}  // namespace hlab::eval
