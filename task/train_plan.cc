#include "task/train_plan.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/config/param_count.h"

namespace hlab::task {
namespace {

using Json = nlohmann::json;

}  // namespace

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

}  // namespace hlab::task
