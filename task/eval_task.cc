#include "task/eval_task.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "eval/ruler/ruler.h"

namespace hlab::task {
namespace {

using Json = nlohmann::json;

absl::Status RequireNonNegative(const std::string& field, int64_t v) {
  if (v < 0) return FieldError(field, absl::StrCat("must be >= 0, got ", v));
  return absl::OkStatus();
}

absl::Status ValidateData(const std::string& where, const EvalDataSpec& d) {
  if (!d.jsonl.empty() && !d.prepared.empty()) {
    return FieldError(where + ".prepared",
                      "give at most one of jsonl and prepared");
  }
  if (d.split != "train" && d.split != "heldout") {
    return FieldError(
        where + ".split",
        absl::StrCat("must be \"train\" or \"heldout\", got '", d.split, "'"));
  }
  if (!d.tokenizer.empty() && d.jsonl.empty()) {
    return FieldError(where + ".tokenizer",
                      "applies to jsonl data only (a prepared dataset "
                      "carries its tokenizer)");
  }
  if (d.text_field.empty()) {
    return FieldError(where + ".text_field", "must not be empty");
  }
  return absl::OkStatus();
}

absl::Status ValidateValLoss(const ValLossSpec& v) {
  HLAB_RETURN_IF_ERROR(RequireNonNegative("evals.val_loss.tokens", v.tokens));
  if (v.batch_sequences < 1) {
    return FieldError("evals.val_loss.batch_sequences", "must be >= 1");
  }
  if (!ValidValLossDocuments(v.documents)) {
    return FieldError("evals.val_loss.documents",
                      absl::StrCat("must be mixture, short or long, got '",
                                   v.documents, "'"));
  }
  if (!v.data.empty() && v.documents != kValLossMixture) {
    return FieldError("evals.val_loss.documents",
                      absl::StrCat("'", v.documents,
                                   "' picks among the run's own held-out "
                                   "documents: drop it, or drop "
                                   "evals.val_loss.data"));
  }
  return ValidateData("evals.val_loss.data", v.data);
}

// evals.longppl with key_tokens: one file form, and no reference or data.
absl::Status ValidateLongPplKeyTokens(const LongPplSpec& l) {
  const LongPplKeyTokensSpec& k = l.key_tokens;
  if (k.file.empty() == k.slices.empty()) {
    return FieldError(
        "evals.longppl.key_tokens",
        "give either \"file\" (hlab's key-span JSONL) or \"slices\" and "
        "\"texts\" (PKU-ML/LongPPL's slice_<i>.txt directory and the texts "
        "in slice order)");
  }
  if (k.slices.empty() != k.texts.empty()) {
    return FieldError(k.texts.empty() ? "evals.longppl.key_tokens.texts"
                                      : "evals.longppl.key_tokens.file",
                      k.texts.empty()
                          ? "is required with slices (a JSONL of the texts, "
                            "{\"text\": ...} a line, in slice order)"
                          : "texts go with slices, not with file (whose "
                            "lines hold their texts)");
  }
  if (!l.reference.File().empty() || !l.reference.run_id.empty() ||
      !l.reference.hf_dir.empty()) {
    return FieldError("evals.longppl.reference",
                      "not used with key_tokens (the key tokens are chosen "
                      "already): drop one of them");
  }
  if (!l.data.empty()) {
    return FieldError("evals.longppl.data",
                      "not used with key_tokens (the documents are the "
                      "key-token file's texts): drop one of them");
  }
  return absl::OkStatus();
}

absl::Status ValidateLongPplReference(const LongPplReference& r) {
  if (!r.hf_dir.empty() && !r.File().empty()) {
    return FieldError("evals.longppl.reference.hf_dir",
                      "names a Hugging Face model, and checkpoint an hlab "
                      "one: give one reference");
  }
  if (!r.tokenizer.empty() && !r.hf_dir.empty()) {
    return FieldError("evals.longppl.reference.tokenizer",
                      "not used with hf_dir (the directory's tokenizer.json "
                      "is the Llama's tokenizer)");
  }
  if (!r.dtype.empty() && r.hf_dir.empty()) {
    return FieldError("evals.longppl.reference.dtype",
                      "only with hf_dir (an hlab checkpoint runs in its own "
                      "dtype)");
  }
  if (!r.dtype.empty() && r.dtype != "fp32" && r.dtype != "bf16") {
    return FieldError(
        "evals.longppl.reference.dtype",
        absl::StrCat("must be fp32 or bf16, got '", r.dtype, "'"));
  }
  return absl::OkStatus();
}

absl::Status ValidateLongPpl(const LongPplSpec& l) {
  const std::pair<const char*, int64_t> counts[] = {
      {"trunc_len", l.trunc_len},
      {"sliding_window", l.sliding_window},
      {"context_len", l.context_len},
      {"min_key_tokens", l.min_key_tokens},
      {"documents", l.documents}};
  for (const auto& [name, value] : counts) {
    HLAB_RETURN_IF_ERROR(
        RequireNonNegative(absl::StrCat("evals.longppl.", name), value));
  }
  if (l.aggregation != kLongPplPooled && l.aggregation != kLongPplPerDocument) {
    return FieldError("evals.longppl.aggregation",
                      absl::StrCat("must be pooled or per_document, got '",
                                   l.aggregation, "'"));
  }
  if (!l.key_tokens.empty()) return ValidateLongPplKeyTokens(l);
  HLAB_RETURN_IF_ERROR(ValidateLongPplReference(l.reference));
  if (l.reference.File().empty() && l.reference.hf_dir.empty()) {
    return FieldError(
        "evals.longppl.reference.checkpoint",
        l.reference.run_id.empty()
            ? "is required (the reference model that selects key tokens: "
              "\"reference\": {\"checkpoint\": \"/path/to/file.ckpt\"}, "
              "or a Hugging Face Llama: {\"hf_dir\": \"/models/Llama-3.1-8B\"})"
            : absl::StrCat("is required: the reference run ",
                           l.reference.run_id,
                           " was not resolved to a checkpoint file (it must "
                           "have SUCCEEDED; the coordinator fills this in)"));
  }
  return ValidateData("evals.longppl.data", l.data);
}

absl::Status ValidateNiah(const NiahSpec& n) {
  if (n.haystack != "noise" && n.haystack != "synthetic") {
    return FieldError(
        "evals.niah.haystack",
        absl::StrCat("must be noise or synthetic, got '", n.haystack, "'"));
  }
  const std::set<std::string> kinds = {"single", "multikey", "multivalue",
                                       "passkey"};
  for (size_t i = 0; i < n.kinds.size(); ++i) {
    if (kinds.count(n.kinds[i]) == 0) {
      return FieldError(
          absl::StrCat("evals.niah.kinds[", i, "]"),
          absl::StrCat("must be single, multikey, multivalue or passkey, "
                       "got '",
                       n.kinds[i], "'"));
    }
  }
  for (size_t i = 0; i < n.context_lengths.size(); ++i) {
    if (n.context_lengths[i] < 2) {
      return FieldError(absl::StrCat("evals.niah.context_lengths[", i, "]"),
                        "must be >= 2");
    }
  }
  for (size_t i = 0; i < n.depths.size(); ++i) {
    if (!(n.depths[i] >= 0 && n.depths[i] <= 1)) {
      return FieldError(absl::StrCat("evals.niah.depths[", i, "]"),
                        "must be in [0, 1]");
    }
  }
  if (n.samples < 1) return FieldError("evals.niah.samples", "must be >= 1");
  if (n.candidates < 2) {
    return FieldError("evals.niah.candidates", "must be >= 2");
  }
  return absl::OkStatus();
}

absl::Status ValidateReceptiveField(const EvalTask& t) {
  const int64_t h = t.evals.receptive_field->limit;
  if (h < 0 || h == 1 || h % 2 != 0) {
    return FieldError("evals.receptive_field.limit",
                      absl::StrCat("must be an even number >= 2 (or 0 for "
                                   "seq_len / 8), got ",
                                   h));
  }
  const int64_t limit =
      ReceptiveFieldLimit(*t.evals.receptive_field, t.run.seq_len);
  if (limit >= t.run.seq_len) {
    return FieldError("evals.receptive_field.limit",
                      absl::StrCat("must be below the context (seq_len ",
                                   t.run.seq_len, "), got ", limit));
  }
  if (!t.evals.val_loss) {
    return FieldError("evals.receptive_field",
                      "needs evals.val_loss in the same task (its results "
                      "are the changes against it)");
  }
  return absl::OkStatus();
}

absl::Status ValidateGradientProfile(const GradientProfileSpec& g) {
  if (g.sequences <= 0) {
    return FieldError("evals.gradient_profile.sequences", "must be > 0");
  }
  if (g.batch_sequences <= 0) {
    return FieldError("evals.gradient_profile.batch_sequences", "must be > 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateProbing(const ProbingSpec& p) {
  if (p.samples < 2 * p.classes) {
    return FieldError("evals.probing.samples",
                      absl::StrCat("must be at least 2 per class (",
                                   2 * p.classes, "), got ", p.samples));
  }
  HLAB_RETURN_IF_ERROR(
      RequireNonNegative("evals.probing.context_length", p.context_length));
  if (p.context_length == 1) {
    return FieldError("evals.probing.context_length", "must be >= 2");
  }
  for (size_t i = 0; i < p.depths.size(); ++i) {
    if (!(p.depths[i] >= 0 && p.depths[i] <= 1)) {
      return FieldError(absl::StrCat("evals.probing.depths[", i, "]"),
                        "must be in [0, 1]");
    }
  }
  if (p.classes < 2 || p.classes > 10) {
    return FieldError("evals.probing.classes",
                      absl::StrCat("must be in [2, 10] (the synthetic "
                                   "corpus's values), got ",
                                   p.classes));
  }
  if (!(p.test_fraction > 0 && p.test_fraction < 1)) {
    return FieldError("evals.probing.test_fraction", "must be in (0, 1)");
  }
  if (!(p.l2 >= 0)) return FieldError("evals.probing.l2", "must be >= 0");
  if (p.batch_sequences < 1) {
    return FieldError("evals.probing.batch_sequences", "must be >= 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateRetrievalHeads(const RetrievalHeadsSpec& r) {
  if (r.samples < 1) {
    return FieldError("evals.retrieval_heads.samples", "must be >= 1");
  }
  HLAB_RETURN_IF_ERROR(RequireNonNegative(
      "evals.retrieval_heads.context_length", r.context_length));
  if (r.context_length == 1) {
    return FieldError("evals.retrieval_heads.context_length", "must be >= 2");
  }
  for (size_t i = 0; i < r.depths.size(); ++i) {
    if (!(r.depths[i] >= 0 && r.depths[i] <= 1)) {
      return FieldError(absl::StrCat("evals.retrieval_heads.depths[", i, "]"),
                        "must be in [0, 1]");
    }
  }
  if (r.top_heads < 1) {
    return FieldError("evals.retrieval_heads.top_heads", "must be >= 1");
  }
  return absl::OkStatus();
}

// A task name is a metric's suffix: letters, digits, '_', '-', '.'.
bool MetricSafe(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '-' || c == '.';
  });
}

// What an evaluation reads of its run: seq_len and data.
absl::Status ValidateRun(const TrainTask& run) {
  if (run.seq_len < 2) {
    return FieldError("config.seq_len",
                      absl::StrCat("must be >= 2, got ", run.seq_len));
  }
  const DataConfig& d = run.data;
  if (d.source != "synthetic" && d.source != "prepared") {
    return FieldError("config.data.source",
                      absl::StrCat("must be \"synthetic\" or \"prepared\", "
                                   "got '",
                                   d.source, "'"));
  }
  if (!(d.long_fraction >= 0 && d.long_fraction <= 1)) {
    return FieldError("config.data.long_fraction", "must be in [0, 1]");
  }
  if (d.source == "prepared" && d.long_dir.empty() && d.short_dir.empty()) {
    return FieldError("config.data.long_dir",
                      "is required for prepared data (a directory from "
                      "`hlab-data prepare`)");
  }
  return absl::OkStatus();
}

absl::Status ValidateRuler(const RulerSpec& r, int64_t seq_len) {
  eval::ruler::RulerConfig config;
  config.tasks = r.tasks;
  config.lengths = r.lengths;
  if (config.lengths.empty()) config.lengths = {seq_len};
  config.samples = r.samples;
  config.seed = r.seed;
  config.tokens_to_generate = r.tokens_to_generate;
  absl::Status s = eval::ruler::ValidateRulerConfig(config);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("evals.ruler.", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> EvalKinds::Names() const {
  std::vector<std::string> names;
  if (val_loss) names.push_back("val_loss");
  if (longppl) names.push_back("longppl");
  if (niah) names.push_back("niah");
  if (receptive_field) names.push_back("receptive_field");
  if (gradient_profile) names.push_back("gradient_profile");
  if (probing) names.push_back("probing");
  if (retrieval_heads) names.push_back("retrieval_heads");
  if (multiple_choice) names.push_back("multiple_choice");
  if (ruler) names.push_back("ruler");
  return names;
}

absl::Status ValidateMultipleChoice(const MultipleChoiceSpec& m,
                                    const std::string& where) {
  if (m.tasks.empty()) {
    return FieldError(where + ".tasks",
                      "must list at least one task ({\"file\": "
                      "\"questions.jsonl\"})");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < m.tasks.size(); ++i) {
    const MultipleChoiceTaskSpec& t = m.tasks[i];
    const std::string at = absl::StrCat(where, ".tasks[", i, "]");
    if (t.file.empty()) {
      return FieldError(at + ".file",
                        "is required (a JSONL file of questions: "
                        "{\"context\", \"choices\", \"gold\"} a line)");
    }
    const std::string name = MultipleChoiceTaskName(t);
    if (!MetricSafe(name)) {
      return FieldError(at + ".name",
                        absl::StrCat("'", name,
                                     "' must be letters, digits, '_', '-' "
                                     "or '.' (it names the metrics "
                                     "mc_acc/<name>)"));
    }
    if (!names.insert(name).second) {
      return FieldError(at + ".name",
                        absl::StrCat("'", name,
                                     "' names two tasks: give each a "
                                     "distinct name"));
    }
    HLAB_RETURN_IF_ERROR(
        RequireNonNegative(at + ".num_fewshot", t.num_fewshot));
    HLAB_RETURN_IF_ERROR(RequireNonNegative(at + ".limit", t.limit));
    if (t.num_fewshot > 0 && t.fewshot_file.empty()) {
      return FieldError(at + ".fewshot_file",
                        "is required with num_fewshot > 0 (the file the "
                        "examples are drawn from; it may be the task's own "
                        "file)");
    }
  }
  return absl::OkStatus();
}

std::string MultipleChoiceTaskName(const MultipleChoiceTaskSpec& spec) {
  if (!spec.name.empty()) return spec.name;
  std::string base = spec.file.substr(spec.file.find_last_of('/') + 1);
  const size_t dot = base.find('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

bool ValidValLossDocuments(const std::string& documents) {
  return documents == kValLossMixture || documents == kValLossShort ||
         documents == kValLossLong;
}

const std::vector<std::string>& AllEvalNames() {
  static const auto* names = [] {
    EvalKinds all;
    all.val_loss.emplace();
    all.longppl.emplace();
    all.niah.emplace();
    all.receptive_field.emplace();
    all.gradient_profile.emplace();
    all.probing.emplace();
    all.retrieval_heads.emplace();
    all.multiple_choice.emplace();
    all.ruler.emplace();
    return new std::vector<std::string>(all.Names());
  }();
  return *names;
}

absl::Status ValidateEvalTask(const EvalTask& t) {
  if (t.kind != "eval") {
    return FieldError("kind",
                      absl::StrCat("must be \"eval\", got '", t.kind,
                                   "' (training tasks go to hlab-train)"));
  }
  if (t.step < -1) {
    return FieldError("step", "must be >= 0 (or -1: the checkpoint's step)");
  }
  if (t.checkpoint.empty()) {
    return FieldError("checkpoint",
                      "is required (the checkpoint file to evaluate)");
  }
  HLAB_RETURN_IF_ERROR(RequireNonNegative("threads", t.threads));
  HLAB_RETURN_IF_ERROR(ValidateRun(t.run));
  const EvalKinds& e = t.evals;
  if (e.val_loss) HLAB_RETURN_IF_ERROR(ValidateValLoss(*e.val_loss));
  if (e.longppl) HLAB_RETURN_IF_ERROR(ValidateLongPpl(*e.longppl));
  if (e.niah) HLAB_RETURN_IF_ERROR(ValidateNiah(*e.niah));
  if (e.receptive_field) HLAB_RETURN_IF_ERROR(ValidateReceptiveField(t));
  if (e.gradient_profile) {
    HLAB_RETURN_IF_ERROR(ValidateGradientProfile(*e.gradient_profile));
  }
  if (e.probing) HLAB_RETURN_IF_ERROR(ValidateProbing(*e.probing));
  if (e.retrieval_heads) {
    HLAB_RETURN_IF_ERROR(ValidateRetrievalHeads(*e.retrieval_heads));
  }
  if (e.multiple_choice) {
    HLAB_RETURN_IF_ERROR(
        ValidateMultipleChoice(*e.multiple_choice, "evals.multiple_choice"));
  }
  if (e.ruler) HLAB_RETURN_IF_ERROR(ValidateRuler(*e.ruler, t.run.seq_len));
  if (e.Names().empty()) {
    return FieldError("evals",
                      "names no evaluation (val_loss, longppl, niah, "
                      "receptive_field, gradient_profile, probing, "
                      "retrieval_heads, multiple_choice, ruler)");
  }
  return absl::OkStatus();
}

absl::StatusOr<EvalTask> ReadEvalTask(const Json& json) {
  EvalTask t;
  HLAB_RETURN_IF_ERROR(JsonFieldReader(json, "", "hlab-eval --help").Read(&t));
  return t;
}

absl::StatusOr<EvalTask> EvalTaskFromJson(absl::string_view text) {
  HLAB_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, "task"));
  HLAB_ASSIGN_OR_RETURN(EvalTask t, ReadEvalTask(j));
  HLAB_RETURN_IF_ERROR(ValidateEvalTask(t));
  return t;
}

absl::StatusOr<EvalTask> LoadEvalTask(const std::string& path) {
  return LoadTaskFile<EvalTask>(path, EvalTaskFromJson);
}

std::string EvalTaskToJson(const EvalTask& task) {
  return JsonFieldWriter::Write(task).dump(2);
}

LongPplPlan PlanLongPpl(const LongPplSpec& spec, int64_t seq_len) {
  LongPplPlan p;
  p.trunc_len =
      spec.trunc_len > 0 ? spec.trunc_len : std::max<int64_t>(1, seq_len / 4);
  p.sliding_window = spec.sliding_window > 0
                         ? spec.sliding_window
                         : std::max<int64_t>(1, seq_len / 16);
  p.context_len = spec.context_len > 0 ? spec.context_len : seq_len;
  return p;
}

int64_t ReceptiveFieldLimit(const ReceptiveFieldSpec& spec, int64_t seq_len) {
  if (spec.limit > 0) return spec.limit;
  return std::max<int64_t>(2, seq_len / 8 / 2 * 2);
}

}  // namespace hlab::task
