// EvalRun (eval/internal/eval_run.h): log(LongPPL) (eval/longppl.h) and the
// receptive-field constraint of appendix D.1.
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
#include "data/synthetic_corpus.h"
#include "data/tokenizer.h"
#include "eval/cross_tokenizer_keys.h"
#include "eval/eval_data.h"
#include "eval/internal/eval_run.h"
#include "eval/internal/task_checks.h"
#include "eval/internal/token_corpus.h"
#include "eval/key_token_cache.h"
#include "eval/longppl.h"
#include "eval/longppl_reference.h"
#include "eval/validation_loss.h"
#include "train/libtorch_status.h"

namespace hlab::eval::internal {

using task::LongPplPlan;
using task::LongPplSpec;
using task::ReceptiveFieldSpec;

absl::Status EvalRun::RunLongPpl(const LongPplSpec& spec) {
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
        reference.sha256, "|", reference.tokenizer->vocabulary().tokenizer, ">",
        model_tokenizer->vocabulary().tokenizer);
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
              *reference.scorer, *reference.tokenizer, *model_tokenizer, corpus,
              config, n);
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
absl::Status EvalRun::RunLongPplOnKeySpans(const LongPplSpec& spec) {
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
  if (!tokenizer_.empty() && tokenizer->vocabulary().tokenizer != tokenizer_) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ".tokenizer: '", tokenizer->spec(), "' is tokenizer ",
        tokenizer->vocabulary().tokenizer, ", but the model's is ", tokenizer_,
        ": give the spec of the model's own tokenizer"));
  }
  const int64_t n = spec.documents > 0
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
absl::Status EvalRun::ScoreAndRecordLongPpl(const LongPplSpec& spec,
                                            KeyTokens keys,
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
  } else if (scored.status().code() == absl::StatusCode::kFailedPrecondition) {
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
absl::Status EvalRun::RunReceptiveField(const ReceptiveFieldSpec& spec) {
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
      if (longppl_keys_) Result(metric + "log_longppl", Json(nullptr), details);
      continue;
    }
    r.apply();
    std::string source;
    absl::StatusOr<ValidationLossResult> loss =
        ComputeValLoss(*task_.evals.val_loss, &source);
    absl::StatusOr<LongPplResult> longppl =
        absl::FailedPreconditionError("not measured");
    if (longppl_keys_ && log_longppl_) {
      longppl = ScoreLongPpl(*scorer_, longppl_docs_->corpus(), *longppl_keys_);
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
    const double restricted =
        per_document ? longppl->log_longppl_per_document : longppl->log_longppl;
    lp["log_longppl"] = restricted;
    lp["unrestricted_log_longppl"] = *log_longppl_;
    lp["key_tokens"] = longppl->key_tokens;
    Result(metric + "log_longppl", restricted - *log_longppl_, lp);
  }
  Progress("receptive_field", 2, 2, "done");
  return absl::OkStatus();
}

}  // namespace hlab::eval::internal
