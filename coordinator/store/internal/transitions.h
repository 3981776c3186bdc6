// State transitions shared by the store's write operations: lease fencing,
// failing an attempt (retry or give up), failing dependents, and deriving a
// run's state from its tasks. Private to coordinator/store.
//
// Thread-safety: each function runs on the writer thread, inside the
// operation's transaction (writer.h), over the writer's Database.
//
//   HLAB_ASSIGN_OR_RETURN(LeaseRow row, CheckLease(db, task_id, attempt));
//   ... write on behalf of the lease ...
//   HLAB_RETURN_IF_ERROR(RefreshRunState(db, row.run_id, now));
#ifndef HLAB_COORDINATOR_STORE_INTERNAL_TRANSITIONS_H_
#define HLAB_COORDINATOR_STORE_INTERNAL_TRANSITIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "coordinator/store/database.h"
#include "coordinator/store/types.h"

namespace hlab::store::internal {

// The lease-relevant columns of one task.
struct LeaseRow {
  std::string id;
  int64_t sweep_id = 0;
  std::string run_id;  // empty for a TRUNK task
  TaskState state = TaskState::kPending;
  int attempt = 0;
  int failures = 0;        // task errors
  int infra_failures = 0;  // infrastructure faults
  int max_attempts = 0;
  std::string lease_worker;
  absl::Time lease_expiry = absl::InfinitePast();
  bool on_demand = false;  // TaskSpec::on_demand
};

// NotFound for an unknown task.
absl::StatusOr<LeaseRow> LoadLeaseRow(Database& db, const std::string& task_id);

// Records a heartbeat of `worker_id` (UP, last_heartbeat now); NotFound for
// an unknown worker.
absl::Status HeartbeatWorkerInTxn(Database& db, const std::string& worker_id,
                                  absl::Time now);

// The fencing check: OK only if the task is LEASED with `attempt`;
// FailedPrecondition ("stale attempt") otherwise, NotFound if unknown.
absl::StatusOr<LeaseRow> CheckLease(Database& db, const std::string& task_id,
                                    int attempt);

// Appends one event; returns its seq. sweep_id 0 and empty run_id are NULL.
// The sweeps a run belongs to (a run can be shared by several).
// The stored state of run `run_id`; NotFound "unknown run ID" when there is
// none.
absl::StatusOr<RunState> ReadRunState(Database& db, const std::string& run_id);

absl::StatusOr<std::vector<int64_t>> SweepsOfRun(Database& db,
                                                 const std::string& run_id);

absl::StatusOr<int64_t> InsertEvent(Database& db, int64_t sweep_id,
                                    absl::string_view run_id,
                                    absl::string_view kind,
                                    absl::string_view message, absl::Time now);

// After a run of `sweep_id` ended: when none of the sweep's runs is
// PENDING or RUNNING any more and the sweep is not CANCELLED (its cancel
// writes "sweep_cancelled"), a "sweep_finished" event whose message says
// how ("SUCCEEDED: 12 runs", "SUCCEEDED: 12 runs, 3 predicted" or
// "INCOMPLETE: 10 succeeded, 1 failed, 1 cancelled, 0 predicted"). A
// resumed sweep that ends again gets another.
absl::Status NoteSweepEnd(Database& db, int64_t sweep_id, absl::Time now);

// What WriteRunState changes in a run besides its state.
struct RunStateChange {
  // runs.failure_reason: kept when unset, NULL when empty.
  std::optional<std::string> failure_reason;
  bool reset_retries = false;  // runs.retries = 0 (a resume)
  // The "run_state" event's message is "STATE", or "STATE: detail".
  std::string detail;
};

// Stores run `run_id`'s new state: runs.state, updated_at and what `change`
// names; a "run_state" event per sweep of the run; and, for an end state
// (SUCCEEDED, FAILED, CANCELLED, PREDICTED), NoteSweepEnd of each sweep.
// Every change of a run's state goes through it: RefreshRunState, a
// cancel, a resume and an early stop.
absl::Status WriteRunState(Database& db, const std::string& run_id,
                           RunState state, const RunStateChange& change,
                           absl::Time now);

// Derives the run's state from its tasks, on-demand ones left out (rule in
// store.h), and stores it if
// it changed, with a "run_state" event per sweep of the run; then refreshes
// its phase (RefreshRunPhase). No-op for an empty run id.
absl::Status RefreshRunState(Database& db, const std::string& run_id,
                             absl::Time now);

// The phase of the run `runs.id` as an SQL expression over the row of
// `runs` (RunPhase in types.h): its end state; else DECAYING or TRAINING
// while its own DECAY or TRAIN task is leased; else TRUNK while the TRUNK
// task its DECAY depends on is leased; else EVALUATING while one of its
// planned EVAL tasks is leased; else WAITING. Schema v7 (schema.cc) holds a
// frozen copy of the rule as released: changing this one leaves v7 as is.
extern const char kRunPhaseSql[];

// Appends a "run_progress" event to every sweep of the run: its phase and
// progress (the columns of `events` that other kinds leave NULL).
absl::Status InsertProgressEvents(Database& db, const std::string& run_id,
                                  RunPhase phase, const RunProgress& progress,
                                  absl::Time now);

// Stores the run's phase (kRunPhaseSql) if it changed, with a
// "run_progress" event per sweep of the run unless the new phase is an end
// state (a "run_state" event says that). No-op for an empty run id.
absl::Status RefreshRunPhase(Database& db, const std::string& run_id,
                             absl::Time now);

// RefreshRunState of the task's run or, for a TRUNK task (no run), the
// phase of each run whose DECAY task depends on it.
absl::Status RefreshRunsOfTask(Database& db, const LeaseRow& row,
                               absl::Time now);

// How many "run_progress" events the metrics of one run append at most
// (one each time its tokens pass another 1/kProgressEventsPerRun of its
// budget), besides those of its phase changes.
inline constexpr int64_t kProgressEventsPerRun = 1000;

// After new metric points of `run_id`: stores its progress (its newest
// `train_loss` point, tokens at most its budget) if it moved, and appends a
// "run_progress" event per sweep when its tokens passed another
// 1/kProgressEventsPerRun of the budget (or it had none) and it has not
// ended.
absl::Status RecordRunProgress(Database& db, const std::string& run_id,
                               absl::Time now);

// Ends the leased attempt of `row` with `outcome` ("FAILED" or "EXPIRED")
// and either requeues the task (PENDING, not_before = now + backoff) or
// fails it for good, with its dependents, by the budget rule of
// Store::FailTask. Returns the new task state.
absl::StatusOr<TaskState> FailAttempt(Database& db, const LeaseRow& row,
                                      const AttemptFailure& failure,
                                      absl::string_view outcome, absl::Time now,
                                      absl::Duration backoff);

}  // namespace hlab::store::internal

#endif  // HLAB_COORDINATOR_STORE_INTERNAL_TRANSITIONS_H_
