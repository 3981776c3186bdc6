// EvalRun (eval/internal/eval_run.h): RULER's synthetic tasks
// (eval/ruler/ruler.h) by greedy decoding.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "eval/internal/eval_run.h"
#include "eval/internal/task_checks.h"  // Prefixed
#include "eval/ruler/ruler.h"

namespace hlab::eval::internal {

// "ruler_score": the mean over the tasks that ran (details: every cell with
// its first prediction, what was skipped), and "ruler_score/<task>".
// Lengths above the model's context were refused before anything ran; with
// no task named, tasks a length cannot hold are skipped (a warning), and
// none fitting is recorded as not measured.
absl::Status EvalRun::RunRuler(const task::RulerSpec& spec) {
  ruler::RulerConfig config;
  config.tasks = spec.tasks;
  config.lengths = spec.lengths;
  if (config.lengths.empty()) config.lengths = {task_.run.seq_len};
  config.samples = spec.samples;
  config.seed = spec.seed;
  config.tokens_to_generate = spec.tokens_to_generate;
  HLAB_RETURN_IF_ERROR(
      Prefixed("evals.ruler", ruler::ValidateRulerConfig(config)));
  absl::StatusOr<ruler::RulerSources> sources = ruler::LoadRulerSources(
      spec.essay_file, spec.squad_file, spec.hotpotqa_file);
  if (!sources.ok()) return Prefixed("evals.ruler", sources.status());
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer =
      SampleTokenizer(spec.tokenizer, "evals.ruler");
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<ruler::RulerResult> evaluated =
      ruler::EvaluateRuler(*scorer_, **tokenizer, config, *sources,
                           [this](int64_t done, int64_t total) {
                             Progress("ruler", done, total, "generating");
                           });
  if (!evaluated.ok() && spec.tasks.empty() &&
      absl::IsInvalidArgument(evaluated.status())) {
    Warn(absl::StrCat("evals.ruler: ", evaluated.status().message()));
    Result("ruler_score", Json(nullptr),
           {{"not_measured", std::string(evaluated.status().message())}});
    return absl::OkStatus();
  }
  if (!evaluated.ok()) return Prefixed("evals.ruler", evaluated.status());
  const ruler::RulerResult& result = *evaluated;
  for (const std::string& s : result.skipped) {
    Warn(absl::StrCat("evals.ruler: skipped ", s));
  }
  const Json details = Json::parse(ruler::RulerResultToJson(result));
  Result("ruler_score", result.score, details);
  for (const auto& [name, score] : result.tasks) {
    Json cells = Json::array();
    for (const Json& cell : details["cells"]) {
      if (cell.value("task", "") == name) cells.push_back(cell);
    }
    Result("ruler_score/" + name, score, {{"cells", cells}});
  }
  return absl::OkStatus();
}

}  // namespace hlab::eval::internal
