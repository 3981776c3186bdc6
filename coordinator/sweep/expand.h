// Expanding a sweep spec into runs and a task plan.
//
// A sweep expands into one run per (architecture, scale, budget, seed), in
// that nesting order. Each run gets its resolved model (exact non-embedding
// N), its budget D (ratio * N rounded to whole batches), estimated training
// FLOPs (TrainingFlopsPerToken * D) and its id (run_config.h).
//
// Tasks. With share_trunk (the default) the runs of one (architecture,
// scale, seed) with two or more budgets share one TRUNK task: warmup and
// stable phase up to the largest budget's decay start, saving a branch
// checkpoint at each run's decay start (1 - decay_fraction) * D_i. One DECAY
// task per run continues from its branch point to D_i. With
// schedule_policy: adaptive that trunk is a chain of TRUNK segments, one
// per distinct decay start, each resuming from the previous one's branch
// checkpoint and depending on it; a DECAY depends on every segment its
// prefix needs (docs/sweeps.md, "Trunk segments"). Otherwise each run is
// one TRAIN task. Each run then gets one EVAL task after its training (and
// after the LongPPL reference run's training); with
// evaluation.at_branch_points, each branch checkpoint gets an EVAL task too.
//
// Thread-safe (pure functions).
//
//   HLAB_ASSIGN_OR_RETURN(SweepPlan plan, PlanSweep(spec));
//   std::cout << plan.runs.size() << " runs, saving "
//             << plan.flops_unshared - plan.flops_shared << " FLOPs\n";
#ifndef HLAB_COORDINATOR_SWEEP_EXPAND_H_
#define HLAB_COORDINATOR_SWEEP_EXPAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hlab/v1/run.pb.h"
#include "hlab/v1/sweep.pb.h"
#include "hlab/v1/task.pb.h"
#include "task/eval_task.h"

namespace hlab::sweep {

struct SweepPlan {
  // The spec with defaults applied; what the coordinator stores.
  hlab::v1::SweepSpec spec;
  // SpecHash(spec): resubmitting an equal spec returns the stored sweep.
  std::string spec_hash;
  // Runs in (architecture, scale, budget, seed) order, state PENDING.
  std::vector<hlab::v1::Run> runs;
  // Every task, each after the tasks it depends on.
  std::vector<hlab::v1::Task> tasks;
  // Training FLOPs of the whole grid with WSD trunk sharing (trunks plus
  // decays) and without (every run from scratch). Both are computed whatever
  // share_trunk says; the plan's tasks follow share_trunk. Evaluation is not
  // counted.
  double flops_shared = 0;
  double flops_unshared = 0;
  // Training tokens, the same way.
  int64_t tokens_shared = 0;
  int64_t tokens_unshared = 0;
};

// Validates (spec_validator.h) and expands. InvalidArgument naming the field
// for a bad spec.
absl::StatusOr<SweepPlan> PlanSweep(const hlab::v1::SweepSpec& spec);

// The "evals" object of an EVAL task file (docs/evaluation.md) for the
// spec's evaluation section: one entry per enabled evaluation with its
// settings (apply WithDefaults first), as JSON text.
std::string EvaluationSettings(const hlab::v1::SweepSpec& spec);

// evaluation.multiple_choice as the EVAL task's evals.multiple_choice
// (absent delimiters and seed: the task's defaults).
task::MultipleChoiceSpec MultipleChoiceSettings(
    const hlab::v1::MultipleChoiceSpec& spec);

// The evaluations the spec enables, in run order (task::AllEvalNames()).
std::vector<std::string> EnabledEvals(const hlab::v1::SweepSpec& spec);

// The draft of an EVAL task (its Task.task_json, completed at lease time by
// coordinator/planning/trainer_task.h): the evaluator's task without its
// checkpoint, holding the run's training task (from `run_config`, its canonical
// config), the evaluations of `settings` (EvaluationSettings) and, with
// LongPPL, its `reference`. InvalidArgument if the config or the settings do
// not read.
absl::StatusOr<std::string> EvalDraft(const std::string& task_id,
                                      const std::string& run_id, int64_t step,
                                      const std::string& settings,
                                      const std::string& run_config,
                                      const task::LongPplReference& reference);

// The id of the EVAL task of `run_id` at training step `step` with
// `settings` (EvaluationSettings): the same inputs give the same id, so a
// sweep and `hlab eval` asking for the same evaluation share one task.
std::string EvalTaskId(const std::string& run_id, int64_t step,
                       const std::string& settings);

// Short lowercase name of a task kind ("train", "trunk", "decay", "eval").
std::string TaskKindName(hlab::v1::TaskKind kind);

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_EXPAND_H_
