// Store: cancelling and resuming sweeps and runs.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/internal/rows.h"
#include "coordinator/store/internal/transitions.h"
#include "coordinator/store/store.h"

namespace hlab::store {

using internal::InsertEvent;
using internal::LeaseRow;
using internal::LoadLeaseRow;
using internal::RefreshRunState;

namespace {

// Cancels the PENDING and LEASED tasks selected by `select_ids` (a query of
// task ids with one `?` parameter bound to `key`); appends cancelled leases.
absl::Status CancelTasks(Database& db, const std::string& select_ids,
                         const std::string& key, int64_t sweep_key,
                         absl::Time now, std::vector<CancelledLease>* out) {
  std::vector<LeaseRow> rows;
  {
    HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare(select_ids));
    if (sweep_key != 0) {
      st.Bind(1, sweep_key);
    } else {
      st.Bind(1, key);
    }
    std::vector<std::string> ids;
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (!has_row) break;
      ids.push_back(st.ColumnText(0));
    }
    st.Reset();
    for (const std::string& id : ids) {
      HLAB_ASSIGN_OR_RETURN(LeaseRow row, LoadLeaseRow(db, id));
      rows.push_back(std::move(row));
    }
  }
  const int64_t now_ms = ToMillis(now);
  for (const LeaseRow& row : rows) {
    if (row.state != TaskState::kPending && row.state != TaskState::kLeased) {
      continue;
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE tasks SET state = 'CANCELLED', lease_worker = NULL,"
                   " lease_expiry = NULL, updated_at = ? WHERE id = ?"));
    st.Bind(1, now_ms).Bind(2, row.id);
    HLAB_RETURN_IF_ERROR(st.Run());
    if (row.state == TaskState::kLeased) {
      HLAB_ASSIGN_OR_RETURN(
          Statement attempt,
          db.Prepare("UPDATE attempts SET outcome = 'CANCELLED', ended_at = ?"
                     " WHERE task_id = ? AND attempt = ?"));
      attempt.Bind(1, now_ms).Bind(2, row.id).Bind(3, row.attempt);
      HLAB_RETURN_IF_ERROR(attempt.Run());
      out->push_back(CancelledLease{row.id, row.attempt, row.lease_worker});
    }
  }
  return absl::OkStatus();
}

// The shared trunks and trunk segments run ?1's tasks depend on that are
// still to train (PENDING or LEASED) and that nothing else waits for: every
// task other than a trunk that depends on them is CANCELLED. A segment's
// successor does not keep it (sweep/expand.h: the DECAY of every run past
// it depends on it too), so cancelling the longest run cancels the segments
// past the last branch point another run still needs.
constexpr char kUnneededTrunksSql[] = R"sql(
SELECT DISTINCT u.id FROM tasks own
  JOIN task_deps x ON x.task_id = own.id
  JOIN tasks u ON u.id = x.depends_on
WHERE own.run_id = ?1 AND u.kind = 'TRUNK'
  AND u.state IN ('PENDING', 'LEASED')
  AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks t ON t.id = d.task_id
                  WHERE d.depends_on = u.id AND t.kind <> 'TRUNK'
                  AND t.state <> 'CANCELLED')
ORDER BY u.id
)sql";

// Cancels one run unless it SUCCEEDED or is CANCELLED already: its own
// tasks, then the trunks only cancelled tasks were waiting for.
absl::Status CancelRunInTxn(Database& db, const std::string& run_id,
                            absl::Time now, std::vector<CancelledLease>* out) {
  HLAB_ASSIGN_OR_RETURN(const RunState state,
                        internal::ReadRunState(db, run_id));
  if (state == RunState::kSucceeded || state == RunState::kCancelled ||
      state == RunState::kPredicted) {
    return absl::OkStatus();
  }
  HLAB_RETURN_IF_ERROR(
      CancelTasks(db, "SELECT id FROM tasks WHERE run_id = ? ORDER BY id",
                  run_id, 0, now, out));
  HLAB_RETURN_IF_ERROR(
      CancelTasks(db, kUnneededTrunksSql, run_id, 0, now, out));
  // Its failure_reason stays: why it had failed, if it had.
  HLAB_RETURN_IF_ERROR(internal::WriteRunState(
      db, run_id, RunState::kCancelled, internal::RunStateChange{}, now));
  return internal::RefreshRunPhase(db, run_id, now);
}

constexpr char kReopenTask[] =
    "UPDATE tasks SET state = 'PENDING', failures = 0, infra_failures = 0,"
    " failure_reason = NULL,"
    " not_before = 0, lease_worker = NULL, lease_expiry = NULL,"
    " updated_at = ?1 WHERE state IN ('FAILED', 'CANCELLED') AND ";

// Whether ResumeRunInTxn trains a PREDICTED run (`hlab resume --run`) or
// leaves it (a sweep's `hlab resume`).
enum class ResumePredicted { kNo, kYes };

// Resumes one FAILED or CANCELLED run, or a PREDICTED one when asked;
// returns whether it was resumed.
absl::StatusOr<bool> ResumeRunInTxn(Database& db, const std::string& run_id,
                                    ResumePredicted predicted, absl::Time now) {
  HLAB_ASSIGN_OR_RETURN(const RunState state,
                        internal::ReadRunState(db, run_id));
  const bool resumable =
      state == RunState::kFailed || state == RunState::kCancelled ||
      (state == RunState::kPredicted && predicted == ResumePredicted::kYes);
  if (!resumable) return false;
  const int64_t now_ms = ToMillis(now);
  // Its own tasks, then the tasks they depend on (a failed shared trunk).
  for (const char* which :
       {"run_id = ?2",
        "id IN (SELECT d.depends_on FROM task_deps d JOIN tasks t"
        " ON t.id = d.task_id WHERE t.run_id = ?2)"}) {
    HLAB_ASSIGN_OR_RETURN(Statement st,
                          db.Prepare(absl::StrCat(kReopenTask, which)));
    st.Bind(1, now_ms).Bind(2, run_id);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  internal::RunStateChange change;
  change.failure_reason = "";
  change.reset_retries = true;
  change.detail = "resumed";
  HLAB_RETURN_IF_ERROR(
      internal::WriteRunState(db, run_id, RunState::kPending, change, now));
  HLAB_ASSIGN_OR_RETURN(std::vector<int64_t> sweeps,
                        internal::SweepsOfRun(db, run_id));
  for (int64_t sweep : sweeps) {
    HLAB_ASSIGN_OR_RETURN(
        Statement st, db.Prepare("UPDATE sweeps SET retries = 0 WHERE id = ?"));
    st.Bind(1, sweep);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  HLAB_RETURN_IF_ERROR(RefreshRunState(db, run_id, now));
  return true;
}

}  // namespace

absl::StatusOr<std::vector<CancelledLease>> Store::CancelSweep(int64_t sweep_id,
                                                               absl::Time now) {
  std::vector<CancelledLease> cancelled;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    cancelled.clear();
    HLAB_RETURN_IF_ERROR(internal::RequireSweep(db, sweep_id));
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("UPDATE sweeps SET state = 'CANCELLED' WHERE id = ?"));
      st.Bind(1, sweep_id);
      HLAB_RETURN_IF_ERROR(st.Run());
    }
    std::vector<std::string> runs;
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("SELECT sr.run_id FROM sweep_runs sr"
                     " WHERE sr.sweep_id = ?1 AND NOT EXISTS ("
                     "   SELECT 1 FROM sweep_runs o JOIN sweeps s"
                     "   ON s.id = o.sweep_id WHERE o.run_id = sr.run_id"
                     "   AND o.sweep_id <> ?1 AND s.state = 'ACTIVE')"
                     " ORDER BY sr.run_id"));
      st.Bind(1, sweep_id);
      while (true) {
        HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
        if (!has_row) break;
        runs.push_back(st.ColumnText(0));
      }
    }
    for (const std::string& run : runs) {
      HLAB_RETURN_IF_ERROR(CancelRunInTxn(db, run, now, &cancelled));
    }
    HLAB_RETURN_IF_ERROR(
        CancelTasks(db,
                    "SELECT id FROM tasks WHERE sweep_id = ? AND run_id IS NULL"
                    " ORDER BY id",
                    "", sweep_id, now, &cancelled));
    return InsertEvent(db, sweep_id, "", "sweep_cancelled", "cancelled", now)
        .status();
  });
  BumpLeasableGeneration();  // even on failure: harmless, and never stale
  if (!status.ok()) return status;
  return cancelled;
}

absl::StatusOr<std::vector<CancelledLease>> Store::CancelRun(
    const std::string& run_id, absl::Time now) {
  std::vector<CancelledLease> cancelled;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    cancelled.clear();
    return CancelRunInTxn(db, run_id, now, &cancelled);
  });
  BumpLeasableGeneration();  // even on failure: harmless, and never stale
  if (!status.ok()) return status;
  return cancelled;
}

absl::StatusOr<std::vector<std::string>> Store::ResumeSweep(int64_t sweep_id,
                                                            absl::Time now) {
  std::vector<std::string> resumed;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    resumed.clear();
    HLAB_RETURN_IF_ERROR(internal::RequireSweep(db, sweep_id));
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("UPDATE sweeps SET state = 'ACTIVE', retries = 0"
                     " WHERE id = ?"));
      st.Bind(1, sweep_id);
      HLAB_RETURN_IF_ERROR(st.Run());
    }
    {
      // Not a trunk that only PREDICTED runs branch from (early stop).
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare(absl::StrCat(
              kReopenTask,
              "sweep_id = ?2 AND run_id IS NULL AND EXISTS (SELECT 1"
              " FROM task_deps d JOIN tasks t ON t.id = d.task_id"
              " JOIN runs r ON r.id = t.run_id WHERE d.depends_on = tasks.id"
              " AND r.state <> 'PREDICTED')")));
      st.Bind(1, ToMillis(now)).Bind(2, sweep_id);
      HLAB_RETURN_IF_ERROR(st.Run());
    }
    std::vector<std::string> runs;
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("SELECT run_id FROM sweep_runs WHERE sweep_id = ?"
                     " ORDER BY run_id"));
      st.Bind(1, sweep_id);
      while (true) {
        HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
        if (!has_row) break;
        runs.push_back(st.ColumnText(0));
      }
    }
    for (const std::string& run : runs) {
      HLAB_ASSIGN_OR_RETURN(bool done,
                            ResumeRunInTxn(db, run, ResumePredicted::kNo, now));
      if (done) resumed.push_back(run);
    }
    return InsertEvent(db, sweep_id, "", "sweep_resumed",
                       absl::StrCat(resumed.size(), " runs resumed"), now)
        .status();
  });
  BumpLeasableGeneration();  // even on failure: harmless, and never stale
  if (!status.ok()) return status;
  return resumed;
}

absl::StatusOr<std::vector<std::string>> Store::ResumeRuns(
    const std::vector<std::string>& run_ids, absl::Time now) {
  std::vector<std::string> resumed;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    resumed.clear();
    for (const std::string& run : run_ids) {
      HLAB_ASSIGN_OR_RETURN(
          bool done, ResumeRunInTxn(db, run, ResumePredicted::kYes, now));
      if (done) resumed.push_back(run);
    }
    return absl::OkStatus();
  });
  BumpLeasableGeneration();  // even on failure: harmless, and never stale
  if (!status.ok()) return status;
  return resumed;
}

absl::StatusOr<bool> Store::ReopenOnDemandTask(const std::string& task_id,
                                               absl::Time now) {
  bool reopened = false;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    reopened = false;
    HLAB_ASSIGN_OR_RETURN(LeaseRow row, LoadLeaseRow(db, task_id));
    if (!row.on_demand) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", task_id, " is part of run ", row.run_id,
                       "'s plan, not on-demand; `hlab resume --run ",
                       row.run_id, "` reopens it"));
    }
    if (row.state != TaskState::kFailed && row.state != TaskState::kCancelled) {
      return absl::OkStatus();
    }
    HLAB_ASSIGN_OR_RETURN(Statement st,
                          db.Prepare(absl::StrCat(kReopenTask, "id = ?2")));
    st.Bind(1, ToMillis(now)).Bind(2, task_id);
    HLAB_RETURN_IF_ERROR(st.Run());
    reopened = true;
    return InsertEvent(db, row.sweep_id, row.run_id, "task_reopened",
                       absl::StrCat("task ", task_id, " reopened (was ",
                                    ToString(row.state), ")"),
                       now)
        .status();
  });
  if (!status.ok()) return status;
  if (reopened) BumpLeasableGeneration();
  return reopened;
}

}  // namespace hlab::store
