// The task file hlab-train receives (`hlab-train --task FILE`,
// task/train_task.h, docs/training.md), built at lease time from a stored
// task and its run's canonical config: task::TrainTaskForRun
// (task/run_config.h), then what the task kind decides:
//
//   TRAIN  budget_tokens = the run's budget
//   TRUNK  budget_tokens = the largest budget of its runs,
//          branch_budgets_tokens = the budgets of those it saves a branch
//          checkpoint for (all of a whole trunk's runs; of a segment,
//          sweep/expand.h, the runs branching at its end); a segment
//          also stops there (stop_at_tokens) and, after the first, starts
//          from init_from = the branch checkpoint its predecessor (the
//          TRUNK it depends on) recorded at its start_step
//   DECAY  budget_tokens = its run's budget, init_from = the trunk's branch
//          checkpoint for that run (recorded by ReportCheckpoint)
// and for all three: name, threads (the scale's cpu_threads), checkpoints
// every ~10% of the task's steps, micro-batches for several ranks.
// checkpoint.dir is left empty: the worker sets it to its per-task
// directory.
//
// EVAL tasks are not hlab-train tasks but hlab-eval's (task/eval_task.h,
// docs/evaluation.md): the plan's draft (sweep/expand.h EvalDraft: kind,
// task_id, run_id, step, evals, config) plus "checkpoint", the run's
// checkpoint at the evaluated step; evals.longppl.reference.checkpoint, the
// reference model's checkpoint (eval_inputs.h: a reference run's newest
// checkpoint once its training finished, or the reference checkpoint_path);
// "threads" (the scale's cpu_threads), "allow_extrapolation" (false) and
// "cache_dir" ("", the worker sets it).
//
// Thread-safety: pure functions; BuildTrainerTaskFromStore reads the store
// (thread-safe).
//
//   HLAB_ASSIGN_OR_RETURN(std::string json,
//                         BuildTrainerTaskFromStore(store, query, task));
#ifndef HLAB_COORDINATOR_PLANNING_TRAINER_TASK_H_
#define HLAB_COORDINATOR_PLANNING_TRAINER_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"

namespace hlab::coordinator {

// Inputs that live outside the task row.
struct TrainerTaskInputs {
  // TRUNK: the budget of each of its runs, in the order of its run_ids
  // (and branch points).
  std::vector<int64_t> branch_budgets_tokens;
  // DECAY, and a TRUNK segment after the first: the branch checkpoint to
  // start from. EVAL: the checkpoint to evaluate.
  std::string checkpoint_path;
  // EVAL with LongPPL: the reference model's checkpoint.
  std::string reference_checkpoint;
};

// InvalidArgument if the task's payload lacks its run config; a DECAY
// without init_from, a TRUNK without budgets, or an EVAL without its
// checkpoint or LongPPL reference checkpoint, or a later trunk segment
// without its predecessor's branch checkpoint, is FailedPrecondition.
absl::StatusOr<std::string> BuildTrainerTask(const store::Task& task,
                                             const TrainerTaskInputs& inputs);

// Gathers the inputs from the store (budgets of the trunk's runs; the
// decay's branch checkpoint; the eval's run checkpoint at its step and its
// LongPPL reference, eval_inputs.h) and builds. FailedPrecondition naming
// the reference run, its state and what to do when the reference run's
// training has not finished (the caller fails the task for good).
absl::StatusOr<std::string> BuildTrainerTaskFromStore(store::Store& store,
                                                      store::QueryEngine& query,
                                                      const store::Task& task);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_PLANNING_TRAINER_TASK_H_
