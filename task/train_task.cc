#include "task/train_task.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/config/model_config.h"

namespace hlab::task {
namespace {

using Json = nlohmann::json;

constexpr char kHelp[] = "hlab-train --help";

absl::Status RequirePositive(absl::string_view field, double value) {
  if (!(value > 0)) {
    return FieldError(field, absl::StrCat("must be > 0, got ", value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FieldCodec<model::ModelConfig>::Read(const Json& j,
                                                  const std::string& path,
                                                  model::ModelConfig* out) {
  if (!j.is_object()) return FieldError(path, "must be an object");
  absl::StatusOr<model::ModelConfig> model =
      model::ModelConfigFromJson(j.dump());
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".", model.status().message()));
  }
  *out = *std::move(model);
  return absl::OkStatus();
}

Json FieldCodec<model::ModelConfig>::Write(const model::ModelConfig& value) {
  return Json::parse(model::ModelConfigToJson(value));
}

absl::Status FieldCodec<DecayShape>::Read(const Json& j,
                                          const std::string& path,
                                          DecayShape* out) {
  if (!j.is_string()) return FieldError(path, "must be a string");
  const std::string name = j.get<std::string>();
  if (name == "linear") {
    *out = DecayShape::kLinear;
  } else if (name == "cosine") {
    *out = DecayShape::kCosine;
  } else if (name == "1-sqrt") {
    *out = DecayShape::kOneMinusSqrt;
  } else {
    return FieldError(path, absl::StrCat("must be linear, cosine or 1-sqrt, "
                                         "got '",
                                         name, "'"));
  }
  return absl::OkStatus();
}

Json FieldCodec<DecayShape>::Write(const DecayShape& value) {
  switch (value) {
    case DecayShape::kLinear:
      return "linear";
    case DecayShape::kCosine:
      return "cosine";
    case DecayShape::kOneMinusSqrt:
      return "1-sqrt";
  }
  return "linear";
}

absl::StatusOr<TrainTask> ReadTrainTask(const Json& json) {
  TrainTask t;
  HLAB_RETURN_IF_ERROR(JsonFieldReader(json, "", kHelp).Read(&t));
  return t;
}

absl::StatusOr<TrainTask> TrainTaskFromJson(absl::string_view text) {
  HLAB_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, "task"));
  HLAB_ASSIGN_OR_RETURN(TrainTask t, ReadTrainTask(j));
  HLAB_RETURN_IF_ERROR(ValidateTrainTask(t));
  return t;
}

absl::StatusOr<TrainTask> LoadTrainTask(const std::string& path) {
  return LoadTaskFile<TrainTask>(path, TrainTaskFromJson);
}

std::string TrainTaskToJson(const TrainTask& t) {
  return JsonFieldWriter::Write(t).dump(2);
}

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
  if ((!t.branch_budgets_tokens.empty() || t.checkpoint.every_steps > 0 ||
       t.checkpoint.keep_every_steps > 0) &&
      t.checkpoint.dir.empty()) {
    return FieldError("checkpoint.dir",
                      "is required to save branch, periodic or kept "
                      "checkpoints");
  }
  if (t.checkpoint.every_steps < 0) {
    return FieldError("checkpoint.every_steps", "must be >= 0");
  }
  if (t.checkpoint.keep_every_steps < 0) {
    return FieldError("checkpoint.keep_every_steps", "must be >= 0");
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
  if (t.analysis.q_grad_every_steps < 0) {
    return FieldError("analysis.q_grad_every_steps", "must be >= 0");
  }
  if (t.analysis.q_grad_every_steps > 0 &&
      std::none_of(t.model.layers.begin(), t.model.layers.end(),
                   [&](const model::MixerSpec& l) {
                     return l.kind == model::MixerKind::kFull ||
                            (l.kind ==
                                 model::MixerKind::kHeadwiseSlidingWindow &&
                             model::EffectiveWindowedHeads(t.model, l) <
                                 t.model.n_heads);
                   })) {
    return FieldError(
        "analysis.q_grad_every_steps",
        absl::StrCat("the model (arch '", t.model.arch,
                     "') has no full-attention head whose q_proj gradient "
                     "could be logged; set 0 or train a hybrid"));
  }
  return absl::OkStatus();
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

}  // namespace hlab::task
