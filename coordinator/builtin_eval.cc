#include "coordinator/builtin_eval.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/proto_mapping.h"

namespace hlab::coordinator {
namespace {

// The newest val_loss point of `run_id` at or before `step`, if any.
absl::StatusOr<std::optional<double>> ValidationLoss(store::QueryEngine& query,
                                                     const std::string& run_id,
                                                     int64_t step) {
  for (char c : run_id) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("bad run id ", run_id));
    }
  }
  HLAB_ASSIGN_OR_RETURN(
      store::QueryResult result,
      query.Run(absl::StrCat("SELECT value FROM metrics WHERE run_id = '",
                             run_id, "' AND name = 'val_loss' AND step <= ",
                             step, " ORDER BY step DESC LIMIT 1"),
                {}));
  if (result.rows.empty()) return std::optional<double>();
  if (const auto* v = std::get_if<double>(&result.rows[0][0])) return *v;
  return std::optional<double>();
}

}  // namespace

absl::StatusOr<int> CompleteEvalTasks(ServiceContext& context) {
  store::Store& store = *context.store;
  const absl::Time now = context.clock();
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Task> tasks,
                        store.NextLeasableTasks(now, 1000));
  int done = 0;
  for (const store::Task& task : tasks) {
    if (task.spec.kind != store::TaskKind::kEval) continue;
    absl::StatusOr<int> attempt =
        store.LeaseTask(task.spec.id, kBuiltinEvalWorker, now, context.lease);
    if (attempt.status().code() == absl::StatusCode::kFailedPrecondition) {
      continue;
    }
    HLAB_RETURN_IF_ERROR(attempt.status());
    const hlab::v1::Task proto = ToProtoTask(task);
    const int64_t step = proto.eval_step();
    HLAB_ASSIGN_OR_RETURN(
        std::optional<double> loss,
        ValidationLoss(*context.query, task.spec.run_id, step));
    if (loss) {
      store::EvalResult eval;
      eval.run_id = task.spec.run_id;
      eval.step = step;
      eval.metric = "val_loss";
      eval.value = *loss;
      eval.details = R"({"source":"trainer validation"})";
      HLAB_RETURN_IF_ERROR(store.RecordEval(task.spec.id, *attempt, eval));
    }
    HLAB_RETURN_IF_ERROR(store.CompleteTask(task.spec.id, *attempt, now));
    HLAB_LOG(INFO) << "completed " << task.spec.id << " in the coordinator"
                   << (loss ? absl::StrCat(": val_loss ", *loss)
                            : std::string(": no val_loss reported"))
                   << "; not measured: longppl, niah";
    ++done;
  }
  return done;
}

}  // namespace hlab::coordinator
