// Running EVAL tasks (eval/eval_task.h); the file format is
// task/eval_task.h's, `--check` is eval_task_check.cc, and the checks both
// share are eval/internal/task_checks.h.
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
#include "data/key_spans.h"
#include "data/shard_format.h"
#include "data/synthetic_corpus.h"
#include "data/tokenizer.h"
#include "eval/checkpoint_model.h"
#include "eval/cross_tokenizer_keys.h"
#include "eval/eval_data.h"
#include "eval/gradient_profile.h"
#include "eval/internal/task_checks.h"
#include "eval/internal/token_corpus.h"
#include "eval/key_token_cache.h"
#include "eval/longppl.h"
#include "eval/longppl_reference.h"
#include "eval/niah.h"
#include "eval/probing.h"
#include "eval/retrieval_heads.h"
#include "eval/token_scorer.h"
#include "eval/validation_loss.h"
#include "model/config/param_count.h"
#include "train/libtorch_status.h"
#include "train/training_data.h"

namespace hlab::eval {

using internal::CheckContext;
using internal::CheckProbing;
using internal::CheckRetrievalHeads;
using internal::DataDescription;
using internal::KeyConfig;
using internal::Prefixed;
using internal::ProbingContext;
using internal::RetrievalContext;
using internal::TokenCorpus;
using internal::ValidateLongPplConfig;
using task::EvalDataSpec;
using task::EvalTask;
using task::GradientProfileSpec;
using task::LongPplPlan;
using task::LongPplSpec;
using task::NiahSpec;
using task::ProbingSpec;
using task::ReceptiveFieldSpec;
using task::RetrievalHeadsSpec;
using task::ValLossSpec;

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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
    if (task_.evals.probing) {
      HLAB_RETURN_IF_ERROR(CheckProbing(task_, model_.config));
    }
    if (task_.evals.retrieval_heads) {
      HLAB_RETURN_IF_ERROR(CheckRetrievalHeads(task_, model_.config));
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
    absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer =
        SampleTokenizer(spec.tokenizer, "evals.niah");
    if (!tokenizer.ok()) return tokenizer.status();
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

  // The tokenizer NIAH samples are written in: `spec` (the field
  // <field>.tokenizer), or the model's.
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> SampleTokenizer(
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
      if (spec.documents != task::kValLossMixture) {
        absl::StatusOr<data::SequenceMixture> one_kind =
            run_data_->ValidationWith(
                spec.documents == task::kValLossLong ? 1.0 : 0.0);
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
    if (!spec.key_tokens.empty()) return RunLongPplOnKeySpans(spec);
    const auto start = Clock::now();
    const LongPplPlan plan = PlanLongPpl(spec, task_.run.seq_len);
    const KeyTokenConfig config = KeyConfig(spec, plan);
    HLAB_RETURN_IF_ERROR(ValidateLongPplConfig(config));
    HLAB_RETURN_IF_ERROR(CheckContext("evals.longppl.context_len",
                                      plan.context_len, task_, model_.config));
    std::vector<std::string> warnings;
    Progress("longppl", 0, 2, "loading the reference");
    HLAB_ASSIGN_OR_RETURN(LongPplReferenceModel reference,
                          LoadLongPplReference(spec.reference, model_.config,
                                               tokenizer_, &warnings));
    HLAB_ASSIGN_OR_RETURN(auto docs, OpenData(spec.data, "evals.longppl.data"));
    const data::Corpus& corpus = docs->corpus();
    const int64_t n = std::min(
        spec.documents > 0 ? spec.documents : task::kDefaultLongPplDocuments,
        corpus.num_documents());
    int64_t longest = 0;
    // Documents of K + 1 tokens or fewer (after cutting) have no candidate
    // token: selection passes them by, and they count as skipped.
    int64_t too_short = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t length = corpus.DocumentLength(i);
      longest = std::max(longest, length);
      if (std::min(length, plan.context_len) <= plan.trunc_len + 1) {
        ++too_short;
      }
    }
    // Across tokenizers K counts the reference's tokens: selection itself
    // says when no document is long enough, and which were too short.
    const bool across = reference.tokenizer != nullptr;
    if (across) too_short = 0;
    if (!across && std::min(longest, plan.context_len) <= plan.trunc_len + 1) {
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
    // The model's tokenizer, to turn its documents into text, when the
    // reference's is another.
    std::unique_ptr<data::Tokenizer> model_tokenizer;
    std::string reference_identity = reference.sha256;
    if (across) {
      HLAB_ASSIGN_OR_RETURN(
          model_tokenizer,
          SampleTokenizer(spec.data.tokenizer, "evals.longppl.data"));
      reference_identity = absl::StrCat(
          reference.sha256, "|", reference.tokenizer->vocabulary().tokenizer,
          ">", model_tokenizer->vocabulary().tokenizer);
    }
    KeyTokenCache cache(task_.cache_dir);
    const KeyTokenCacheKey key = {.reference_sha256 = reference_identity,
                                  .dataset = identity,
                                  .documents = n,
                                  .config = config};
    CacheOutcome outcome = CacheOutcome::kDisabled;
    Progress("longppl", 0, 2, "selecting key tokens with the reference");
    auto keys = cache.GetOrCompute(
        key,
        [&]() -> absl::StatusOr<KeyTokens> {
          if (across) {
            return SelectKeyTokensAcrossTokenizers(
                *reference.scorer, *reference.tokenizer, *model_tokenizer,
                corpus, config, n);
          }
          return SelectKeyTokens(*reference.scorer, corpus, config, n);
        },
        &warnings, &outcome);
    for (const std::string& w : warnings) Warn(w);
    if (!keys.ok()) return Prefixed("evals.longppl", keys.status());
    if (across) {
      too_short = n - static_cast<int64_t>(keys->documents.size());
    }
    Json details = {{"reference", reference.details},
                    {"source", docs->source()},
                    {"trunc_len", plan.trunc_len},
                    {"sliding_window", plan.sliding_window},
                    {"context_len", plan.context_len},
                    {"cache", CacheOutcomeName(outcome)}};
    if (dynamic_cast<const data::SyntheticCorpus*>(&corpus) != nullptr) {
      auto accuracy = CompareWithRecallPositions(corpus, *keys);
      if (!accuracy.ok()) return Prefixed("evals.longppl", accuracy.status());
      details["key_token_precision"] = accuracy->precision;
      details["key_token_recall"] = accuracy->recall;
      details["key_token_chance"] = accuracy->chance;
      details["true_recall_positions"] = accuracy->true_positions;
    }
    return ScoreAndRecordLongPpl(spec, *std::move(keys), std::move(docs),
                                 too_short, std::move(details), start);
  }

  // log(LongPPL) on key tokens chosen elsewhere (evals.longppl.key_tokens):
  // the file's texts, encoded with the model's tokenizer and cut to
  // context_len tokens; a token is key when its byte span lies inside a key
  // range (data/key_spans.h). Token 0, with no prediction, is never scored.
  absl::Status RunLongPplOnKeySpans(const LongPplSpec& spec) {
    const auto start = Clock::now();
    const std::string field = "evals.longppl.key_tokens";
    const task::LongPplKeyTokensSpec& k = spec.key_tokens;
    const LongPplPlan plan = PlanLongPpl(spec, task_.run.seq_len);
    HLAB_RETURN_IF_ERROR(CheckContext("evals.longppl.context_len",
                                      plan.context_len, task_, model_.config));
    absl::StatusOr<std::vector<data::KeySpanDocument>> spans =
        k.file.empty() ? data::ReadLongPplSlices(k.slices, k.texts)
                       : data::ReadKeySpansJsonl(k.file);
    if (!spans.ok()) return Prefixed(field, spans.status());
    HLAB_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                          SampleTokenizer(k.tokenizer, field));
    if (!tokenizer_.empty() &&
        tokenizer->vocabulary().tokenizer != tokenizer_) {
      return absl::FailedPreconditionError(absl::StrCat(
          field, ".tokenizer: '", tokenizer->spec(), "' is tokenizer ",
          tokenizer->vocabulary().tokenizer, ", but the model's is ",
          tokenizer_, ": give the spec of the model's own tokenizer"));
    }
    const int64_t n =
        spec.documents > 0
            ? std::min<int64_t>(spec.documents,
                                static_cast<int64_t>(spans->size()))
            : static_cast<int64_t>(spans->size());
    auto corpus = std::make_unique<TokenCorpus>(tokenizer->vocabulary());
    KeyTokens keys;
    keys.config.max_tokens = plan.context_len;
    keys.config.min_key_tokens = spec.min_key_tokens;
    Progress("longppl", 0, 2, "mapping key spans onto the model's tokens");
    for (int64_t d = 0; d < n; ++d) {
      const data::KeySpanDocument& doc = (*spans)[d];
      data::EncodedText encoded = tokenizer->EncodeWithOffsets(doc.text);
      const size_t length = std::min<size_t>(
          encoded.ids.size(), static_cast<size_t>(plan.context_len));
      encoded.ids.resize(length);
      auto key = data::KeyTokenIndices(
          doc, doc.text, absl::MakeConstSpan(encoded.spans).subspan(0, length));
      if (!key.ok()) return Prefixed(field, key.status());
      DocumentKeyTokens out;
      out.document = d;
      out.length = static_cast<int64_t>(length);
      for (int64_t i : *key) {
        if (i > 0) out.positions.push_back(i);
      }
      keys.candidate_tokens += std::max<int64_t>(out.length - 1, 0);
      keys.documents.push_back(std::move(out));
      corpus->Add(std::move(encoded.ids));
    }
    const std::string source =
        k.file.empty()
            ? absl::StrCat("key_tokens:", k.slices, " (texts ", k.texts, ")")
            : absl::StrCat("key_tokens:", k.file);
    Json details = {{"source", source},
                    {"tokenizer", tokenizer->spec()},
                    {"context_len", plan.context_len}};
    const data::Corpus* borrowed = corpus.get();
    key_span_corpus_ = std::move(corpus);
    // Every document is in `keys` (one too short to hold a key token is
    // skipped by min_key_tokens), so none is counted apart.
    return ScoreAndRecordLongPpl(spec, std::move(keys),
                                 EvalData::Borrow(borrowed, source),
                                 /*too_short=*/0, std::move(details), start);
  }

  // Scores the evaluated model on `keys` and records log_longppl, pooled or
  // per document as spec.aggregation says, both in the details.
  absl::Status ScoreAndRecordLongPpl(const LongPplSpec& spec, KeyTokens keys,
                                     std::unique_ptr<EvalData> docs,
                                     int64_t too_short, Json details,
                                     Clock::time_point start) {
    Progress("longppl", 1, 2, "scoring key tokens");
    auto scored = ScoreLongPpl(*scorer_, docs->corpus(), keys);
    // No document with min_key_tokens key tokens (a reference that uses no
    // long context selects almost none): log(LongPPL) is undefined. The run
    // is not at fault, so the result is recorded as null with the reason,
    // and the other evaluations go on.
    std::string not_measured;
    LongPplResult result;
    if (scored.ok()) {
      result = *scored;
    } else if (scored.status().code() ==
               absl::StatusCode::kFailedPrecondition) {
      not_measured = std::string(scored.status().message());
      result.documents_skipped = static_cast<int64_t>(keys.documents.size());
    } else {
      return Prefixed("evals.longppl", scored.status());
    }
    Progress("longppl", 2, 2, "done");
    int64_t selected = 0;
    for (const auto& d : keys.documents) {
      selected += static_cast<int64_t>(d.positions.size());
    }
    details["documents"] = result.documents;
    details["documents_skipped"] = result.documents_skipped + too_short;
    details["documents_too_short"] = too_short;
    details["key_tokens"] = result.key_tokens;
    details["key_tokens_selected"] = selected;
    details["candidate_tokens"] = keys.candidate_tokens;
    details["min_key_tokens"] = spec.min_key_tokens;
    details["aggregation"] = spec.aggregation;
    details["seconds"] = SecondsSince(start);
    longppl_keys_ = std::move(keys);
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
    details["log_longppl_pooled"] = result.log_longppl;
    details["log_longppl_per_document"] = result.log_longppl_per_document;
    log_longppl_ = spec.aggregation == task::kLongPplPerDocument
                       ? result.log_longppl_per_document
                       : result.log_longppl;
    Result("log_longppl", *log_longppl_, details);
    return absl::OkStatus();
  }

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
      // The same aggregation as the unrestricted figure.
      const bool per_document =
          task_.evals.longppl &&
          task_.evals.longppl->aggregation == task::kLongPplPerDocument;
      const double restricted = per_document ? longppl->log_longppl_per_document
                                             : longppl->log_longppl;
      lp["log_longppl"] = restricted;
      lp["unrestricted_log_longppl"] = *log_longppl_;
      lp["key_tokens"] = longppl->key_tokens;
      Result(metric + "log_longppl", restricted - *log_longppl_, lp);
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

  // Appendix D.2 (eval/probing.h): "probe_acc/l<k>" per layer (0: the
  // embeddings) and "probe_acc", the peak layer's, with every layer in its
  // details.
  absl::Status RunProbing(const ProbingSpec& spec) {
    const auto start = Clock::now();
    HLAB_ASSIGN_OR_RETURN(std::unique_ptr<data::Tokenizer> tokenizer,
                          SampleTokenizer(spec.tokenizer, "evals.probing"));
    ProbingConfig config;
    config.context_length = ProbingContext(spec, task_.run.seq_len);
    if (!spec.depths.empty()) config.depths = spec.depths;
    config.samples = spec.samples;
    config.classes = static_cast<int>(spec.classes);
    config.seed = spec.seed;
    config.corpus_seed = task_.run.data.seed;
    config.batch_sequences = spec.batch_sequences;
    config.probe.test_fraction = spec.test_fraction;
    config.probe.l2 = spec.l2;
    absl::StatusOr<ProbingResult> probed = ProbeNiahLayers(
        model_.model, *tokenizer, config, [this](int64_t done, int64_t n) {
          Progress("probing", done, n, "reading the residual stream");
        });
    if (!probed.ok()) return Prefixed("evals.probing", probed.status());
    Json layers = Json::array();
    for (const ProbeLayer& l : probed->layers) {
      Json row = {{"layer", l.layer},
                  {"mixer", l.mixer},
                  {"accuracy", l.fit.accuracy},
                  {"lo", l.fit.lo},
                  {"hi", l.fit.hi},
                  {"correct", l.fit.correct},
                  {"test", l.fit.test},
                  {"train", l.fit.train},
                  {"train_accuracy", l.fit.train_accuracy}};
      layers.push_back(row);
      row["chance"] = probed->chance;
      Result(absl::StrCat("probe_acc/l", l.layer), l.fit.accuracy, row);
    }
    const ProbeLayer& peak =
        probed->layers[static_cast<size_t>(probed->peak_layer)];
    Result("probe_acc", probed->peak_accuracy,
           {{"layers", layers},
            {"peak_layer", probed->peak_layer},
            {"peak_mixer", peak.mixer},
            {"classes", probed->classes},
            {"chance", probed->chance},
            {"samples", probed->samples},
            {"skipped", probed->skipped},
            {"context_length", config.context_length},
            {"depths", config.depths},
            {"test_fraction", config.probe.test_fraction},
            {"l2", config.probe.l2},
            {"seed", config.seed},
            {"interval", "Wilson 95%"},
            {"position", "the last prompt token (the recall's key letter)"},
            {"source", "synthetic NIAH, single needle"},
            {"seconds", SecondsSince(start)}});
    return absl::OkStatus();
  }

  // Appendix D.4 (eval/retrieval_heads.h): "retrieval_score" and
  // "retrieval_mass", the top head's, with every head in the details.
  absl::Status RunRetrievalHeads(const RetrievalHeadsSpec& spec) {
    const auto start = Clock::now();
    HLAB_ASSIGN_OR_RETURN(
        std::unique_ptr<data::Tokenizer> tokenizer,
        SampleTokenizer(spec.tokenizer, "evals.retrieval_heads"));
    RetrievalHeadsConfig config;
    config.context_length = RetrievalContext(spec, task_.run.seq_len);
    if (!spec.depths.empty()) config.depths = spec.depths;
    config.samples = spec.samples;
    config.top_heads = static_cast<int>(spec.top_heads);
    config.seed = spec.seed;
    config.corpus_seed = task_.run.data.seed;
    absl::StatusOr<RetrievalHeadsResult> traced = TraceRetrievalHeads(
        model_.model, *tokenizer, config, [this](int64_t done, int64_t n) {
          Progress("retrieval_heads", done, n, "tracing attention");
        });
    if (!traced.ok()) {
      return Prefixed("evals.retrieval_heads", traced.status());
    }
    auto row = [](const RetrievalHead& h) {
      return Json{{"layer", h.layer},     {"head", h.head},
                  {"score", h.score},     {"needle_mass", h.needle_mass},
                  {"entropy", h.entropy}, {"hits", h.hits},
                  {"copied", h.copied}};
    };
    Json heads = Json::array(), top = Json::array();
    for (const RetrievalHead& h : traced->heads) heads.push_back(row(h));
    for (int i : traced->top) {
      top.push_back(row(traced->heads[static_cast<size_t>(i)]));
    }
    const RetrievalHead& best =
        traced->heads[static_cast<size_t>(traced->top.front())];
    Json details = {
        {"heads", heads},
        {"top", top},
        {"layers", traced->layers},
        {"answer_accuracy", traced->answer_accuracy},
        {"samples", traced->samples},
        {"copied", traced->copied},
        {"context_length", config.context_length},
        {"depths", config.depths},
        {"seed", config.seed},
        {"score_rule",
         "per answer token: the head's top-1 key lies in the needle and the "
         "generated (argmax, teacher-forced) token is the needle's value"},
        {"source", "synthetic NIAH, single needle"},
        {"seconds", SecondsSince(start)}};
    Result("retrieval_score", best.score, details);
    Result("retrieval_mass", best.needle_mass,
           {{"layer", best.layer},
            {"head", best.head},
            {"score", best.score},
            {"entropy", best.entropy},
            {"samples", traced->samples}});
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
  // The documents of evals.longppl.key_tokens, encoded (longppl_docs_
  // borrows them).
  std::unique_ptr<data::Corpus> key_span_corpus_;
};

}  // namespace

absl::Status RunEvalTask(const EvalTask& task, const RecordSink& emit) {
  try {
    return EvalRun(task, emit).Run();
  } catch (const c10::Error& e) {
    return train::LibTorchStatus(e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory: lower evals.val_loss.batch_sequences or context_len, "
        "or retry on a machine with more memory");
  }
}

}  // namespace hlab::eval
