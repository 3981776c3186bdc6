// Store: early stop, runs the live predictions already know well enough
// become PREDICTED without being trained (docs/sweeps.md, "Early stop").
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "coordinator/store/internal/rows.h"
#include "coordinator/store/internal/transitions.h"
#include "coordinator/store/store.h"

namespace hlab::store {
namespace {

// 1 when run ?1 may be stopped for sweep ?2 (Store::StopPredictedRuns): it
// is PENDING, a member of that sweep only, none of its own TRAIN or DECAY
// tasks was ever leased, no task of another run waits for one of its
// tasks, and it was never PREDICTED before (one resumed with `hlab resume
// --run` is trained as asked).
constexpr char kStoppableSql[] = R"sql(
SELECT 1 FROM runs r WHERE r.id = ?1 AND r.state = 'PENDING'
  AND EXISTS (SELECT 1 FROM sweep_runs sr
              WHERE sr.run_id = r.id AND sr.sweep_id = ?2)
  AND NOT EXISTS (SELECT 1 FROM sweep_runs sr
                  WHERE sr.run_id = r.id AND sr.sweep_id <> ?2)
  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = r.id
                  AND t.on_demand = 0 AND t.kind IN ('TRAIN', 'DECAY')
                  AND (t.state <> 'PENDING' OR t.attempt > 0))
  AND NOT EXISTS (SELECT 1 FROM task_deps d
                  JOIN tasks mine ON mine.id = d.depends_on
                  JOIN tasks other ON other.id = d.task_id
                  WHERE mine.run_id = r.id AND other.run_id IS NOT r.id)
  AND NOT EXISTS (SELECT 1 FROM events e WHERE e.sweep_id = ?2
                  AND e.run_id = r.id AND e.kind = 'run_state'
                  AND e.message LIKE 'PREDICTED%')
)sql";

// The TRUNK tasks run ?1's DECAY depends on that never started and that
// only PREDICTED runs branch from. A trunk segment's successor does not
// keep it (sweep/expand.h: the DECAY of every run past it depends on it
// too), so the segments cancelled are those past the last one a run that
// is not PREDICTED needs.
constexpr char kIdleTrunksSql[] = R"sql(
SELECT DISTINCT u.id FROM tasks own
  JOIN task_deps x ON x.task_id = own.id
  JOIN tasks u ON u.id = x.depends_on
WHERE own.run_id = ?1 AND own.kind = 'DECAY' AND u.kind = 'TRUNK'
  AND u.state = 'PENDING' AND u.attempt = 0
  AND NOT EXISTS (SELECT 1 FROM task_deps d
                  JOIN tasks t ON t.id = d.task_id
                  LEFT JOIN runs r ON r.id = t.run_id
                  WHERE d.depends_on = u.id AND t.kind <> 'TRUNK'
                  AND (r.id IS NULL OR r.state <> 'PREDICTED'))
ORDER BY u.id
)sql";

absl::StatusOr<bool> Stoppable(Database& db, int64_t sweep_id,
                               const std::string& run_id) {
  HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare(kStoppableSql));
  st.Bind(1, run_id).Bind(2, sweep_id);
  return st.Step();
}

// Marks one stoppable run PREDICTED: its PENDING planned tasks and the
// trunks only it and other PREDICTED runs needed are CANCELLED. None of
// them is leased, so there is no lease to end.
absl::Status StopRunInTxn(Database& db, const std::string& run_id,
                          const std::string& reason, absl::Time now) {
  const int64_t now_ms = ToMillis(now);
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE tasks SET state = 'CANCELLED', updated_at = ?"
                   " WHERE run_id = ? AND on_demand = 0"
                   " AND state = 'PENDING'"));
    st.Bind(1, now_ms).Bind(2, run_id);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  {
    internal::RunStateChange change;
    change.failure_reason = "";
    change.detail = reason;
    HLAB_RETURN_IF_ERROR(
        internal::WriteRunState(db, run_id, RunState::kPredicted, change, now));
  }
  std::vector<std::string> trunks;
  {
    HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare(kIdleTrunksSql));
    st.Bind(1, run_id);
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (!has_row) break;
      trunks.push_back(st.ColumnText(0));
    }
  }
  for (const std::string& trunk : trunks) {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE tasks SET state = 'CANCELLED', updated_at = ?"
                   " WHERE id = ? AND state = 'PENDING'"));
    st.Bind(1, now_ms).Bind(2, trunk);
    HLAB_RETURN_IF_ERROR(st.Run());
  }
  return internal::RefreshRunPhase(db, run_id, now);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> Store::StopPredictedRuns(
    int64_t sweep_id, const std::vector<std::string>& run_ids,
    const std::string& reason, absl::Time now) {
  std::vector<std::string> stopped;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    stopped.clear();
    HLAB_RETURN_IF_ERROR(internal::RequireSweep(db, sweep_id));
    for (const std::string& run : run_ids) {
      HLAB_ASSIGN_OR_RETURN(bool stoppable, Stoppable(db, sweep_id, run));
      if (!stoppable) continue;
      HLAB_RETURN_IF_ERROR(StopRunInTxn(db, run, reason, now));
      stopped.push_back(run);
    }
    return absl::OkStatus();
  });
  // Cancelling makes nothing leasable; the bump only keeps caches honest.
  BumpLeasableGeneration();
  if (!status.ok()) return status;
  return stopped;
}

}  // namespace hlab::store
