// The resolved step plan of a training task: steps per budget, the WSD
// schedule, where a trunk's branches start and where the task stops.
// hlab-train follows it; `hlab-train --check` prints it.
//
// Thread-safety: pure functions.
//
//   HLAB_ASSIGN_OR_RETURN(TrainPlan plan, PlanTraining(task, n_params));
//   for (int64_t step : plan.branch_steps) ...
#ifndef HLAB_TASK_TRAIN_PLAN_H_
#define HLAB_TASK_TRAIN_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "task/lr_schedule.h"
#include "task/train_task.h"

namespace hlab::task {

// The resolved step plan of a task for a model with `non_embedding_params`.
struct TrainPlan {
  int64_t sequences_per_step = 0;
  int64_t micro_batches = 0;  // gradient accumulation
  int64_t sequences_per_micro_batch = 0;
  int64_t budget_tokens = 0;            // as given, or ratio * N
  int64_t total_steps = 0;              // the schedule's length
  int64_t stop_step = 0;                // where this task stops
  std::vector<int64_t> branch_steps;    // ascending, one per branch budget
  std::vector<int64_t> branch_budgets;  // the budgets, in the same order
  WsdConfig schedule;
};

// Steps of a budget: round(budget / batch_tokens), at least 1.
int64_t StepsForTokens(int64_t tokens, int64_t batch_tokens);

// InvalidArgument naming the field when the plan is inconsistent (a budget
// smaller than the warmup, a branch budget above the task's budget, ...).
absl::StatusOr<TrainPlan> PlanTraining(const TrainTask& task,
                                       int64_t non_embedding_params);

// Validates a task completely without building a model (parameter counts
// from model/config) and returns its plan as one line of JSON: N, budget,
// steps, stop step, branch steps, micro-batches. For `hlab-train --check`.
absl::StatusOr<std::string> CheckTrainTask(const TrainTask& task);

}  // namespace hlab::task

#endif  // HLAB_TASK_TRAIN_PLAN_H_
