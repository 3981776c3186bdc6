#include "coordinator/planning/evaluate_run.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/planning/eval_inputs.h"
#include "coordinator/planning/proto_mapping.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_validator.h"
#include "task/eval_task.h"

namespace hlab::coordinator {
namespace {

using nlohmann::json;

// The evaluations to run, in run order (task::AllEvalNames()): the listed
// ones, or those the sweep enables.
absl::StatusOr<std::vector<std::string>> EvalNames(
    const hlab::v1::EvaluateRunRequest& request,
    const hlab::v1::SweepSpec& spec) {
  std::set<std::string> wanted;
  const bool mc_tasks = request.multiple_choice().tasks_size() > 0;
  for (const std::string& name : request.evals()) {
    bool known = false;
    for (const std::string& k : task::AllEvalNames()) {
      known = known || name == k;
    }
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("evals: unknown evaluation '", name,
                       "'; use val_loss, longppl, niah, receptive_field, "
                       "gradient_profile, probing, retrieval_heads or "
                       "multiple_choice or ruler"));
    }
    wanted.insert(name);
  }
  if (mc_tasks && !wanted.empty() && wanted.count("multiple_choice") == 0) {
    return absl::InvalidArgumentError(
        "multiple_choice: tasks given but evals does not name "
        "multiple_choice; add it (hlab eval RUN --evals ...,multiple_choice) "
        "or leave --evals out");
  }
  if (mc_tasks) wanted.insert("multiple_choice");
  if (wanted.empty()) {
    for (const std::string& name : sweep::EnabledEvals(spec)) {
      wanted.insert(name);
    }
  }
  if (wanted.empty()) {
    return absl::InvalidArgumentError(
        "evals: the run's sweep enables no evaluation; name them (hlab eval "
        "RUN --evals val_loss,longppl,niah,receptive_field)");
  }
  std::vector<std::string> out;
  for (const std::string& k : task::AllEvalNames()) {
    if (wanted.count(k) > 0) out.push_back(k);
  }
  return out;
}

// The sweep's spec with exactly `names` enabled, the request's
// multiple-choice tasks (if any) in place of the sweep's, defaults applied.
hlab::v1::SweepSpec WithEvals(const hlab::v1::SweepSpec& sweep,
                              const std::vector<std::string>& names,
                              const hlab::v1::EvaluateRunRequest& request) {
  hlab::v1::SweepSpec spec = sweep;
  if (request.multiple_choice().tasks_size() > 0) {
    *spec.mutable_evaluation()->mutable_multiple_choice() =
        request.multiple_choice();
  }
  auto on = [&](const char* name) {
    for (const std::string& n : names) {
      if (n == name) return true;
    }
    return false;
  };
  auto* e = spec.mutable_evaluation();
  e->mutable_validation_loss()->set_enabled(on("val_loss"));
  e->mutable_longppl()->set_enabled(on("longppl"));
  e->mutable_niah()->set_enabled(on("niah"));
  e->mutable_receptive_field()->set_enabled(on("receptive_field"));
  e->mutable_gradient_profile()->set_enabled(on("gradient_profile"));
  e->mutable_probing()->set_enabled(on("probing"));
  e->mutable_retrieval_heads()->set_enabled(on("retrieval_heads"));
  e->mutable_multiple_choice()->set_enabled(on("multiple_choice"));
  e->mutable_ruler()->set_enabled(on("ruler"));
  // Its changes are against the unrestricted loss, which it needs.
  if (on("receptive_field")) {
    e->mutable_validation_loss()->set_enabled(true);
  }
  return sweep::WithDefaults(spec);
}

// With multiple_choice among `names`: its tasks (the request's or the
// sweep's) are there and pass the sweep's checks, named under
// "multiple_choice".
absl::Status CheckMultipleChoice(const hlab::v1::SweepSpec& spec,
                                 const std::vector<std::string>& names) {
  if (std::find(names.begin(), names.end(), "multiple_choice") == names.end()) {
    return absl::OkStatus();
  }
  const auto& mc = spec.evaluation().multiple_choice();
  if (mc.tasks().empty()) {
    return absl::InvalidArgumentError(
        "evals: multiple_choice needs its tasks and the run's sweep names "
        "none (evaluation.multiple_choice.tasks); give them (hlab eval RUN "
        "--mc-tasks FILE.jsonl)");
  }
  return sweep::CheckMultipleChoiceTasks(mc, "multiple_choice");
}

// The LongPPL reference of the sweep: what its EVAL tasks name, or the
// spec's run_id / checkpoint_path.
absl::StatusOr<task::LongPplReference> Reference(const sweep::SweepPlan& plan) {
  for (const hlab::v1::Task& t : plan.tasks) {
    if (t.kind() != hlab::v1::TASK_KIND_EVAL) continue;
    absl::StatusOr<task::EvalTask> draft = task::ReadEvalTask(
        json::parse(t.draft_json(), nullptr, /*allow_exceptions=*/false));
    if (!draft.ok() || !draft->evals.longppl) {
      break;  // the sweep's EVAL tasks have no LongPPL
    }
    return draft->evals.longppl->reference;
  }
  const auto& ref = plan.spec.evaluation().longppl().reference();
  task::LongPplReference out;
  out.run_id = ref.run_id();
  if (out.run_id.empty()) out.checkpoint_path = ref.checkpoint_path();
  if (out.run_id.empty() && out.checkpoint_path.empty()) {
    out.hf_dir = ref.hf_dir();
    out.dtype = ref.dtype();
  }
  if (!out.run_id.empty() || !out.checkpoint_path.empty() ||
      !out.hf_dir.empty()) {
    return out;
  }
  return absl::InvalidArgumentError(
      "evals: longppl needs a reference model and the run's sweep names none "
      "(evaluation.longppl.reference); evaluate LongPPL in a sweep that does");
}

absl::StatusOr<int64_t> FirstSweep(store::QueryEngine& query,
                                   const std::string& run_id) {
  // run_id is hex (FindRunCheckpoint checked it).
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult r,
      query.Run(absl::StrCat("SELECT sweep_id FROM sweep_runs WHERE run_id = '",
                             run_id, "' ORDER BY sweep_id LIMIT 1"),
                {}));
  if (r.rows.empty() || !std::holds_alternative<int64_t>(r.rows[0][0])) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " belongs to no sweep"));
  }
  return std::get<int64_t>(r.rows[0][0]);
}

}  // namespace

absl::Status EvaluateRun(store::Store& store, store::QueryEngine& query,
                         SweepCatalog& catalog, absl::Time now,
                         const hlab::v1::EvaluateRunRequest& request,
                         hlab::v1::EvaluateRunResponse* response) {
  const std::string& run_id = request.run_id();
  if (run_id.empty()) return absl::InvalidArgumentError("run_id: required");
  if (request.step() < 0) {
    return absl::InvalidArgumentError("step: must be >= 0 (0: the newest)");
  }
  absl::StatusOr<store::Run> run = store.GetRun(run_id);
  if (run.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, ": no such run"));
  }
  HLAB_RETURN_IF_ERROR(run.status());
  absl::Status finished = CheckTrainingFinished(store, run_id, "run");
  if (!finished.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        finished.message(), "; evaluate it once it has succeeded (hlab watch",
        run->state == store::RunState::kFailed ||
                run->state == store::RunState::kCancelled ||
                run->state == store::RunState::kPredicted
            ? absl::StrCat(", after hlab resume --run ", run_id, ")")
            : ")"));
  }
  HLAB_ASSIGN_OR_RETURN(RunCheckpoint checkpoint,
                        FindRunCheckpoint(query, run_id, request.step()));
  HLAB_ASSIGN_OR_RETURN(int64_t sweep_id, FirstSweep(query, run_id));
  HLAB_ASSIGN_OR_RETURN(std::shared_ptr<const sweep::SweepPlan> plan,
                        catalog.Plan(sweep_id));
  HLAB_ASSIGN_OR_RETURN(std::vector<std::string> names,
                        EvalNames(request, plan->spec));
  const hlab::v1::SweepSpec evaluated = WithEvals(plan->spec, names, request);
  HLAB_RETURN_IF_ERROR(CheckMultipleChoice(evaluated, names));
  const std::string settings = sweep::EvaluationSettings(evaluated);
  const std::string task_id =
      sweep::EvalTaskId(run_id, checkpoint.step, settings);
  response->set_checkpoint_path(checkpoint.path);

  absl::StatusOr<store::Task> existing = store.GetTask(task_id);
  if (existing.ok() && request.retry_failed() && existing->spec.on_demand &&
      (existing->state == store::TaskState::kFailed ||
       existing->state == store::TaskState::kCancelled)) {
    HLAB_ASSIGN_OR_RETURN(bool reopened,
                          store.ReopenOnDemandTask(task_id, now));
    if (reopened) {
      HLAB_LOG(INFO) << "evaluation " << task_id << " of run " << run_id
                     << " reopened (was " << store::ToString(existing->state)
                     << ")";
    }
    existing = store.GetTask(task_id);
  }
  if (existing.ok()) {
    *response->mutable_task() = ToProtoTask(*existing);
    response->set_created(false);
    response->set_on_demand(existing->spec.on_demand);
    return absl::OkStatus();
  }
  if (existing.status().code() != absl::StatusCode::kNotFound) {
    return existing.status();
  }

  hlab::v1::Task task;
  task.set_kind(hlab::v1::TASK_KIND_EVAL);
  task.set_task_id(task_id);
  task.add_run_ids(run_id);
  task.set_eval_step(checkpoint.step);
  for (const std::string& n : names) task.add_evals(n);
  // Resources and priority of the run's own tasks.
  for (const hlab::v1::Task& t : plan->tasks) {
    if (t.kind() == hlab::v1::TASK_KIND_TRUNK || t.run_ids_size() == 0 ||
        t.run_ids(0) != run_id) {
      continue;
    }
    *task.mutable_resources() = t.resources();
    task.set_priority(t.priority());
    break;
  }
  task::LongPplReference reference;
  for (const std::string& n : names) {
    if (n != "longppl") continue;
    const auto& keys = plan->spec.evaluation().longppl().key_tokens();
    if (!keys.file().empty() || !keys.slices().empty()) continue;  // no model
    HLAB_ASSIGN_OR_RETURN(reference, Reference(*plan));
    if (!reference.hf_dir.empty()) continue;  // read on the worker
    absl::StatusOr<std::string> resolved = ResolveReferenceCheckpoint(
        store, query, reference.run_id, reference.checkpoint_path);
    if (!resolved.ok()) return resolved.status();
  }
  HLAB_ASSIGN_OR_RETURN(
      std::string draft,
      sweep::EvalDraft(task_id, run_id, checkpoint.step, settings,
                       run->spec.config, reference));
  task.set_draft_json(draft);
  store::TaskSpec spec = ToTaskSpec(task, sweep_id, "");
  spec.on_demand = true;  // its failure is not the run's
  HLAB_RETURN_IF_ERROR(store.AddTasks({spec}, now).status());
  HLAB_ASSIGN_OR_RETURN(store::Task stored, store.GetTask(task_id));
  *response->mutable_task() = ToProtoTask(stored);
  response->set_created(true);
  response->set_on_demand(true);
  HLAB_LOG(INFO) << "evaluation " << task_id << " of run " << run_id
                 << " at step " << checkpoint.step << " added";
  return absl::OkStatus();
}

}  // namespace hlab::coordinator
