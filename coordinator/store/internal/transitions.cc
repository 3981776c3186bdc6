#include "coordinator/store/internal/transitions.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/internal/rows.h"

namespace hlab::store::internal {
namespace {

// Fails every PENDING task that depends, directly or not, on `task_id`
// (which failed for `reason`); adds their runs to `runs`. Each dependent's
// reason names the dependency it waited on, and that dependency's run when
// it is another run's (e.g. the LongPPL reference's training), then that
// dependency's own reason.
absl::Status FailDependents(Database& db, const std::string& task_id,
                            absl::string_view reason, absl::Time now,
                            std::set<std::string>* runs) {
  HLAB_ASSIGN_OR_RETURN(
      Statement select,
      db.Prepare("SELECT t.id, coalesce(t.run_id, ''),"
                 " coalesce((SELECT run_id FROM tasks WHERE id = ?1), '')"
                 " FROM task_deps d JOIN tasks t ON t.id = d.task_id"
                 " WHERE d.depends_on = ?1 AND t.state = 'PENDING'"
                 " ORDER BY t.id"));
  HLAB_ASSIGN_OR_RETURN(
      Statement update,
      db.Prepare("UPDATE tasks SET state = 'FAILED', failure_reason = ?1,"
                 " updated_at = ?2 WHERE id = ?3"));
  // Breadth first: (failed task, its reason).
  std::vector<std::pair<std::string, std::string>> frontier = {
      {task_id, std::string(reason)}};
  while (!frontier.empty()) {
    std::vector<std::pair<std::string, std::string>> next;
    for (const auto& [failed, why] : frontier) {
      std::vector<std::pair<std::string, std::string>> dependents;  // id, run
      std::string failed_run;
      select.Reset();
      select.Bind(1, failed);
      while (true) {
        HLAB_ASSIGN_OR_RETURN(bool has_row, select.Step());
        if (!has_row) break;
        dependents.emplace_back(select.ColumnText(0), select.ColumnText(1));
        failed_run = select.ColumnText(2);
      }
      for (const auto& [id, run] : dependents) {
        std::string own = absl::StrCat("dependency ", failed);
        if (!failed_run.empty() && failed_run != run) {
          absl::StrAppend(&own, " of run ", failed_run);
        }
        absl::StrAppend(&own, " failed: ", why);
        update.Bind(1, own).Bind(2, ToMillis(now)).Bind(3, id);
        HLAB_RETURN_IF_ERROR(update.Run());
        update.Reset();
        if (!run.empty()) runs->insert(run);
        next.emplace_back(id, std::move(own));
      }
    }
    frontier = std::move(next);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LeaseRow> LoadLeaseRow(Database& db,
                                      const std::string& task_id) {
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("SELECT sweep_id, coalesce(run_id, ''), state, attempt,"
                 " failures, max_attempts, coalesce(lease_worker, ''),"
                 " lease_expiry, on_demand, infra_failures"
                 " FROM tasks WHERE id = ?"));
  st.Bind(1, task_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row) {
    return absl::NotFoundError(absl::StrCat("unknown task ", task_id));
  }
  LeaseRow row;
  row.id = task_id;
  row.sweep_id = st.ColumnInt(0);
  row.run_id = st.ColumnText(1);
  HLAB_ASSIGN_OR_RETURN(row.state, ParseTaskState(st.ColumnText(2)));
  row.attempt = static_cast<int>(st.ColumnInt(3));
  row.failures = static_cast<int>(st.ColumnInt(4));
  row.max_attempts = static_cast<int>(st.ColumnInt(5));
  row.lease_worker = st.ColumnText(6);
  row.lease_expiry = TimeColumn(st, 7);
  row.on_demand = st.ColumnInt(8) != 0;
  row.infra_failures = static_cast<int>(st.ColumnInt(9));
  return row;
}

absl::Status HeartbeatWorkerInTxn(Database& db, const std::string& worker_id,
                                  absl::Time now) {
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("UPDATE workers SET last_heartbeat = ?, state = 'UP'"
                 " WHERE id = ?"));
  st.Bind(1, ToMillis(now)).Bind(2, worker_id);
  HLAB_RETURN_IF_ERROR(st.Run());
  if (st.changes() == 0) {
    return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<LeaseRow> CheckLease(Database& db, const std::string& task_id,
                                    int attempt) {
  HLAB_ASSIGN_OR_RETURN(LeaseRow row, LoadLeaseRow(db, task_id));
  if (row.state != TaskState::kLeased || row.attempt != attempt) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stale attempt ", attempt, " of task ", task_id, " (task is ",
        ToString(row.state), " at attempt ", row.attempt, ")"));
  }
  return row;
}

absl::StatusOr<std::vector<int64_t>> SweepsOfRun(Database& db,
                                                 const std::string& run_id) {
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("SELECT sweep_id FROM sweep_runs WHERE run_id = ?"));
  st.Bind(1, run_id);
  std::vector<int64_t> sweeps;
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) break;
    sweeps.push_back(st.ColumnInt(0));
  }
  return sweeps;
}

absl::StatusOr<int64_t> InsertEvent(Database& db, int64_t sweep_id,
                                    absl::string_view run_id,
                                    absl::string_view kind,
                                    absl::string_view message, absl::Time now) {
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("INSERT INTO events (sweep_id, run_id, kind, message, time)"
                 " VALUES (?, ?, ?, ?, ?)"));
  if (sweep_id == 0) {
    st.BindNull(1);
  } else {
    st.Bind(1, sweep_id);
  }
  st.BindTextOrNull(2, run_id).Bind(3, kind).Bind(4, message);
  st.Bind(5, ToMillis(now));
  HLAB_RETURN_IF_ERROR(st.Run());
  return db.last_insert_rowid();
}

absl::StatusOr<RunState> ReadRunState(Database& db, const std::string& run_id) {
  HLAB_ASSIGN_OR_RETURN(Statement st,
                        db.Prepare("SELECT state FROM runs WHERE id = ?"));
  st.Bind(1, run_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row) {
    return absl::NotFoundError(absl::StrCat("unknown run ", run_id));
  }
  return ParseRunState(st.ColumnText(0));
}

absl::Status RefreshRunState(Database& db, const std::string& run_id,
                             absl::Time now) {
  if (run_id.empty()) return absl::OkStatus();
  HLAB_ASSIGN_OR_RETURN(const RunState current, ReadRunState(db, run_id));
  // Ended by a user or by early stop: its cancelled tasks say nothing.
  if (current == RunState::kCancelled || current == RunState::kPredicted) {
    return RefreshRunPhase(db, run_id, now);
  }
  int64_t total = 0, succeeded = 0, failed = 0, started = 0;
  std::string reason;
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("SELECT count(*), total(state = 'SUCCEEDED'),"
                   " total(state = 'FAILED'),"
                   " total(state IN ('LEASED', 'SUCCEEDED')),"
                   " (SELECT failure_reason FROM tasks WHERE run_id = ?1"
                   "    AND on_demand = 0 AND state = 'FAILED'"
                   "    ORDER BY updated_at, id LIMIT 1)"
                   " FROM tasks WHERE run_id = ?1 AND on_demand = 0"));
    st.Bind(1, run_id);
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (has_row) {
      total = st.ColumnInt(0);
      succeeded = st.ColumnInt(1);
      failed = st.ColumnInt(2);
      started = st.ColumnInt(3);
      reason = st.ColumnText(4);
    }
  }
  RunState next = RunState::kPending;
  if (failed > 0) {
    next = RunState::kFailed;
  } else if (total > 0 && succeeded == total) {
    next = RunState::kSucceeded;
  } else if (started > 0) {
    next = RunState::kRunning;
  }
  if (next != RunState::kFailed) reason.clear();
  if (current == next) return RefreshRunPhase(db, run_id, now);
  RunStateChange change;
  change.failure_reason = reason;
  change.detail = reason;
  HLAB_RETURN_IF_ERROR(WriteRunState(db, run_id, next, change, now));
  return RefreshRunPhase(db, run_id, now);
}

absl::Status WriteRunState(Database& db, const std::string& run_id,
                           RunState state, const RunStateChange& change,
                           absl::Time now) {
  {
    std::string sql = "UPDATE runs SET state = ?1, updated_at = ?2";
    if (change.failure_reason.has_value()) sql += ", failure_reason = ?3";
    if (change.reset_retries) sql += ", retries = 0";
    sql += " WHERE id = ?4";
    HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare(sql));
    st.Bind(1, ToString(state)).Bind(2, ToMillis(now)).Bind(4, run_id);
    if (change.failure_reason.has_value()) {
      st.BindTextOrNull(3, *change.failure_reason);
    }
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  const bool ended =
      state == RunState::kSucceeded || state == RunState::kFailed ||
      state == RunState::kCancelled || state == RunState::kPredicted;
  std::string message = ToString(state);
  if (!change.detail.empty()) absl::StrAppend(&message, ": ", change.detail);
  HLAB_ASSIGN_OR_RETURN(std::vector<int64_t> sweeps, SweepsOfRun(db, run_id));
  for (int64_t sweep : sweeps) {
    HLAB_RETURN_IF_ERROR(
        InsertEvent(db, sweep, run_id, "run_state", message, now).status());
    if (ended) HLAB_RETURN_IF_ERROR(NoteSweepEnd(db, sweep, now));
  }
  return absl::OkStatus();
}

absl::Status NoteSweepEnd(Database& db, int64_t sweep_id, absl::Time now) {
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("SELECT total(r.state IN ('PENDING', 'RUNNING')),"
                 " total(r.state = 'SUCCEEDED'), total(r.state = 'FAILED'),"
                 " total(r.state = 'CANCELLED'), total(r.state = 'PREDICTED'),"
                 " count(*), (SELECT state FROM sweeps WHERE id = ?1)"
                 " FROM sweep_runs sr JOIN runs r ON r.id = sr.run_id"
                 " WHERE sr.sweep_id = ?1"));
  st.Bind(1, sweep_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row || st.ColumnInt(0) > 0 || st.ColumnText(6) == "CANCELLED") {
    return absl::OkStatus();
  }
  const int64_t succeeded = st.ColumnInt(1), failed = st.ColumnInt(2),
                cancelled = st.ColumnInt(3), predicted = st.ColumnInt(4),
                total = st.ColumnInt(5);
  // A sweep whose runs all succeeded or were predicted (early stop) ends
  // SUCCEEDED, as GetSweep says.
  std::string message;
  if (succeeded + predicted == total) {
    message = absl::StrCat("SUCCEEDED: ", total, " runs");
    if (predicted > 0) absl::StrAppend(&message, ", ", predicted, " predicted");
  } else {
    message = absl::StrCat("INCOMPLETE: ", succeeded, " succeeded, ", failed,
                           " failed, ", cancelled, " cancelled, ", predicted,
                           " predicted");
  }
  return InsertEvent(db, sweep_id, "", "sweep_finished", message, now).status();
}

const char kRunPhaseSql[] = R"sql(CASE
  WHEN runs.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'PREDICTED')
    THEN runs.state
  WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
    AND t.on_demand = 0 AND t.state = 'LEASED' AND t.kind = 'DECAY')
    THEN 'DECAYING'
  WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
    AND t.on_demand = 0 AND t.state = 'LEASED' AND t.kind = 'TRAIN')
    THEN 'TRAINING'
  WHEN EXISTS (SELECT 1 FROM tasks d JOIN task_deps x ON x.task_id = d.id
    JOIN tasks u ON u.id = x.depends_on WHERE d.run_id = runs.id
    AND d.kind = 'DECAY' AND u.kind = 'TRUNK' AND u.state = 'LEASED')
    THEN 'TRUNK'
  WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
    AND t.on_demand = 0 AND t.state = 'LEASED' AND t.kind = 'EVAL')
    THEN 'EVALUATING'
  ELSE 'WAITING' END)sql";

namespace {

bool HasEnded(RunPhase phase) {
  return phase == RunPhase::kSucceeded || phase == RunPhase::kFailed ||
         phase == RunPhase::kCancelled || phase == RunPhase::kPredicted;
}

// The bucket of kProgressEventsPerRun that `tokens` of `budget` falls in.
int64_t ProgressBucket(int64_t tokens, int64_t budget) {
  if (budget <= 0) return 0;
  // tokens <= budget < 2^53 for any real run: no overflow in double.
  return static_cast<int64_t>(static_cast<double>(tokens) /
                              static_cast<double>(budget) *
                              static_cast<double>(kProgressEventsPerRun));
}

std::string ProgressMessage(RunPhase phase, const RunProgress& progress,
                            int64_t budget) {
  return absl::StrCat(ToString(phase), " ", progress.tokens, "/", budget,
                      " tokens, step ", progress.step);
}

}  // namespace

absl::Status InsertProgressEvents(Database& db, const std::string& run_id,
                                  RunPhase phase, const RunProgress& progress,
                                  absl::Time now) {
  HLAB_ASSIGN_OR_RETURN(
      Statement budget_st,
      db.Prepare("SELECT budget_tokens FROM runs WHERE id = ?"));
  budget_st.Bind(1, run_id);
  HLAB_ASSIGN_OR_RETURN(bool has_run, budget_st.Step());
  const int64_t budget = has_run ? budget_st.ColumnInt(0) : 0;
  HLAB_ASSIGN_OR_RETURN(std::vector<int64_t> sweeps, SweepsOfRun(db, run_id));
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("INSERT INTO events (sweep_id, run_id, kind, message, time,"
                 " phase, step, tokens, loss)"
                 " VALUES (?, ?, 'run_progress', ?, ?, ?, ?, ?, ?)"));
  const std::string message = ProgressMessage(phase, progress, budget);
  for (int64_t sweep : sweeps) {
    st.Bind(1, sweep).Bind(2, run_id).Bind(3, message).Bind(4, ToMillis(now));
    st.Bind(5, ToString(phase)).Bind(6, progress.step);
    st.Bind(7, progress.tokens);
    if (progress.loss) {
      st.Bind(8, *progress.loss);
    } else {
      st.BindNull(8);
    }
    HLAB_RETURN_IF_ERROR(st.Run());
    st.Reset();
  }
  return absl::OkStatus();
}

namespace {

// The run's stored phase, the phase its tasks say, and its progress.
// `derived` is the stored phase when LoadPhaseRow was not asked to derive it.
struct PhaseRow {
  RunPhase stored = RunPhase::kWaiting;
  RunPhase derived = RunPhase::kWaiting;
  RunProgress progress;
  int64_t budget = 0;
};

// With `derive_phase`, evaluates kRunPhaseSql (up to four lookups in the
// run's tasks); the metrics path needs only the stored phase and skips it.
absl::StatusOr<PhaseRow> LoadPhaseRow(Database& db, const std::string& run_id,
                                      bool derive_phase) {
  HLAB_ASSIGN_OR_RETURN(
      Statement st, db.Prepare(absl::StrCat(
                        "SELECT phase, ", derive_phase ? kRunPhaseSql : "phase",
                        ", step_done, tokens_done, train_loss,"
                        " budget_tokens FROM runs WHERE id = ?")));
  st.Bind(1, run_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row)
    return absl::NotFoundError(absl::StrCat("unknown run ", run_id));
  PhaseRow row;
  HLAB_ASSIGN_OR_RETURN(row.stored, ParseRunPhase(st.ColumnText(0)));
  HLAB_ASSIGN_OR_RETURN(row.derived, ParseRunPhase(st.ColumnText(1)));
  row.progress.step = st.ColumnInt(2);
  row.progress.tokens = st.ColumnInt(3);
  if (!st.IsNull(4)) row.progress.loss = st.ColumnDouble(4);
  row.budget = st.ColumnInt(5);
  return row;
}

}  // namespace

absl::Status RefreshRunPhase(Database& db, const std::string& run_id,
                             absl::Time now) {
  if (run_id.empty()) return absl::OkStatus();
  HLAB_ASSIGN_OR_RETURN(const PhaseRow row,
                        LoadPhaseRow(db, run_id, /*derive_phase=*/true));
  if (row.stored == row.derived) return absl::OkStatus();
  {
    HLAB_ASSIGN_OR_RETURN(Statement st,
                          db.Prepare("UPDATE runs SET phase = ? WHERE id = ?"));
    st.Bind(1, ToString(row.derived)).Bind(2, run_id);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  if (HasEnded(row.derived)) return absl::OkStatus();
  return InsertProgressEvents(db, run_id, row.derived, row.progress, now);
}

absl::Status RefreshRunsOfTask(Database& db, const LeaseRow& row,
                               absl::Time now) {
  if (!row.run_id.empty()) return RefreshRunState(db, row.run_id, now);
  std::vector<std::string> runs;
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("SELECT DISTINCT d.run_id FROM task_deps x"
                   " JOIN tasks d ON d.id = x.task_id"
                   " WHERE x.depends_on = ? AND d.kind = 'DECAY'"
                   " AND d.run_id IS NOT NULL ORDER BY d.run_id"));
    st.Bind(1, row.id);
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (!has_row) break;
      runs.push_back(st.ColumnText(0));
    }
  }
  for (const std::string& run : runs) {
    HLAB_RETURN_IF_ERROR(RefreshRunPhase(db, run, now));
  }
  return absl::OkStatus();
}

absl::Status RecordRunProgress(Database& db, const std::string& run_id,
                               absl::Time now) {
  HLAB_ASSIGN_OR_RETURN(const PhaseRow before,
                        LoadPhaseRow(db, run_id, /*derive_phase=*/false));
  RunProgress after;
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("SELECT step, coalesce(tokens, 0), value FROM metrics"
                   " WHERE run_id = ? AND name = 'train_loss'"
                   " ORDER BY step DESC LIMIT 1"));
    st.Bind(1, run_id);
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) return absl::OkStatus();
    after.step = st.ColumnInt(0);
    after.tokens = std::min(st.ColumnInt(1), before.budget);
    if (!st.IsNull(2)) after.loss = st.ColumnDouble(2);
  }
  if (after.step == before.progress.step &&
      after.tokens == before.progress.tokens &&
      after.loss == before.progress.loss) {
    return absl::OkStatus();
  }
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE runs SET step_done = ?, tokens_done = ?,"
                   " train_loss = ? WHERE id = ?"));
    st.Bind(1, after.step).Bind(2, after.tokens);
    if (after.loss) {
      st.Bind(3, *after.loss);
    } else {
      st.BindNull(3);
    }
    st.Bind(4, run_id);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  const bool first = before.progress.step == 0;
  if (HasEnded(before.stored) ||
      (!first && ProgressBucket(after.tokens, before.budget) ==
                     ProgressBucket(before.progress.tokens, before.budget))) {
    return absl::OkStatus();
  }
  return InsertProgressEvents(db, run_id, before.stored, after, now);
}

absl::StatusOr<TaskState> FailAttempt(Database& db, const LeaseRow& row,
                                      const AttemptFailure& failure,
                                      absl::string_view outcome, absl::Time now,
                                      absl::Duration backoff) {
  const int64_t now_ms = ToMillis(now);
  const bool infra = failure.fault == FaultClass::kInfrastructure;
  const absl::string_view error = failure.error;
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE attempts SET ended_at = ?, outcome = ?, error = ?,"
                   " fault = ? WHERE task_id = ? AND attempt = ?"));
    st.Bind(1, now_ms).Bind(2, outcome).Bind(3, error);
    st.Bind(4, ToString(failure.fault));
    st.Bind(5, row.id).Bind(6, row.attempt);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  // Only a task error spends the budgets: the task's max_attempts and its
  // sweep's retry budget (an on-demand task has only its own max_attempts,
  // types.h). An infrastructure fault is retried without limit.
  const int failures = row.failures + (infra ? 0 : 1);
  const int infra_failures = row.infra_failures + (infra ? 1 : 0);
  std::string reason;
  if (!infra) {
    int64_t sweep_retries = 0, sweep_max_retries = 0;
    if (!row.on_demand) {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("SELECT retries, max_retries FROM sweeps WHERE id = ?"));
      st.Bind(1, row.sweep_id);
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (has_row) {
        sweep_retries = st.ColumnInt(0);
        sweep_max_retries = st.ColumnInt(1);
      }
    }
    if (!failure.retryable) {
      reason = absl::StrCat("task ", row.id, " attempt ", row.attempt,
                            " failed (not retryable): ", error);
    } else if (failures >= row.max_attempts) {
      reason = absl::StrCat("task ", row.id, " failed ", failures, " of ",
                            row.max_attempts, " attempts; last error: ", error);
    } else if (!row.on_demand && sweep_retries >= sweep_max_retries) {
      reason = absl::StrCat("sweep ", row.sweep_id, " retry limit (",
                            sweep_max_retries, ") exhausted; task ", row.id,
                            " last error: ", error);
    }
  }
  std::set<std::string> runs;
  if (!row.run_id.empty()) runs.insert(row.run_id);
  TaskState next = reason.empty() ? TaskState::kPending : TaskState::kFailed;
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE tasks SET state = ?, failures = ?,"
                   " infra_failures = ?, lease_worker = NULL,"
                   " lease_expiry = NULL, not_before = ?, failure_reason = ?,"
                   " updated_at = ? WHERE id = ?"));
    st.Bind(1, ToString(next)).Bind(2, failures).Bind(3, infra_failures);
    st.Bind(4, ToMillis(now + backoff));
    st.Bind(5, reason.empty() ? std::string(error) : reason);
    st.Bind(6, now_ms).Bind(7, row.id);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  if (next == TaskState::kPending) {
    // An on-demand task's retries are its own, not its sweep's or run's.
    const char* column = infra ? "infra_retries" : "retries";
    if (!row.on_demand) {
      HLAB_ASSIGN_OR_RETURN(
          Statement sweep,
          db.Prepare(absl::StrCat("UPDATE sweeps SET ", column, " = ", column,
                                  " + 1 WHERE id = ?")));
      sweep.Bind(1, row.sweep_id);
      HLAB_RETURN_IF_ERROR(sweep.Run());
    }
    if (!row.run_id.empty() && !row.on_demand) {
      HLAB_ASSIGN_OR_RETURN(
          Statement run,
          db.Prepare(absl::StrCat("UPDATE runs SET ", column, " = ", column,
                                  " + 1 WHERE id = ?")));
      run.Bind(1, row.run_id);
      HLAB_RETURN_IF_ERROR(run.Run());
    }
    HLAB_RETURN_IF_ERROR(
        InsertEvent(
            db, row.sweep_id, row.run_id, "task_retry",
            absl::StrCat("task ", row.id, " attempt ", row.attempt, " ",
                         outcome, " (", infra ? "infrastructure" : "task error",
                         "): ", error),
            now)
            .status());
  } else {
    HLAB_RETURN_IF_ERROR(FailDependents(db, row.id, reason, now, &runs));
    HLAB_RETURN_IF_ERROR(
        InsertEvent(db, row.sweep_id, row.run_id, "task_failed", reason, now)
            .status());
  }
  for (const std::string& run : runs) {
    HLAB_RETURN_IF_ERROR(RefreshRunState(db, run, now));
  }
  // A trunk's runs leave TRUNK when its attempt ends.
  if (row.run_id.empty()) HLAB_RETURN_IF_ERROR(RefreshRunsOfTask(db, row, now));
  return next;
}

}  // namespace hlab::store::internal
