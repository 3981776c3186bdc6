// EvalRun (eval/internal/eval_run.h): needle in a haystack and the mechanism
// analyses of appendix D (gradient profile, probing, retrieval heads).
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
#include "data/synthetic_corpus.h"
#include "data/tokenizer.h"
#include "eval/gradient_profile.h"
#include "eval/internal/eval_run.h"
#include "eval/internal/task_checks.h"
#include "eval/niah.h"
#include "eval/probing.h"
#include "eval/retrieval_heads.h"
#include "train/libtorch_status.h"

namespace hlab::eval::internal {

using task::EvalDataSpec;
using task::GradientProfileSpec;
using task::NiahSpec;
using task::ProbingSpec;
using task::RetrievalHeadsSpec;

// Needle in a haystack (eval/niah.h): "niah_acc" over all cells (details:
// the per kind/length/depth table) and "niah_acc/<kind>" per kind.
absl::Status EvalRun::RunNiah(const NiahSpec& spec) {
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
  Json skipped_kinds = Json::object();
  if (spec.kinds.empty()) {
    // Default kinds: those whose needles, question and answer fit the
    // shortest length (small models train on short sequences, and a
    // passkey prompt alone takes ~250 byte tokens); the others are skipped,
    // with the reason in niah_acc's details ("skipped_kinds"), not as a
    // warning: nobody asked for them, and a sweep of short-context runs
    // would log one per evaluation. Kinds given explicitly must fit.
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
        skipped_kinds[kind] = std::string(fits.message());
      }
    }
    if (fitting.empty()) {
      Result("niah_acc", Json(nullptr),
             {{"not_measured",
               absl::StrCat("no NIAH kind fits a context length of ", shortest,
                            " tokens")},
              {"skipped_kinds", skipped_kinds}});
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
  Json niah_details = details;
  if (!skipped_kinds.empty()) niah_details["skipped_kinds"] = skipped_kinds;
  Result("niah_acc", result.accuracy, niah_details);
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

// Appendix D.3 (eval/gradient_profile.h): "grad_reach", with G(d) binned.
absl::Status EvalRun::RunGradientProfile(const GradientProfileSpec& spec) {
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
    return absl::FailedPreconditionError(
        absl::StrCat("evals.gradient_profile: no document of ", docs->source(),
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
absl::Status EvalRun::RunProbing(const ProbingSpec& spec) {
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
absl::Status EvalRun::RunRetrievalHeads(const RetrievalHeadsSpec& spec) {
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

}  // namespace hlab::eval::internal
