#include "train/task.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/status_macros.h"
#include "model/config/param_count.h"

namespace hlab::train {
namespace {

using Json = nlohmann::json;

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// Task-file fields, named by their path (common/json_reader.h).
class ObjectReader : public JsonObjectReader {
 public:
  ObjectReader(const Json& object, std::string where)
      : JsonObjectReader(object, std::move(where), "hlab-train --help") {}
};

absl::StatusOr<DecayShape> ParseDecayShape(const std::string& name) {
  if (name == "linear") return DecayShape::kLinear;
  if (name == "cosine") return DecayShape::kCosine;
  if (name == "1-sqrt") return DecayShape::kOneMinusSqrt;
  return FieldError(
      "schedule.decay_shape",
      absl::StrCat("must be linear, cosine or 1-sqrt, got '", name, "'"));
}

const char* DecayShapeName(DecayShape shape) {
  switch (shape) {
    case DecayShape::kLinear:
      return "linear";
    case DecayShape::kCosine:
      return "cosine";
    case DecayShape::kOneMinusSqrt:
      return "1-sqrt";
  }
  return "linear";
}

absl::Status ParseData(const ObjectReader& r, DataConfig* d) {
  HLAB_RETURN_IF_ERROR(r.CheckKeys({"source", "seed", "long_fraction",
                                    "synthetic", "long_dir", "short_dir"}));
  HLAB_RETURN_IF_ERROR(r.Get("source", &d->source));
  HLAB_RETURN_IF_ERROR(r.Get("seed", &d->seed));
  HLAB_RETURN_IF_ERROR(r.Get("long_fraction", &d->long_fraction));
  HLAB_RETURN_IF_ERROR(r.Get("long_dir", &d->long_dir));
  HLAB_RETURN_IF_ERROR(r.Get("short_dir", &d->short_dir));
  if (r.Has("synthetic")) {
    ObjectReader s(r.At("synthetic"), r.Path("synthetic"));
    SyntheticDataConfig& c = d->synthetic;
    HLAB_RETURN_IF_ERROR(
        s.CheckKeys({"long_min_tokens", "long_max_tokens", "short_min_tokens",
                     "short_max_tokens", "min_distance", "binding_rate"}));
    HLAB_RETURN_IF_ERROR(s.Get("long_min_tokens", &c.long_min_tokens));
    HLAB_RETURN_IF_ERROR(s.Get("long_max_tokens", &c.long_max_tokens));
    HLAB_RETURN_IF_ERROR(s.Get("short_min_tokens", &c.short_min_tokens));
    HLAB_RETURN_IF_ERROR(s.Get("short_max_tokens", &c.short_max_tokens));
    HLAB_RETURN_IF_ERROR(s.Get("min_distance", &c.min_distance));
    HLAB_RETURN_IF_ERROR(s.Get("binding_rate", &c.binding_rate));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainTask> ParseTask(const Json& j) {
  TrainTask t;
  ObjectReader r(j, "");
  HLAB_RETURN_IF_ERROR(r.CheckKeys({"name",
                                    "model",
                                    "match_params",
                                    "data",
                                    "seq_len",
                                    "batch_tokens",
                                    "micro_batch_tokens",
                                    "budget_tokens",
                                    "tokens_per_param",
                                    "optimizer",
                                    "schedule",
                                    "stop_at_tokens",
                                    "branch_budgets_tokens",
                                    "init_from",
                                    "checkpoint",
                                    "resume",
                                    "seed",
                                    "threads",
                                    "device",
                                    "bf16",
                                    "log_every_steps",
                                    "eval"}));
  HLAB_RETURN_IF_ERROR(r.Get("name", &t.name));
  if (!r.Has("model")) return FieldError("model", "is required");
  {
    auto model = model::ModelConfigFromJson(r.At("model").dump());
    if (!model.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.", model.status().message()));
    }
    t.model = *std::move(model);
  }
  HLAB_RETURN_IF_ERROR(r.Get("match_params", &t.match_params));
  if (r.Has("data")) {
    HLAB_RETURN_IF_ERROR(
        ParseData(ObjectReader(r.At("data"), "data"), &t.data));
  }
  HLAB_RETURN_IF_ERROR(r.Get("seq_len", &t.seq_len));
  HLAB_RETURN_IF_ERROR(r.Get("batch_tokens", &t.batch_tokens));
  HLAB_RETURN_IF_ERROR(r.Get("micro_batch_tokens", &t.micro_batch_tokens));
  HLAB_RETURN_IF_ERROR(r.Get("budget_tokens", &t.budget_tokens));
  HLAB_RETURN_IF_ERROR(r.Get("tokens_per_param", &t.tokens_per_param));
  if (r.Has("optimizer")) {
    ObjectReader o(r.At("optimizer"), "optimizer");
    HLAB_RETURN_IF_ERROR(o.CheckKeys(
        {"peak_lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip"}));
    HLAB_RETURN_IF_ERROR(o.Get("peak_lr", &t.optimizer.peak_lr));
    HLAB_RETURN_IF_ERROR(o.Get("beta1", &t.optimizer.beta1));
    HLAB_RETURN_IF_ERROR(o.Get("beta2", &t.optimizer.beta2));
    HLAB_RETURN_IF_ERROR(o.Get("eps", &t.optimizer.eps));
    HLAB_RETURN_IF_ERROR(o.Get("weight_decay", &t.optimizer.weight_decay));
    HLAB_RETURN_IF_ERROR(o.Get("grad_clip", &t.optimizer.grad_clip));
  }
  if (r.Has("schedule")) {
    ObjectReader s(r.At("schedule"), "schedule");
    HLAB_RETURN_IF_ERROR(s.CheckKeys(
        {"warmup_steps", "decay_fraction", "decay_shape", "min_lr_ratio"}));
    HLAB_RETURN_IF_ERROR(s.Get("warmup_steps", &t.schedule.warmup_steps));
    HLAB_RETURN_IF_ERROR(s.Get("decay_fraction", &t.schedule.decay_fraction));
    HLAB_RETURN_IF_ERROR(s.Get("min_lr_ratio", &t.schedule.min_lr_ratio));
    std::string shape = "linear";
    HLAB_RETURN_IF_ERROR(s.Get("decay_shape", &shape));
    HLAB_ASSIGN_OR_RETURN(t.schedule.decay_shape, ParseDecayShape(shape));
  }
  HLAB_RETURN_IF_ERROR(r.Get("stop_at_tokens", &t.stop_at_tokens));
  if (r.Has("branch_budgets_tokens")) {
    const Json& list = r.At("branch_budgets_tokens");
    if (!list.is_array()) {
      return FieldError("branch_budgets_tokens", "must be a list of integers");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer()) {
        return FieldError(absl::StrCat("branch_budgets_tokens[", i, "]"),
                          "must be an integer");
      }
      t.branch_budgets_tokens.push_back(list[i].get<int64_t>());
    }
  }
  HLAB_RETURN_IF_ERROR(r.Get("init_from", &t.init_from));
  if (r.Has("checkpoint")) {
    ObjectReader c(r.At("checkpoint"), "checkpoint");
    HLAB_RETURN_IF_ERROR(
        c.CheckKeys({"dir", "every_steps", "keep_last", "resume_max_step"}));
    HLAB_RETURN_IF_ERROR(c.Get("dir", &t.checkpoint.dir));
    HLAB_RETURN_IF_ERROR(c.Get("every_steps", &t.checkpoint.every_steps));
    HLAB_RETURN_IF_ERROR(c.Get("keep_last", &t.checkpoint.keep_last));
    HLAB_RETURN_IF_ERROR(
        c.Get("resume_max_step", &t.checkpoint.resume_max_step));
  }
  HLAB_RETURN_IF_ERROR(r.Get("resume", &t.resume));
  HLAB_RETURN_IF_ERROR(r.Get("seed", &t.seed));
  HLAB_RETURN_IF_ERROR(r.Get("threads", &t.threads));
  HLAB_RETURN_IF_ERROR(r.Get("device", &t.device));
  HLAB_RETURN_IF_ERROR(r.Get("bf16", &t.bf16));
  HLAB_RETURN_IF_ERROR(r.Get("log_every_steps", &t.log_every_steps));
  if (r.Has("eval")) {
    ObjectReader e(r.At("eval"), "eval");
    HLAB_RETURN_IF_ERROR(e.CheckKeys({"every_steps", "sequences"}));
    HLAB_RETURN_IF_ERROR(e.Get("every_steps", &t.eval.every_steps));
    HLAB_RETURN_IF_ERROR(e.Get("sequences", &t.eval.sequences));
  }
  HLAB_RETURN_IF_ERROR(ValidateTrainTask(t));
  return t;
}

absl::Status RequirePositive(absl::string_view field, double value) {
  if (!(value > 0)) {
    return FieldError(field, absl::StrCat("must be > 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainTask(const TrainTask& t) {
  HLAB_RETURN_IF_ERROR(model::ValidateModelConfig(t.model));
  if (t.data.source != "synthetic" && t.data.source != "prepared") {
    return FieldError(
        "data.source",
        absl::StrCat("must be \"synthetic\" or \"prepared\", got '",
                     t.data.source, "'"));
  }
  if (!(t.data.long_fraction >= 0 && t.data.long_fraction <= 1)) {
    return FieldError(
        "data.long_fraction",
        absl::StrCat("must be in [0, 1], got ", t.data.long_fraction));
  }
  if (t.data.source == "prepared") {
    if (t.data.long_fraction > 0 && t.data.long_dir.empty()) {
      return FieldError("data.long_dir",
                        "is required when data.long_fraction > 0 (a directory "
                        "from `hlab-data prepare`)");
    }
    if (t.data.long_fraction < 1 && t.data.short_dir.empty()) {
      return FieldError("data.short_dir",
                        "is required when data.long_fraction < 1 (a directory "
                        "from `hlab-data prepare`)");
    }
  }
  HLAB_RETURN_IF_ERROR(
      RequirePositive("seq_len", static_cast<double>(t.seq_len)));
  HLAB_RETURN_IF_ERROR(
      RequirePositive("batch_tokens", static_cast<double>(t.batch_tokens)));
  if (t.batch_tokens % t.seq_len != 0) {
    return FieldError(
        "batch_tokens",
        absl::StrCat("must be a multiple of seq_len (", t.seq_len, "), got ",
                     t.batch_tokens, ": a batch is whole sequences"));
  }
  if (t.micro_batch_tokens != 0) {
    if (t.micro_batch_tokens < 0 || t.micro_batch_tokens % t.seq_len != 0 ||
        t.batch_tokens % t.micro_batch_tokens != 0) {
      return FieldError(
          "micro_batch_tokens",
          absl::StrCat("must be a multiple of seq_len (", t.seq_len,
                       ") that divides batch_tokens (", t.batch_tokens,
                       "), got ", t.micro_batch_tokens));
    }
  }
  if ((t.budget_tokens > 0) == (t.tokens_per_param > 0)) {
    return FieldError("budget_tokens",
                      "give exactly one of budget_tokens (> 0) or "
                      "tokens_per_param (> 0)");
  }
  if (t.budget_tokens < 0) {
    return FieldError("budget_tokens", "must be > 0");
  }
  if (t.tokens_per_param < 0) {
    return FieldError("tokens_per_param", "must be > 0");
  }
  const OptimizerConfig& o = t.optimizer;
  HLAB_RETURN_IF_ERROR(RequirePositive("optimizer.peak_lr", o.peak_lr));
  if (!(o.beta1 >= 0 && o.beta1 < 1)) {
    return FieldError("optimizer.beta1", "must be in [0, 1)");
  }
  if (!(o.beta2 >= 0 && o.beta2 < 1)) {
    return FieldError("optimizer.beta2", "must be in [0, 1)");
  }
  HLAB_RETURN_IF_ERROR(RequirePositive("optimizer.eps", o.eps));
  if (!(o.weight_decay >= 0)) {
    return FieldError("optimizer.weight_decay", "must be >= 0");
  }
  HLAB_RETURN_IF_ERROR(RequirePositive("optimizer.grad_clip", o.grad_clip));
  if (t.schedule.warmup_steps < 0) {
    return FieldError("schedule.warmup_steps", "must be >= 0");
  }
  if (!(t.schedule.decay_fraction >= 0 && t.schedule.decay_fraction <= 1)) {
    return FieldError("schedule.decay_fraction", "must be in [0, 1]");
  }
  if (!(t.schedule.min_lr_ratio >= 0 && t.schedule.min_lr_ratio <= 1)) {
    return FieldError("schedule.min_lr_ratio", "must be in [0, 1]");
  }
  if (t.stop_at_tokens < 0) return FieldError("stop_at_tokens", "must be >= 0");
  for (size_t i = 0; i < t.branch_budgets_tokens.size(); ++i) {
    if (t.branch_budgets_tokens[i] <= 0) {
      return FieldError(absl::StrCat("branch_budgets_tokens[", i, "]"),
                        "must be > 0");
    }
  }
  if (!t.branch_budgets_tokens.empty() && !t.init_from.empty()) {
    return FieldError("init_from",
                      "a trunk (branch_budgets_tokens) starts from scratch; "
                      "give init_from only for a decay task");
  }
  if ((!t.branch_budgets_tokens.empty() || t.checkpoint.every_steps > 0) &&
      t.checkpoint.dir.empty()) {
    return FieldError("checkpoint.dir",
                      "is required to save branch or periodic checkpoints");
  }
  if (t.checkpoint.every_steps < 0) {
    return FieldError("checkpoint.every_steps", "must be >= 0");
  }
  if (t.checkpoint.resume_max_step < -1) {
    return FieldError("checkpoint.resume_max_step", "must be >= -1");
  }
  if (t.checkpoint.keep_last < 1) {
    return FieldError("checkpoint.keep_last", "must be >= 1");
  }
  if (t.threads < 0) return FieldError("threads", "must be >= 0");
  if (t.device != "cpu" && t.device != "cuda") {
    return FieldError(
        "device",
        absl::StrCat("must be \"cpu\" or \"cuda\", got '", t.device, "'"));
  }
  if (t.log_every_steps < 1)
    return FieldError("log_every_steps", "must be >= 1");
  if (t.eval.every_steps < 0)
    return FieldError("eval.every_steps", "must be >= 0");
  if (t.eval.sequences < 0) return FieldError("eval.sequences", "must be >= 0");
  return absl::OkStatus();
}

int64_t StepsForTokens(int64_t tokens, int64_t batch_tokens) {
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(static_cast<double>(tokens) /
                                           static_cast<double>(batch_tokens))));
}

absl::StatusOr<TrainPlan> PlanTraining(const TrainTask& t,
                                       int64_t non_embedding_params) {
  HLAB_RETURN_IF_ERROR(ValidateTrainTask(t));
  TrainPlan p;
  p.sequences_per_step = t.batch_tokens / t.seq_len;
  const int64_t micro =
      t.micro_batch_tokens > 0 ? t.micro_batch_tokens : t.batch_tokens;
  p.micro_batches = t.batch_tokens / micro;
  p.sequences_per_micro_batch = micro / t.seq_len;
  p.budget_tokens = t.budget_tokens > 0
                        ? t.budget_tokens
                        : static_cast<int64_t>(std::llround(
                              t.tokens_per_param *
                              static_cast<double>(non_embedding_params)));
  p.total_steps = StepsForTokens(p.budget_tokens, t.batch_tokens);
  p.schedule = {.peak_lr = t.optimizer.peak_lr,
                .warmup_steps = t.schedule.warmup_steps,
                .total_steps = p.total_steps,
                .decay_fraction = t.schedule.decay_fraction,
                .min_lr_ratio = t.schedule.min_lr_ratio,
                .shape = t.schedule.decay_shape};
  if (t.schedule.warmup_steps >= p.total_steps) {
    return FieldError(
        t.budget_tokens > 0 ? "budget_tokens" : "tokens_per_param",
        absl::StrCat("the budget (", p.budget_tokens,
                     " tokens = ", p.total_steps, " steps of ", t.batch_tokens,
                     " tokens) is not larger than schedule.warmup_steps (",
                     t.schedule.warmup_steps,
                     "): raise the budget or lower the warmup"));
  }
  HLAB_RETURN_IF_ERROR(ValidateWsdConfig(p.schedule));
  std::vector<int64_t> budgets = t.branch_budgets_tokens;
  std::sort(budgets.begin(), budgets.end());
  for (int64_t budget : budgets) {
    if (budget > p.budget_tokens) {
      return FieldError(
          "branch_budgets_tokens",
          absl::StrCat(budget, " exceeds the trunk's budget (", p.budget_tokens,
                       "): the trunk's budget must be the largest"));
    }
    WsdConfig branch = p.schedule;
    branch.total_steps = StepsForTokens(budget, t.batch_tokens);
    const int64_t step = WsdSchedule(branch).DecayStart();
    const int64_t unclamped =
        branch.total_steps -
        static_cast<int64_t>(std::llround(
            branch.decay_fraction * static_cast<double>(branch.total_steps)));
    if (unclamped < t.schedule.warmup_steps) {
      return FieldError(
          "branch_budgets_tokens",
          absl::StrCat("budget ", budget,
                       " decays before the warmup ends (step ", step,
                       " < schedule.warmup_steps ", t.schedule.warmup_steps,
                       "): it cannot share a stable phase"));
    }
    p.branch_steps.push_back(step);
    p.branch_budgets.push_back(budget);
  }
  if (t.stop_at_tokens > 0) {
    p.stop_step = std::min(p.total_steps,
                           StepsForTokens(t.stop_at_tokens, t.batch_tokens));
  } else if (!p.branch_steps.empty()) {
    p.stop_step = p.branch_steps.back();
  } else {
    p.stop_step = p.total_steps;
  }
  return p;
}

absl::StatusOr<TrainTask> TrainTaskFromJson(absl::string_view text) {
  HLAB_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, "task"));
  return ParseTask(j);
}

absl::StatusOr<TrainTask> LoadTrainTask(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read task file '", path, "'"));
  }
  std::stringstream text;
  text << in.rdbuf();
  auto task = TrainTaskFromJson(text.str());
  if (!task.ok()) {
    return absl::Status(task.status().code(),
                        absl::StrCat(path, ": ", task.status().message()));
  }
  return task;
}

std::string TrainTaskToJson(const TrainTask& t) {
  Json j;
  j["name"] = t.name;
  j["model"] = Json::parse(model::ModelConfigToJson(t.model));
  j["match_params"] = t.match_params;
  Json data = {{"source", t.data.source},
               {"seed", t.data.seed},
               {"long_fraction", t.data.long_fraction}};
  const SyntheticDataConfig& s = t.data.synthetic;
  data["synthetic"] = {{"long_min_tokens", s.long_min_tokens},
                       {"long_max_tokens", s.long_max_tokens},
                       {"short_min_tokens", s.short_min_tokens},
                       {"short_max_tokens", s.short_max_tokens},
                       {"min_distance", s.min_distance},
                       {"binding_rate", s.binding_rate}};
  if (!t.data.long_dir.empty()) data["long_dir"] = t.data.long_dir;
  if (!t.data.short_dir.empty()) data["short_dir"] = t.data.short_dir;
  j["data"] = data;
  j["seq_len"] = t.seq_len;
  j["batch_tokens"] = t.batch_tokens;
  j["micro_batch_tokens"] = t.micro_batch_tokens;
  if (t.budget_tokens > 0) j["budget_tokens"] = t.budget_tokens;
  if (t.tokens_per_param > 0) j["tokens_per_param"] = t.tokens_per_param;
  j["optimizer"] = {{"peak_lr", t.optimizer.peak_lr},
                    {"beta1", t.optimizer.beta1},
                    {"beta2", t.optimizer.beta2},
                    {"eps", t.optimizer.eps},
                    {"weight_decay", t.optimizer.weight_decay},
                    {"grad_clip", t.optimizer.grad_clip}};
  j["schedule"] = {{"warmup_steps", t.schedule.warmup_steps},
                   {"decay_fraction", t.schedule.decay_fraction},
                   {"decay_shape", DecayShapeName(t.schedule.decay_shape)},
                   {"min_lr_ratio", t.schedule.min_lr_ratio}};
  j["stop_at_tokens"] = t.stop_at_tokens;
  j["branch_budgets_tokens"] = t.branch_budgets_tokens;
  j["init_from"] = t.init_from;
  j["checkpoint"] = {{"dir", t.checkpoint.dir},
                     {"every_steps", t.checkpoint.every_steps},
                     {"keep_last", t.checkpoint.keep_last},
                     {"resume_max_step", t.checkpoint.resume_max_step}};
  j["resume"] = t.resume;
  j["seed"] = t.seed;
  j["threads"] = t.threads;
  j["device"] = t.device;
  j["bf16"] = t.bf16;
  j["log_every_steps"] = t.log_every_steps;
  j["eval"] = {{"every_steps", t.eval.every_steps},
               {"sequences", t.eval.sequences}};
  return j.dump(2);
}

absl::StatusOr<std::string> CheckTrainTask(const TrainTask& task) {
  model::ModelConfig config = task.model;
  if (task.match_params) {
    HLAB_ASSIGN_OR_RETURN(auto matched, model::MatchParameters(config));
    config = matched.config;
  }
  const auto count = model::CountParameters(config);
  HLAB_ASSIGN_OR_RETURN(TrainPlan plan,
                        PlanTraining(task, count.non_embedding));
  Json j = {{"non_embedding_params", count.non_embedding},
            {"total_params", count.total},
            {"budget_tokens", plan.budget_tokens},
            {"total_steps", plan.total_steps},
            {"stop_step", plan.stop_step},
            {"branch_steps", plan.branch_steps},
            {"branch_budgets_tokens", plan.branch_budgets},
            {"micro_batches", plan.micro_batches},
            {"sequences_per_step", plan.sequences_per_step}};
  return j.dump();
}

std::string ExampleTaskJson() {
  return R"({
  "name": "example-swa",
  "model": {"arch": "swa-32", "d_model": 64, "n_layers": 4, "n_heads": 4,
            "n_kv_heads": 2, "vocab_size": 258},
  "data": {"source": "synthetic", "seed": 0, "long_fraction": 0.5},
  "seq_len": 128,
  "batch_tokens": 2048,
  "budget_tokens": 204800,
  "optimizer": {"peak_lr": 0.003},
  "schedule": {"warmup_steps": 20, "decay_fraction": 0.1,
               "decay_shape": "linear", "min_lr_ratio": 0.1},
  "checkpoint": {"dir": "", "every_steps": 0, "keep_last": 2},
  "seed": 0,
  "threads": 0,
  "log_every_steps": 5,
  "eval": {"every_steps": 25, "sequences": 32}
}
)";
}

}  // namespace hlab::train
