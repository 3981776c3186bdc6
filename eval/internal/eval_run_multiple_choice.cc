// EvalRun (eval/internal/eval_run.h): multiple-choice tasks in
// lm-evaluation-harness's conventions (eval/multiple_choice.h).
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "eval/internal/eval_run.h"
#include "eval/internal/task_checks.h"
#include "eval/multiple_choice.h"

namespace hlab::eval::internal {

absl::Status EvalRun::PrepareMultipleChoice(
    const task::MultipleChoiceSpec& spec) {
  HLAB_ASSIGN_OR_RETURN(
      std::unique_ptr<data::Tokenizer> tokenizer,
      SampleTokenizer(spec.tokenizer, "evals.multiple_choice"));
  multiple_choice_.clear();
  for (size_t i = 0; i < spec.tasks.size(); ++i) {
    absl::StatusOr<McPreparedTask> prepared =
        PrepareMcTask(MultipleChoiceConfig(spec, i), *tokenizer,
                      MultipleChoiceMaxTokens(task_));
    if (!prepared.ok()) {
      return Prefixed(absl::StrCat("evals.multiple_choice.tasks[", i, "]"),
                      prepared.status());
    }
    multiple_choice_.push_back(*std::move(prepared));
  }
  return absl::OkStatus();
}

absl::Status EvalRun::RunMultipleChoice() {
  for (const McPreparedTask& prepared : multiple_choice_) {
    const auto start = Clock::now();
    const std::string& name = prepared.config.name;
    absl::StatusOr<McTaskResult> scored =
        ScoreMcTask(*scorer_, prepared, [&](int64_t done, int64_t total) {
          Progress("multiple_choice", done, total, name);
        });
    if (!scored.ok()) {
      return Prefixed(absl::StrCat("evals.multiple_choice: ", name),
                      scored.status());
    }
    Json details = Json::parse(McResultToJson(*scored));
    details["longest_tokens"] = prepared.longest_tokens;
    details["fewshot_pool"] = prepared.fewshot_pool;
    details["seconds"] = SecondsSince(start);
    Result("mc_acc/" + name, scored->acc, details);
    Result("mc_acc_norm/" + name, scored->acc_norm, details);
  }
  return absl::OkStatus();
}

}  // namespace hlab::eval::internal
