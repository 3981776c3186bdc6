// Parsing of EVAL task files (eval/eval_task.h): fields, defaults, help.
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "eval/eval_task.h"
#include "model/config/model_config.h"

namespace hlab::eval {
namespace {

using Json = nlohmann::json;

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// Task-file fields, named by their path (common/json_reader.h).
class ObjectReader : public JsonObjectReader {
 public:
  ObjectReader(const Json& object, std::string where)
      : JsonObjectReader(object, std::move(where), "hlab-eval --help") {}
};

absl::Status ParseData(const ObjectReader& r, EvalDataSpec* d) {
  HLAB_RETURN_IF_ERROR(
      r.CheckKeys({"jsonl", "text_field", "prepared", "split", "tokenizer"}));
  HLAB_RETURN_IF_ERROR(r.Get("jsonl", &d->jsonl));
  HLAB_RETURN_IF_ERROR(r.Get("text_field", &d->text_field));
  HLAB_RETURN_IF_ERROR(r.Get("prepared", &d->prepared));
  HLAB_RETURN_IF_ERROR(r.Get("split", &d->split));
  HLAB_RETURN_IF_ERROR(r.Get("tokenizer", &d->tokenizer));
  if (!d->jsonl.empty() && !d->prepared.empty()) {
    return FieldError(r.Path("prepared"),
                      "give at most one of jsonl and prepared");
  }
  if (d->split != "train" && d->split != "heldout") {
    return FieldError(
        r.Path("split"),
        absl::StrCat("must be \"train\" or \"heldout\", got '", d->split, "'"));
  }
  if (!d->tokenizer.empty() && d->jsonl.empty()) {
    return FieldError(r.Path("tokenizer"),
                      "applies to jsonl data only (a prepared dataset "
                      "carries its tokenizer)");
  }
  if (d->text_field.empty()) {
    return FieldError(r.Path("text_field"), "must not be empty");
  }
  return absl::OkStatus();
}

absl::Status RequireNonNegative(const std::string& field, int64_t v) {
  if (v < 0) return FieldError(field, absl::StrCat("must be >= 0, got ", v));
  return absl::OkStatus();
}

absl::Status ParseValLoss(const ObjectReader& r, ValLossSpec* v) {
  HLAB_RETURN_IF_ERROR(r.CheckKeys({"tokens", "batch_sequences", "data"}));
  HLAB_RETURN_IF_ERROR(r.Get("tokens", &v->tokens));
  HLAB_RETURN_IF_ERROR(r.Get("batch_sequences", &v->batch_sequences));
  HLAB_RETURN_IF_ERROR(RequireNonNegative(r.Path("tokens"), v->tokens));
  if (v->batch_sequences < 1) {
    return FieldError(r.Path("batch_sequences"), "must be >= 1");
  }
  if (r.Has("data")) {
    HLAB_RETURN_IF_ERROR(
        ParseData(ObjectReader(r.At("data"), r.Path("data")), &v->data));
  }
  return absl::OkStatus();
}

absl::Status ParseLongPpl(const ObjectReader& r, LongPplSpec* l) {
  HLAB_RETURN_IF_ERROR(r.CheckKeys(
      {"trunc_len", "sliding_window", "context_len", "alpha", "beta",
       "min_key_tokens", "documents", "reference", "data"}));
  HLAB_RETURN_IF_ERROR(r.Get("trunc_len", &l->trunc_len));
  HLAB_RETURN_IF_ERROR(r.Get("sliding_window", &l->sliding_window));
  HLAB_RETURN_IF_ERROR(r.Get("context_len", &l->context_len));
  HLAB_RETURN_IF_ERROR(r.Get("alpha", &l->alpha));
  HLAB_RETURN_IF_ERROR(r.Get("beta", &l->beta));
  HLAB_RETURN_IF_ERROR(r.Get("min_key_tokens", &l->min_key_tokens));
  HLAB_RETURN_IF_ERROR(r.Get("documents", &l->documents));
  for (const char* f : {"trunc_len", "sliding_window", "context_len",
                        "min_key_tokens", "documents"}) {
    int64_t v = 0;
    HLAB_RETURN_IF_ERROR(r.Get(f, &v));
    HLAB_RETURN_IF_ERROR(RequireNonNegative(r.Path(f), v));
  }
  if (!r.Has("reference")) {
    return FieldError(r.Path("reference"),
                      "is required (the reference model that selects key "
                      "tokens: {\"checkpoint\": \"/path/to/file.ckpt\"})");
  }
  ObjectReader ref(r.At("reference"), r.Path("reference"));
  HLAB_RETURN_IF_ERROR(
      ref.CheckKeys({"run_id", "checkpoint_path", "checkpoint"}));
  HLAB_RETURN_IF_ERROR(ref.Get("run_id", &l->reference_run_id));
  HLAB_RETURN_IF_ERROR(
      ref.Get("checkpoint_path", &l->reference_checkpoint_path));
  HLAB_RETURN_IF_ERROR(ref.Get("checkpoint", &l->reference_checkpoint));
  if (l->reference_checkpoint.empty()) {
    l->reference_checkpoint = l->reference_checkpoint_path;
  }
  if (l->reference_checkpoint.empty()) {
    return FieldError(
        ref.Path("checkpoint"),
        l->reference_run_id.empty()
            ? "is required (the reference checkpoint file)"
            : absl::StrCat("is required: the reference run ",
                           l->reference_run_id,
                           " was not resolved to a checkpoint file (it must "
                           "have SUCCEEDED; the coordinator fills this in)"));
  }
  if (r.Has("data")) {
    HLAB_RETURN_IF_ERROR(
        ParseData(ObjectReader(r.At("data"), r.Path("data")), &l->data));
  }
  return absl::OkStatus();
}

absl::Status ParseNiah(const ObjectReader& r, NiahSpec* n) {
  HLAB_RETURN_IF_ERROR(
      r.CheckKeys({"kinds", "context_lengths", "depths", "samples",
                   "candidates", "seed", "greedy", "haystack", "tokenizer"}));
  HLAB_RETURN_IF_ERROR(r.GetList("kinds", &n->kinds));
  HLAB_RETURN_IF_ERROR(r.GetList("context_lengths", &n->context_lengths));
  HLAB_RETURN_IF_ERROR(r.GetList("depths", &n->depths));
  HLAB_RETURN_IF_ERROR(r.Get("samples", &n->samples));
  HLAB_RETURN_IF_ERROR(r.Get("candidates", &n->candidates));
  HLAB_RETURN_IF_ERROR(r.Get("seed", &n->seed));
  HLAB_RETURN_IF_ERROR(r.Get("greedy", &n->greedy));
  HLAB_RETURN_IF_ERROR(r.Get("haystack", &n->haystack));
  HLAB_RETURN_IF_ERROR(r.Get("tokenizer", &n->tokenizer));
  if (n->haystack != "noise" && n->haystack != "synthetic") {
    return FieldError(
        r.Path("haystack"),
        absl::StrCat("must be noise or synthetic, got '", n->haystack, "'"));
  }
  const std::set<std::string> kinds = {"single", "multikey", "multivalue",
                                       "passkey"};
  for (size_t i = 0; i < n->kinds.size(); ++i) {
    if (kinds.count(n->kinds[i]) == 0) {
      return FieldError(
          absl::StrCat(r.Path("kinds"), "[", i, "]"),
          absl::StrCat("must be single, multikey, multivalue or passkey, "
                       "got '",
                       n->kinds[i], "'"));
    }
  }
  for (size_t i = 0; i < n->context_lengths.size(); ++i) {
    if (n->context_lengths[i] < 2) {
      return FieldError(absl::StrCat(r.Path("context_lengths"), "[", i, "]"),
                        "must be >= 2");
    }
  }
  for (size_t i = 0; i < n->depths.size(); ++i) {
    if (!(n->depths[i] >= 0 && n->depths[i] <= 1)) {
      return FieldError(absl::StrCat(r.Path("depths"), "[", i, "]"),
                        "must be in [0, 1]");
    }
  }
  if (n->samples < 1) return FieldError(r.Path("samples"), "must be >= 1");
  if (n->candidates < 2) {
    return FieldError(r.Path("candidates"), "must be >= 2");
  }
  return absl::OkStatus();
}

// The coordinator's canonical run config (coordinator/sweep/run_config.h).
absl::Status ParseCanonicalRun(const ObjectReader& r, train::TrainTask* t) {
  HLAB_RETURN_IF_ERROR(
      r.CheckKeys({"format", "model", "seq_len", "batch_tokens", "tokens",
                   "steps", "seed", "data", "schedule"}));
  int64_t unused = 0;
  for (const char* f : {"batch_tokens", "tokens", "steps"}) {
    HLAB_RETURN_IF_ERROR(r.Get(f, &unused));
  }
  HLAB_RETURN_IF_ERROR(r.Get("seed", &t->seed));
  if (!r.Has("seq_len")) return FieldError(r.Path("seq_len"), "is required");
  HLAB_RETURN_IF_ERROR(r.Get("seq_len", &t->seq_len));
  if (t->seq_len < 2) return FieldError(r.Path("seq_len"), "must be >= 2");
  if (!r.Has("model")) return FieldError(r.Path("model"), "is required");
  auto model = model::ModelConfigFromJson(r.At("model").dump());
  if (!model.ok()) {
    return FieldError(r.Path("model"), model.status().message());
  }
  t->model = *std::move(model);
  if (r.Has("schedule") && !r.At("schedule").is_object()) {
    return FieldError(r.Path("schedule"), "must be an object");
  }
  if (r.Has("data")) {
    ObjectReader d(r.At("data"), r.Path("data"));
    HLAB_RETURN_IF_ERROR(
        d.CheckKeys({"source", "path", "seed", "long_fraction"}));
    HLAB_RETURN_IF_ERROR(d.Get("source", &t->data.source));
    HLAB_RETURN_IF_ERROR(d.Get("seed", &t->data.seed));
    HLAB_RETURN_IF_ERROR(d.Get("long_fraction", &t->data.long_fraction));
    std::string path;
    HLAB_RETURN_IF_ERROR(d.Get("path", &path));
    if (t->data.source == "prepared") {
      if (path.empty()) {
        return FieldError(d.Path("path"), "is required for prepared data");
      }
      // As coordinator/trainer_task.cc lays out a prepared run's data.
      t->data.long_dir = path + "/long";
      t->data.short_dir = path + "/short";
    } else if (t->data.source != "synthetic") {
      return FieldError(d.Path("source"),
                        absl::StrCat("must be \"synthetic\" or \"prepared\", "
                                     "got '",
                                     t->data.source, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseRunConfig(const Json& config, train::TrainTask* t) {
  ObjectReader r(config, "config");
  if (!config.is_object()) return FieldError("config", "must be an object");
  if (config.contains("format")) {
    std::string format;
    HLAB_RETURN_IF_ERROR(r.Get("format", &format));
    if (format != "hlab.run.v1") {
      return FieldError("config.format",
                        absl::StrCat("must be \"hlab.run.v1\" (a run's "
                                     "canonical config), got '",
                                     format, "'"));
    }
    return ParseCanonicalRun(r, t);
  }
  // Otherwise an hlab-train task (what a user trained with).
  auto task = train::TrainTaskFromJson(config.dump());
  if (!task.ok()) {
    return FieldError("config", absl::StrCat("not an hlab-train task (and no "
                                             "\"format\": \"hlab.run.v1\"): ",
                                             task.status().message()));
  }
  *t = *std::move(task);
  return absl::OkStatus();
}

absl::StatusOr<EvalTask> ParseTask(const Json& j) {
  EvalTask t;
  ObjectReader r(j, "");
  HLAB_RETURN_IF_ERROR(
      r.CheckKeys({"kind", "task_id", "run_id", "step", "checkpoint", "config",
                   "evals", "cache_dir", "threads", "allow_extrapolation"}));
  std::string kind = "eval";
  HLAB_RETURN_IF_ERROR(r.Get("kind", &kind));
  if (kind != "eval") {
    return FieldError("kind",
                      absl::StrCat("must be \"eval\", got '", kind,
                                   "' (training tasks go to hlab-train)"));
  }
  HLAB_RETURN_IF_ERROR(r.Get("task_id", &t.task_id));
  HLAB_RETURN_IF_ERROR(r.Get("run_id", &t.run_id));
  HLAB_RETURN_IF_ERROR(r.Get("step", &t.step));
  if (r.Has("step") && t.step < 0) return FieldError("step", "must be >= 0");
  HLAB_RETURN_IF_ERROR(r.Get("checkpoint", &t.checkpoint));
  if (t.checkpoint.empty()) {
    return FieldError("checkpoint",
                      "is required (the checkpoint file to evaluate)");
  }
  if (!r.Has("config")) {
    return FieldError("config",
                      "is required (the run's config: its seq_len and data)");
  }
  HLAB_RETURN_IF_ERROR(ParseRunConfig(r.At("config"), &t.run));
  HLAB_RETURN_IF_ERROR(r.Get("cache_dir", &t.cache_dir));
  HLAB_RETURN_IF_ERROR(r.Get("threads", &t.threads));
  HLAB_RETURN_IF_ERROR(RequireNonNegative("threads", t.threads));
  HLAB_RETURN_IF_ERROR(r.Get("allow_extrapolation", &t.allow_extrapolation));
  if (!r.Has("evals")) {
    return FieldError("evals",
                      "is required (one or more of val_loss, longppl, niah, "
                      "receptive_field, gradient_profile)");
  }
  ObjectReader e(r.At("evals"), "evals");
  HLAB_RETURN_IF_ERROR(e.CheckKeys(
      {"val_loss", "longppl", "niah", "receptive_field", "gradient_profile"}));
  if (e.Has("val_loss")) {
    t.val_loss.emplace();
    HLAB_RETURN_IF_ERROR(ParseValLoss(
        ObjectReader(e.At("val_loss"), "evals.val_loss"), &*t.val_loss));
  }
  if (e.Has("longppl")) {
    t.longppl.emplace();
    HLAB_RETURN_IF_ERROR(ParseLongPpl(
        ObjectReader(e.At("longppl"), "evals.longppl"), &*t.longppl));
  }
  if (e.Has("niah")) {
    t.niah.emplace();
    HLAB_RETURN_IF_ERROR(
        ParseNiah(ObjectReader(e.At("niah"), "evals.niah"), &*t.niah));
  }
  if (e.Has("receptive_field")) {
    ObjectReader rf(e.At("receptive_field"), "evals.receptive_field");
    HLAB_RETURN_IF_ERROR(rf.CheckKeys({"limit"}));
    t.receptive_field.emplace();
    HLAB_RETURN_IF_ERROR(rf.Get("limit", &t.receptive_field->limit));
    const int64_t h = t.receptive_field->limit;
    if (h < 0 || h == 1 || h % 2 != 0) {
      return FieldError("evals.receptive_field.limit",
                        absl::StrCat("must be an even number >= 2 (or 0 for "
                                     "seq_len / 8), got ",
                                     h));
    }
    const int64_t limit =
        ReceptiveFieldLimit(*t.receptive_field, t.run.seq_len);
    if (limit >= t.run.seq_len) {
      return FieldError("evals.receptive_field.limit",
                        absl::StrCat("must be below the context (seq_len ",
                                     t.run.seq_len, "), got ", limit));
    }
    if (!t.val_loss) {
      return FieldError("evals.receptive_field",
                        "needs evals.val_loss in the same task (its results "
                        "are the changes against it)");
    }
  }
  if (e.Has("gradient_profile")) {
    ObjectReader g(e.At("gradient_profile"), "evals.gradient_profile");
    HLAB_RETURN_IF_ERROR(g.CheckKeys({"sequences", "batch_sequences"}));
    t.gradient_profile.emplace();
    HLAB_RETURN_IF_ERROR(g.Get("sequences", &t.gradient_profile->sequences));
    HLAB_RETURN_IF_ERROR(
        g.Get("batch_sequences", &t.gradient_profile->batch_sequences));
    if (t.gradient_profile->sequences <= 0) {
      return FieldError("evals.gradient_profile.sequences", "must be > 0");
    }
    if (t.gradient_profile->batch_sequences <= 0) {
      return FieldError("evals.gradient_profile.batch_sequences",
                        "must be > 0");
    }
  }
  if (t.EvalNames().empty()) {
    return FieldError("evals",
                      "names no evaluation (val_loss, longppl, niah, "
                      "receptive_field, gradient_profile)");
  }
  return t;
}

}  // namespace

std::vector<std::string> EvalTask::EvalNames() const {
  std::vector<std::string> names;
  if (val_loss) names.push_back("val_loss");
  if (longppl) names.push_back("longppl");
  if (niah) names.push_back("niah");
  if (receptive_field) names.push_back("receptive_field");
  if (gradient_profile) names.push_back("gradient_profile");
  return names;
}

absl::StatusOr<EvalTask> EvalTaskFromJson(absl::string_view text) {
  HLAB_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, "task"));
  return ParseTask(j);
}

absl::StatusOr<EvalTask> LoadEvalTask(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read task file '", path, "'"));
  }
  std::stringstream text;
  text << in.rdbuf();
  auto task = EvalTaskFromJson(text.str());
  if (!task.ok()) {
    return absl::Status(task.status().code(),
                        absl::StrCat(path, ": ", task.status().message()));
  }
  return task;
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

std::string ExampleEvalTaskJson() {
  return R"({
  "kind": "eval",
  "task_id": "example-eval",
  "run_id": "example",
  "checkpoint": "/path/to/run/checkpoints/step-0000000100.ckpt",
  "config": {
    "name": "example-swa",
    "model": {"arch": "swa-32", "d_model": 64, "n_layers": 4, "n_heads": 4,
              "n_kv_heads": 2, "vocab_size": 258},
    "data": {"source": "synthetic", "seed": 0, "long_fraction": 0.5},
    "seq_len": 128,
    "batch_tokens": 2048,
    "budget_tokens": 204800
  },
  "evals": {
    "val_loss": {"tokens": 0},
    "longppl": {"trunc_len": 0, "sliding_window": 0, "context_len": 0,
                "reference": {"checkpoint":
                              "/path/to/reference/step-0000000400.ckpt"}}
  },
  "cache_dir": "/tmp/hlab-eval-cache",
  "threads": 0,
  "allow_extrapolation": false
}
)";
}

const char kEvalTaskFieldsHelp[] =
    R"(task fields (JSON object; unknown fields are errors):
  kind                 "eval" (default)
  task_id, run_id      copied into the records
  step                 the training step the results are recorded at
                       (default: the checkpoint's step)
  checkpoint           (required) the checkpoint file to evaluate
  config               (required) the run's config: the coordinator's
                       canonical run config ("format": "hlab.run.v1") or the
                       hlab-train task the model was trained with; seq_len
                       and data are read from it
  evals                (required) one or more of:
    val_loss           {"tokens": 0 (= 65536), "batch_sequences": 8,
                        "data": DATA}: mean NLL per token on held-out
                       sequences of seq_len
    longppl            {"trunc_len": 0 (= seq_len/4), "sliding_window": 0
                        (= seq_len/16), "context_len": 0 (= seq_len),
                        "alpha": 2, "beta": -2, "min_key_tokens": 10,
                        "documents": 0 (= 64, or all if fewer),
                        "reference": {"checkpoint": FILE (required),
                                      "run_id": "", "checkpoint_path": ""},
                        "data": DATA}: log(LongPPL) on key tokens the
                       reference selects (default data: the run's long
                       held-out documents)
    niah               {"kinds": [...], "context_lengths": [...],
                        "depths": [...], "samples": 20, "candidates": 8,
                        "seed": 0, "greedy": false, "haystack": "noise"
                        | "synthetic", "tokenizer": "" (= the model's)}:
                       needle-in-a-haystack accuracy by candidate
                       likelihood (greedy exact match too when greedy) per
                       kind, length and depth; context_lengths default
                       [seq_len], kinds all four, depths [0.1, 0.5, 0.9]
    receptive_field    {"limit": 0 (= seq_len/8, even)}: appendix D.1,
                       val_loss and log(LongPPL) again with the full-attention
                       layers restricted to keys [i-H, i] and, separately,
                       the efficient layers restricted (softmax exactly,
                       recurrent by windows of 3H/2, stride H/2, reset
                       state); results are the changes. Needs val_loss (and
                       measures log(LongPPL) changes when longppl is there)
    gradient_profile   {"sequences": 16, "batch_sequences": 8}: appendix
                       D.3, the mean input-gradient norm G(d) of the last
                       position's target logit at each distance d, on the
                       run's long held-out documents; result grad_reach
                       (where G falls to its far floor) with the binned
                       G / G_base in the details
  DATA                 {"jsonl": FILE, "text_field": "text",
                        "tokenizer": "" (= the model's)} or
                       {"prepared": DIR, "split": "heldout"}; absent: the
                       run's own held-out data
  cache_dir            where key tokens (and imported JSONL) are cached;
                       "" = no cache
  threads              0 = all cores
  allow_extrapolation  allow contexts beyond the trained seq_len for models
                       with full RoPE attention (default false)
)";

}  // namespace hlab::eval
