#include "coordinator/planning/eval_inputs.h"

#include <algorithm>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace hlab::coordinator {
namespace {

bool IsHex(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c));
  });
}

std::string StateOf(const store::Run& run) {
  std::string s = store::ToString(run.state);
  if (!run.failure_reason.empty()) {
    absl::StrAppend(&s, " (", run.failure_reason, ")");
  }
  return s;
}

}  // namespace

absl::Status CheckTrainingFinished(store::Store& store,
                                   const std::string& run_id,
                                   const std::string& what) {
  absl::StatusOr<store::Run> run = store.GetRun(run_id);
  if (run.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(
        absl::StrCat(what, " ", run_id, " is not in the database"));
  }
  HLAB_RETURN_IF_ERROR(run.status());
  if (run->state == store::RunState::kSucceeded) return absl::OkStatus();
  store::TaskFilter filter;
  filter.run_id = run_id;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Task> tasks,
                        store.ListTasks(filter));
  int training = 0, trained = 0;
  for (const store::Task& t : tasks) {
    if (t.spec.kind == store::TaskKind::kEval) continue;
    ++training;
    trained += t.state == store::TaskState::kSucceeded;
  }
  if (training > 0 && trained == training &&
      run->state != store::RunState::kCancelled) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat(what, " ", run_id, " is ", StateOf(*run),
                   ": its training has not finished"));
}

absl::StatusOr<RunCheckpoint> FindRunCheckpoint(store::QueryEngine& query,
                                                const std::string& run_id,
                                                int64_t step) {
  if (!IsHex(run_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad run id '", run_id, "' (expected hex digits)"));
  }
  const std::string where = absl::StrCat("run_id = '", run_id, "'");
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult found,
      query.Run(absl::StrCat("SELECT path, step FROM checkpoints WHERE ", where,
                             step > 0 ? absl::StrCat(" AND step = ", step) : "",
                             " ORDER BY step DESC, id DESC LIMIT 1"),
                {}));
  if (!found.rows.empty()) {
    const auto* path = std::get_if<std::string>(&found.rows[0][0]);
    const auto* at = std::get_if<int64_t>(&found.rows[0][1]);
    if (path != nullptr && at != nullptr) return RunCheckpoint{*path, *at};
  }
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult steps,
      query.Run(absl::StrCat("SELECT DISTINCT step FROM checkpoints WHERE ",
                             where, " ORDER BY step"),
                {}));
  std::vector<std::string> have;
  for (const auto& row : steps.rows)
    have.push_back(store::ValueToString(row[0]));
  const std::string at =
      step > 0 ? absl::StrCat(" at step ", step) : std::string();
  return absl::NotFoundError(absl::StrCat(
      "run ", run_id, " has no checkpoint", at,
      have.empty() ? std::string()
                   : absl::StrCat(" (checkpoints at steps ",
                                  absl::StrJoin(have, ", "), ")")));
}

absl::StatusOr<std::string> ResolveReferenceCheckpoint(
    store::Store& store, store::QueryEngine& query, const std::string& run_id,
    const std::string& checkpoint_path) {
  if (run_id.empty()) {
    if (checkpoint_path.empty()) {
      return absl::FailedPreconditionError(
          "evals.longppl.reference names neither a run_id nor a "
          "checkpoint_path");
    }
    return checkpoint_path;
  }
  absl::Status finished =
      CheckTrainingFinished(store, run_id, "LongPPL reference run");
  if (!finished.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        finished.message(),
        finished.code() == absl::StatusCode::kNotFound
            ? "; submit a sweep naming a stored run (hlab runs)"
            : "; let it succeed (hlab resume --run " + run_id +
                  " if it failed), then resume this run (hlab resume --run)"));
  }
  absl::StatusOr<RunCheckpoint> checkpoint =
      FindRunCheckpoint(query, run_id, 0);
  if (!checkpoint.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("LongPPL reference: ", checkpoint.status().message()));
  }
  return checkpoint->path;
}

absl::Status CheckReferenceRun(store::Store& store,
                               const hlab::v1::SweepSpec& spec) {
  const auto& longppl = spec.evaluation().longppl();
  const std::string& run_id = longppl.reference().run_id();
  if (!longppl.enabled() || run_id.empty()) return absl::OkStatus();
  const std::string field = "evaluation.longppl.reference.run_id";
  absl::Status finished = CheckTrainingFinished(store, run_id, "run");
  if (finished.ok()) return absl::OkStatus();
  if (finished.code() == absl::StatusCode::kNotFound) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", finished.message(),
                     "; name a run of an earlier sweep (hlab runs), or use "
                     "reference.architecture for a run of this sweep"));
  }
  if (finished.code() != absl::StatusCode::kFailedPrecondition) {
    return finished;
  }
  HLAB_ASSIGN_OR_RETURN(store::Run run, store.GetRun(run_id));
  if (run.state == store::RunState::kFailed ||
      run.state == store::RunState::kCancelled ||
      run.state == store::RunState::kPredicted) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", finished.message(),
                     "; resume it (hlab resume --run ", run_id,
                     ") and submit again once it has succeeded, or name another"
                     " run"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(field, ": ", finished.message(),
                   " yet; submit again once it has SUCCEEDED (hlab watch)"));
}

}  // namespace hlab::coordinator
