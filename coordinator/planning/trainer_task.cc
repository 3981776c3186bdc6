#include "coordinator/planning/trainer_task.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/planning/eval_inputs.h"
#include "task/eval_task.h"
#include "task/run_config.h"
#include "task/train_task.h"

namespace hlab::coordinator {
namespace {

using nlohmann::json;

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

// The path of the newest checkpoint `where` selects ("" when none does).
absl::StatusOr<std::string> NewestCheckpointPath(store::QueryEngine& query,
                                                 const std::string& where) {
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      query.Run(absl::StrCat("SELECT path FROM checkpoints WHERE ", where,
                             " ORDER BY step DESC, id DESC LIMIT 1"),
                {}));
  if (result.rows.empty()) return std::string();
  const auto* path = std::get_if<std::string>(&result.rows[0][0]);
  return path ? *path : std::string();
}

// The newest checkpoint path of `run_id` of one kind ("" for any).
absl::StatusOr<std::string> CheckpointPath(store::QueryEngine& query,
                                           const std::string& run_id,
                                           const std::string& kind) {
  if (!IsHex(run_id)) {
    return absl::InvalidArgumentError(absl::StrCat("bad run id ", run_id));
  }
  return NewestCheckpointPath(
      query, absl::StrCat(
                 "run_id = '", run_id, "'",
                 kind.empty() ? "" : absl::StrCat(" AND kind = '", kind, "'")));
}

// The draft the plan stored (sweep/expand.h), InvalidArgument if the
// payload holds none.
absl::StatusOr<json> Draft(const store::Task& task) {
  json payload = json::parse(task.spec.payload, nullptr, false);
  if (!payload.is_object() || !payload.contains("draft") ||
      !payload["draft"].is_object() || !payload["draft"].contains("config")) {
    return absl::InvalidArgumentError(
        absl::StrCat("task ", task.spec.id, " has no run config"));
  }
  return payload["draft"];
}

// The EVAL draft ({"kind": "eval", task_id, run_id, step, evals, config}),
// read as an evaluator's task to be completed.
absl::StatusOr<task::EvalTask> EvalDraft(const store::Task& task) {
  HLAB_ASSIGN_OR_RETURN(json draft, Draft(task));
  absl::StatusOr<task::EvalTask> eval = task::ReadEvalTask(draft);
  if (!eval.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "eval ", task.spec.id, ": bad draft: ", eval.status().message()));
  }
  return eval;
}

// The evaluator's task file (docs/evaluation.md): the plan's draft with the
// checkpoint, the reference checkpoint of LongPPL and threads; the worker
// fills cache_dir.
absl::StatusOr<std::string> EvalTaskFile(const store::Task& task,
                                         const TrainerTaskInputs& inputs) {
  if (inputs.checkpoint_path.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("eval ", task.spec.id, ": run ", task.spec.run_id,
                     " has no checkpoint to evaluate"));
  }
  HLAB_ASSIGN_OR_RETURN(task::EvalTask eval, EvalDraft(task));
  eval.task_id = task.spec.id;
  eval.checkpoint = inputs.checkpoint_path;
  if (eval.evals.Names().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval ", task.spec.id, " names no evaluations"));
  }
  if (eval.evals.longppl && eval.evals.longppl->reference.hf_dir.empty() &&
      eval.evals.longppl->key_tokens.empty()) {
    if (inputs.reference_checkpoint.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "eval ", task.spec.id, ": LongPPL has no reference checkpoint"));
    }
    eval.evals.longppl->reference.checkpoint = inputs.reference_checkpoint;
  }
  eval.cache_dir.clear();
  eval.threads = task.spec.resources.cpu_threads;
  return task::EvalTaskToJson(eval);
}

// The LongPPL reference of an EVAL draft, resolved to a checkpoint file;
// "" when the task has no LongPPL evaluation, its reference is a Hugging
// Face directory (read on the worker), or its key tokens come from a file.
absl::StatusOr<std::string> ReferenceCheckpoint(store::Store& store,
                                                store::QueryEngine& query,
                                                const store::Task& task) {
  HLAB_ASSIGN_OR_RETURN(task::EvalTask eval, EvalDraft(task));
  if (!eval.evals.longppl) return std::string();
  const task::LongPplReference& r = eval.evals.longppl->reference;
  if (!r.hf_dir.empty() || !eval.evals.longppl->key_tokens.empty()) {
    return std::string();
  }
  return ResolveReferenceCheckpoint(store, query, r.run_id, r.checkpoint_path);
}

// A trunk's schedule is its largest run's (warmup and constant LR up to
// every branch point); it saves the branch checkpoints of the runs that
// branch at or before its end. A segment (sweep/expand.h) also stops at its
// end and starts from the branch checkpoint at its start.
absl::Status SetTrunk(const store::Task& task, const json& payload,
                      const TrainerTaskInputs& inputs, task::TrainTask* t) {
  const std::vector<int64_t>& budgets = inputs.branch_budgets_tokens;
  const json branches = payload.is_object()
                            ? payload.value("branch_points", json::array())
                            : json::array();
  if (budgets.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("trunk ", task.spec.id, " has no branch budgets"));
  }
  const int64_t start =
      payload.is_object() ? payload.value("start_step", int64_t{0}) : 0;
  const int64_t end =
      payload.is_object() ? payload.value("end_step", int64_t{0}) : 0;
  // The branch points name the runs in the order of the budgets (its
  // run_ids'); a task without them is a whole trunk.
  const bool per_run = branches.size() == budgets.size();
  int64_t last_branch = end;
  std::vector<int64_t> saved;
  for (size_t i = 0; i < budgets.size(); ++i) {
    const int64_t step = per_run && branches[i].is_object()
                             ? branches[i].value("step", end)
                             : end;
    last_branch = std::max(last_branch, step);
    if (step <= end) saved.push_back(budgets[i]);
  }
  std::sort(saved.begin(), saved.end());
  t->budget_tokens = *std::max_element(budgets.begin(), budgets.end());
  t->branch_budgets_tokens = saved;
  if (start == 0 && end == last_branch) return absl::OkStatus();  // whole
  t->stop_at_tokens = end * t->batch_tokens;
  if (start > 0) {
    if (inputs.checkpoint_path.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "trunk segment ", task.spec.id,
          ": the segment before it reported no branch checkpoint at step ",
          start));
    }
    t->init_from = inputs.checkpoint_path;
  }
  return absl::OkStatus();
}

// The branch checkpoint at `step` of the TRUNK task `trunk_id` ("" when it
// reported none).
absl::StatusOr<std::string> TrunkBranchPath(store::QueryEngine& query,
                                            const std::string& trunk_id,
                                            int64_t step) {
  const bool id_ok =
      !trunk_id.empty() &&
      std::all_of(trunk_id.begin(), trunk_id.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-';
      });
  if (!id_ok) {
    return absl::InvalidArgumentError(absl::StrCat("bad task id ", trunk_id));
  }
  return NewestCheckpointPath(
      query, absl::StrCat("task_id = '", trunk_id,
                          "' AND kind = 'branch' AND step = ", step));
}

}  // namespace

absl::StatusOr<std::string> BuildTrainerTask(const store::Task& task,
                                             const TrainerTaskInputs& inputs) {
  if (task.spec.kind == store::TaskKind::kEval) {
    return EvalTaskFile(task, inputs);
  }
  HLAB_ASSIGN_OR_RETURN(json draft, Draft(task));
  absl::StatusOr<task::RunConfig> run =
      task::ReadRunConfig(draft.at("config"), "config");
  absl::StatusOr<task::TrainTask> built =
      run.ok() ? task::TrainTaskForRun(*run) : run.status();
  if (!built.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", task.spec.id, ": bad run config: ", built.status().message()));
  }
  task::TrainTask t = *std::move(built);
  t.name = task.spec.id;
  t.threads = task.spec.resources.cpu_threads;
  json payload = json::parse(task.spec.payload, nullptr, false);
  t.checkpoint.every_steps = CheckpointEvery(payload);
  if (draft.contains("analysis") && draft["analysis"].is_object()) {
    t.analysis.q_grad_every_steps =
        draft["analysis"].value("q_grad_every_steps", int64_t{0});
  }
  // evaluation.trajectory's checkpoints (sweep/expand.cc).
  t.checkpoint.keep_every_steps =
      draft.value("keep_checkpoint_every_steps", int64_t{0});
  // With W ranks a step is W micro-batches, one per rank (hlab-train needs
  // the micro-batch count divisible by the world size).
  const int64_t ranks = task.spec.resources.Ranks();
  if (ranks > 1) {
    if (t.seq_len <= 0 || t.batch_tokens % (t.seq_len * ranks) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", task.spec.id, ": ", ranks, " ranks do not divide the ",
          t.batch_tokens, "-token batch into whole sequences of ", t.seq_len));
    }
    t.micro_batch_tokens = t.batch_tokens / ranks;
  }
  if (task.spec.kind == store::TaskKind::kTrunk) {
    HLAB_RETURN_IF_ERROR(SetTrunk(task, payload, inputs, &t));
  } else if (task.spec.kind == store::TaskKind::kDecay) {
    if (inputs.checkpoint_path.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("decay ", task.spec.id,
                       ": its trunk reported no branch checkpoint"
                       " for run ",
                       task.spec.run_id));
    }
    t.init_from = inputs.checkpoint_path;
  }
  return task::TrainTaskToJson(t);
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
        // A later segment resumes from the branch checkpoint its
        // predecessor (the TRUNK it depends on) saved at its start.
        const int64_t start = payload.value("start_step", int64_t{0});
        for (const std::string& dep : task.spec.depends_on) {
          if (start == 0 || !inputs.checkpoint_path.empty()) break;
          HLAB_ASSIGN_OR_RETURN(inputs.checkpoint_path,
                                TrunkBranchPath(query, dep, start));
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
        HLAB_ASSIGN_OR_RETURN(inputs.reference_checkpoint,
                              ReferenceCheckpoint(store, query, task));
      }
      break;
    }
    case store::TaskKind::kTrain:
      break;
  }
  return BuildTrainerTask(task, inputs);
}

}  // namespace hlab::coordinator
