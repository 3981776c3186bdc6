#include "coordinator/trainer_task.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/eval_inputs.h"

namespace hlab::coordinator {
namespace {

using nlohmann::json;

// The byte-level tokenizer of the synthetic corpus: 256 bytes + 2 specials.
constexpr int64_t kByteVocab = 258;

json TrainingTask(const store::Task& task, const json& config,
                  int64_t cpu_threads) {
  json t;
  t["name"] = task.spec.id;
  json model = config.at("model");
  const json& data_in = config.value("data", json::object());
  const std::string source = data_in.value("source", "synthetic");
  if (source == "synthetic") {
    model["vocab_size"] =
        std::max<int64_t>(model.value("vocab_size", int64_t{0}), kByteVocab);
  }
  t["model"] = model;
  json data = {{"source", source},
               {"long_fraction", data_in.value("long_fraction", 0.5)}};
  if (source == "prepared") {
    const std::string path = data_in.value("path", "");
    data["long_dir"] = path + "/long";
    data["short_dir"] = path + "/short";
  } else {
    data["seed"] = data_in.value("seed", int64_t{0});
  }
  t["data"] = data;
  t["seq_len"] = config.at("seq_len");
  t["batch_tokens"] = config.at("batch_tokens");
  t["budget_tokens"] = config.at("tokens");
  const json& s = config.value("schedule", json::object());
  t["optimizer"] = {{"peak_lr", s.value("peak_lr", 3e-3)},
                    {"weight_decay", s.value("weight_decay", 0.1)},
                    {"grad_clip", s.value("grad_clip", 1.0)}};
  t["schedule"] = {{"warmup_steps", s.value("warmup_steps", int64_t{0})},
                   {"decay_fraction", s.value("decay_fraction", 0.1)},
                   {"decay_shape", s.value("decay_shape", "linear")},
                   {"min_lr_ratio", s.value("min_lr_ratio", 0.1)}};
  t["seed"] = config.value("seed", int64_t{0});
  t["threads"] = cpu_threads;
  t["resume"] = true;
  t["log_every_steps"] = 1;
  t["eval"] = {{"every_steps", 0}, {"sequences", 32}};
  return t;
}

int64_t CpuThreads(const store::Task& task) {
  json resources = json::parse(task.spec.resources, nullptr, false);
  if (!resources.is_object()) return 0;
  return resources.value("cpu_threads", int64_t{0});
}

// Data-parallel ranks of the task: one per GPU, or its CPU ranks.
int64_t Ranks(const store::Task& task) {
  json resources = json::parse(task.spec.resources, nullptr, false);
  if (!resources.is_object()) return 1;
  const int64_t gpus = resources.value("gpus", int64_t{0});
  return std::max<int64_t>(
      1, gpus > 0 ? gpus : resources.value("cpu_ranks", int64_t{0}));
}

// Checkpoint every ~10% of the steps this task trains.
int64_t CheckpointEvery(const json& payload) {
  const int64_t steps = payload.value("end_step", int64_t{0}) -
                        payload.value("start_step", int64_t{0});
  return std::max<int64_t>(1, steps / 10);
}

bool IsHex(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c));
  });
}

// The newest checkpoint path of `run_id` of one kind ("" for any).
absl::StatusOr<std::string> CheckpointPath(store::QueryEngine& query,
                                           const std::string& run_id,
                                           const std::string& kind) {
  if (!IsHex(run_id)) {
    return absl::InvalidArgumentError(absl::StrCat("bad run id ", run_id));
  }
  std::string sql =
      absl::StrCat("SELECT path FROM checkpoints WHERE run_id = '", run_id, "'",
                   kind.empty() ? "" : absl::StrCat(" AND kind = '", kind, "'"),
                   " ORDER BY step DESC, id DESC LIMIT 1");
  HLAB_ASSIGN_OR_RETURN(store::QueryResult result, query.Run(sql, {}));
  if (result.rows.empty()) return std::string();
  const auto* path = std::get_if<std::string>(&result.rows[0][0]);
  return path ? *path : std::string();
}

// The evaluator's task file (docs/evaluation.md): the plan's draft with the
// checkpoint, the reference checkpoint of LongPPL, threads, and the fields
// the worker fills (cache_dir).
absl::StatusOr<std::string> EvalTask(const store::Task& task, const json& draft,
                                     const TrainerTaskInputs& inputs) {
  if (inputs.checkpoint_path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("eval ", task.spec.id, ": run ", task.spec.run_id,
                     " has no checkpoint to evaluate"));
  }
  json eval = draft;
  eval["kind"] = "eval";
  eval["task_id"] = task.spec.id;
  eval["checkpoint"] = inputs.checkpoint_path;
  if (!eval.contains("evals") || !eval["evals"].is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval ", task.spec.id, " names no evaluations"));
  }
  json& evals = eval["evals"];
  if (evals.contains("longppl")) {
    if (inputs.reference_checkpoint.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "eval ", task.spec.id, ": LongPPL has no reference checkpoint"));
    }
    if (!evals["longppl"].contains("reference") ||
        !evals["longppl"]["reference"].is_object()) {
      evals["longppl"]["reference"] = json::object();
    }
    evals["longppl"]["reference"]["checkpoint"] = inputs.reference_checkpoint;
  }
  eval["cache_dir"] = "";
  eval["threads"] = CpuThreads(task);
  const auto extrapolate = draft.find("allow_extrapolation");
  eval["allow_extrapolation"] = extrapolate != draft.end() &&
                                extrapolate->is_boolean() &&
                                extrapolate->get<bool>();
  return eval.dump();
}

// The LongPPL reference of an EVAL draft, resolved to a checkpoint file;
// "" when the task has no LongPPL evaluation.
absl::StatusOr<std::string> ReferenceCheckpoint(store::Store& store,
                                                store::QueryEngine& query,
                                                const json& draft) {
  const json* longppl = nullptr;
  if (draft.contains("evals") && draft["evals"].is_object() &&
      draft["evals"].contains("longppl")) {
    longppl = &draft["evals"]["longppl"];
  }
  if (longppl == nullptr) return std::string();
  std::string run_id, path;
  if (longppl->is_object() && longppl->contains("reference") &&
      (*longppl)["reference"].is_object()) {
    const json& r = (*longppl)["reference"];
    if (r.contains("run_id") && r["run_id"].is_string()) {
      run_id = r["run_id"].get<std::string>();
    }
    if (r.contains("checkpoint_path") && r["checkpoint_path"].is_string()) {
      path = r["checkpoint_path"].get<std::string>();
    }
  }
  return ResolveReferenceCheckpoint(store, query, run_id, path);
}

}  // namespace

absl::StatusOr<std::string> BuildTrainerTask(const store::Task& task,
                                             const TrainerTaskInputs& inputs) {
  json payload = json::parse(task.spec.payload, nullptr, false);
  if (!payload.is_object() || !payload.contains("draft") ||
      !payload["draft"].is_object() || !payload["draft"].contains("config")) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task.spec.id, " has no run config"));
  }
  const json& draft = payload["draft"];
  if (task.spec.kind == store::TaskKind::kEval) {
    return EvalTask(task, draft, inputs);
  }
  json t;
  try {
    t = TrainingTask(task, draft.at("config"), CpuThreads(task));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.spec.id, ": incomplete run config: ", e.what()));
  }
  t["checkpoint"] = {
      {"dir", ""}, {"every_steps", CheckpointEvery(payload)}, {"keep_last", 2}};
  // With W ranks a step is W micro-batches, one per rank (hlab-train needs
  // the micro-batch count divisible by the world size).
  const int64_t ranks = Ranks(task);
  if (ranks > 1) {
    const int64_t batch = t.value("batch_tokens", int64_t{0});
    const int64_t seq_len = t.value("seq_len", int64_t{1});
    if (seq_len <= 0 || batch % (seq_len * ranks) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", task.spec.id, ": ", ranks, " ranks do not divide the ",
          batch, "-token batch into whole sequences of ", seq_len));
    }
    t["micro_batch_tokens"] = batch / ranks;
  }
  if (task.spec.kind == store::TaskKind::kTrunk) {
    if (inputs.branch_budgets_tokens.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("trunk ", task.spec.id, " has no branch budgets"));
    }
    std::vector<int64_t> budgets = inputs.branch_budgets_tokens;
    std::sort(budgets.begin(), budgets.end());
    t["budget_tokens"] = budgets.back();
    t["branch_budgets_tokens"] = budgets;
  } else if (task.spec.kind == store::TaskKind::kDecay) {
    if (inputs.checkpoint_path.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("decay ", task.spec.id,
                       ": its trunk reported no branch checkpoint"
                       " for run ",
                       task.spec.run_id));
    }
    t["init_from"] = inputs.checkpoint_path;
  }
  return t.dump();
}

absl::StatusOr<std::string> BuildTrainerTaskFromStore(store::Store& store,
                                                      store::QueryEngine& query,
                                                      const store::Task& task) {
  TrainerTaskInputs inputs;
  switch (task.spec.kind) {
    case store::TaskKind::kTrunk: {
      json payload = json::parse(task.spec.payload, nullptr, false);
      if (payload.is_object()) {
        for (const auto& id : payload.value("run_ids", json::array())) {
          if (!id.is_string()) continue;
          HLAB_ASSIGN_OR_RETURN(store::Run run,
                                store.GetRun(id.get<std::string>()));
          inputs.branch_budgets_tokens.push_back(run.spec.budget_tokens);
        }
      }
      break;
    }
    case store::TaskKind::kDecay: {
      HLAB_ASSIGN_OR_RETURN(inputs.checkpoint_path,
                            CheckpointPath(query, task.spec.run_id, "branch"));
      break;
    }
    case store::TaskKind::kEval: {
      json payload = json::parse(task.spec.payload, nullptr, false);
      if (!payload.is_object()) break;  // BuildTrainerTask says why
      const auto step = payload.find("eval_step");
      absl::StatusOr<RunCheckpoint> checkpoint =
          FindRunCheckpoint(query, task.spec.run_id,
                            step != payload.end() && step->is_number_integer()
                                ? step->get<int64_t>()
                                : 0);
      if (checkpoint.status().code() == absl::StatusCode::kNotFound) {
        return absl::FailedPreconditionError(absl::StrCat(
            "eval ", task.spec.id, ": ", checkpoint.status().message()));
      }
      HLAB_RETURN_IF_ERROR(checkpoint.status());
      inputs.checkpoint_path = checkpoint->path;
      if (payload.contains("draft") && payload["draft"].is_object()) {
        HLAB_ASSIGN_OR_RETURN(
            inputs.reference_checkpoint,
            ReferenceCheckpoint(store, query, payload["draft"]));
      }
      break;
    }
    case store::TaskKind::kTrain:
      break;
  }
  return BuildTrainerTask(task, inputs);
}

}  // namespace hlab::coordinator
