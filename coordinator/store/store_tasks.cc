// Store: tasks, leases with fencing, retries and expiry. Cancel and resume
// are in store_lifecycle.cc.
#include <algorithm>
#include <future>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/internal/rows.h"
#include "coordinator/store/internal/transitions.h"
#include "coordinator/store/store.h"

namespace hlab::store {

using internal::CheckLease;
using internal::Exists;
using internal::FailAttempt;
using internal::HeartbeatWorkerInTxn;
using internal::InsertEvent;
using internal::LeaseRow;
using internal::LoadLeaseRow;
using internal::RefreshRunState;

namespace {

absl::Status ExtendLeaseInTxn(Database& db, const std::string& task_id,
                              int attempt, const std::string& worker_id,
                              absl::Time now, absl::Duration lease) {
  HLAB_ASSIGN_OR_RETURN(LeaseRow row, CheckLease(db, task_id, attempt));
  if (row.lease_worker != worker_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " attempt ", attempt, " is leased to ",
                     row.lease_worker, ", not ", worker_id));
  }
  if (row.lease_expiry <= now) {
    return absl::FailedPreconditionError(
        absl::StrCat("lease of task ", task_id, " attempt ", attempt,
                     " expired at ", absl::FormatTime(row.lease_expiry)));
  }
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("UPDATE tasks SET lease_expiry = ? WHERE id = ?"));
  st.Bind(1, ToMillis(now + lease)).Bind(2, task_id);
  return st.Run();
}

}  // namespace

absl::StatusOr<int> Store::AddTasks(const std::vector<TaskSpec>& tasks,
                                    absl::Time now) {
  for (const TaskSpec& task : tasks) {
    if (task.id.empty())
      return absl::InvalidArgumentError("a task needs an id");
    if (task.run_id.empty() && task.kind != TaskKind::kTrunk) {
      return absl::InvalidArgumentError(
          absl::StrCat("task ", task.id, ": only a TRUNK task has no run"));
    }
  }
  int added = 0;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    added = 0;
    std::set<std::string> earlier;
    std::set<std::string> runs;
    const int64_t now_ms = ToMillis(now);
    for (const TaskSpec& task : tasks) {
      HLAB_ASSIGN_OR_RETURN(
          bool sweep_known,
          Exists(db, "SELECT 1 FROM sweeps WHERE id = ?", task.sweep_id));
      if (!sweep_known) {
        return absl::InvalidArgumentError(
            absl::StrCat("task ", task.id, ": unknown sweep ", task.sweep_id));
      }
      int max_attempts = task.max_attempts;
      if (!task.run_id.empty()) {
        HLAB_ASSIGN_OR_RETURN(
            Statement st,
            db.Prepare("SELECT max_attempts FROM runs WHERE id = ?"));
        st.Bind(1, task.run_id);
        HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
        if (!has_row) {
          return absl::InvalidArgumentError(
              absl::StrCat("task ", task.id, ": unknown run ", task.run_id));
        }
        if (max_attempts <= 0) max_attempts = static_cast<int>(st.ColumnInt(0));
        runs.insert(task.run_id);
      }
      if (max_attempts <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "task ", task.id,
            ": a task without a run needs max_attempts >= 1 (the sweep's"
            " retry.max_attempts_per_run)"));
      }
      for (const std::string& dep : task.depends_on) {
        if (earlier.count(dep) > 0) continue;
        HLAB_ASSIGN_OR_RETURN(
            bool known, Exists(db, "SELECT 1 FROM tasks WHERE id = ?", dep));
        if (!known) {
          return absl::InvalidArgumentError(
              absl::StrCat("task ", task.id, " depends on unknown task ", dep,
                           " (add dependencies first)"));
        }
      }
      earlier.insert(task.id);
      HLAB_ASSIGN_OR_RETURN(
          Statement insert,
          db.Prepare("INSERT OR IGNORE INTO tasks (id, sweep_id, run_id,"
                     " trunk_group, kind, priority, cost_flops, payload,"
                     " max_attempts, created_at, updated_at, on_demand,"
                     " gpus, gpu_memory_bytes, cpu_threads, cpu_ranks)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                     " ?)"));
      insert.Bind(1, task.id).Bind(2, task.sweep_id);
      insert.BindTextOrNull(3, task.run_id).BindTextOrNull(4, task.trunk_group);
      insert.Bind(5, ToString(task.kind)).Bind(6, task.priority);
      insert.Bind(7, task.cost_flops).Bind(8, task.payload);
      insert.Bind(9, max_attempts).Bind(10, now_ms).Bind(11, now_ms);
      insert.Bind(12, int64_t{task.on_demand ? 1 : 0});
      const TaskResources& r = task.resources;
      insert.Bind(13, int64_t{r.gpus}).Bind(14, r.gpu_memory_bytes);
      insert.Bind(15, int64_t{r.cpu_threads}).Bind(16, int64_t{r.cpu_ranks});
      HLAB_RETURN_IF_ERROR(insert.Run());
      if (insert.changes() == 0) continue;  // already stored
      ++added;
      HLAB_ASSIGN_OR_RETURN(
          Statement dep_insert,
          db.Prepare("INSERT OR IGNORE INTO task_deps (task_id, depends_on)"
                     " VALUES (?, ?)"));
      for (const std::string& dep : task.depends_on) {
        dep_insert.Bind(1, task.id).Bind(2, dep);
        HLAB_RETURN_IF_ERROR(dep_insert.Run());
        dep_insert.Reset();
      }
    }
    for (const std::string& run : runs) {
      HLAB_RETURN_IF_ERROR(RefreshRunState(db, run, now));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (added > 0) BumpLeasableGeneration();
  return added;
}

absl::StatusOr<Task> Store::GetTask(const std::string& task_id) {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(
      std::vector<Task> tasks,
      internal::QueryTasks(*reader_,
                           absl::StrCat("SELECT ", internal::kTaskColumns,
                                        " FROM tasks WHERE id = ?"),
                           [&](Statement& st) { st.Bind(1, task_id); }));
  if (tasks.empty()) {
    return absl::NotFoundError(absl::StrCat("unknown task ", task_id));
  }
  return std::move(tasks.front());
}

absl::StatusOr<std::vector<Task>> Store::ListTasks(const TaskFilter& filter) {
  // Only the filters given go into the SQL, so each can use its index.
  std::string sql =
      absl::StrCat("SELECT ", internal::kTaskColumns, " FROM tasks WHERE 1");
  if (filter.sweep_id) absl::StrAppend(&sql, " AND sweep_id = ?1");
  if (!filter.run_id.empty()) absl::StrAppend(&sql, " AND run_id = ?2");
  if (filter.state) absl::StrAppend(&sql, " AND state = ?3");
  if (!filter.lease_worker.empty()) {
    absl::StrAppend(&sql, " AND state = 'LEASED' AND lease_worker = ?4");
  }
  absl::StrAppend(&sql, " ORDER BY created_at, id");
  absl::MutexLock lock(&reader_mu_);
  return internal::QueryTasks(*reader_, sql, [&](Statement& st) {
    if (filter.sweep_id) st.Bind(1, *filter.sweep_id);
    if (!filter.run_id.empty()) st.Bind(2, filter.run_id);
    if (filter.state) st.Bind(3, ToString(*filter.state));
    if (!filter.lease_worker.empty()) st.Bind(4, filter.lease_worker);
  });
}

absl::StatusOr<std::vector<Task>> Store::NextLeasableTasks(absl::Time now,
                                                           int limit) {
  // The blocked tasks as one list, computed once (a join over task_deps),
  // not a correlated subquery per candidate: a sweep's EVAL tasks cost
  // nothing, so they come first in this order and, while their runs train,
  // every one of them is blocked. With 1,536 such EVALs in the churn
  // profile (hlab-bench-coordinator) the correlated form took 10 ms and
  // this one 2 ms; the lease queue reloads with it after every completion.
  absl::MutexLock lock(&lease_reader_mu_);
  return internal::QueryTasks(
      *lease_reader_,
      absl::StrCat(
          "SELECT ", internal::kTaskColumns,
          " FROM tasks t WHERE t.state = 'PENDING' AND t.not_before <= ?1"
          " AND t.id NOT IN (SELECT d.task_id FROM task_deps d JOIN tasks u"
          "   ON u.id = d.depends_on WHERE u.state <> 'SUCCEEDED')"
          " ORDER BY t.priority DESC, coalesce(t.order_key, t.cost_flops),"
          " t.id LIMIT ?2"),
      [&](Statement& st) { st.Bind(1, ToMillis(now)).Bind(2, limit); });
}

absl::StatusOr<std::vector<Task>> Store::UnblockedTasks(
    const std::vector<std::string>& task_ids) {
  std::vector<Task> tasks;
  std::set<std::string> seen;
  absl::MutexLock lock(&lease_reader_mu_);
  for (const std::string& id : task_ids) {
    if (!seen.insert(id).second) continue;  // two of its dependencies done
    HLAB_ASSIGN_OR_RETURN(
        std::vector<Task> one,
        internal::QueryTasks(
            *lease_reader_,
            absl::StrCat(
                "SELECT ", internal::kTaskColumns,
                " FROM tasks t WHERE t.id = ?1"
                " AND t.state = 'PENDING' AND NOT EXISTS (SELECT 1"
                "   FROM task_deps d JOIN tasks u"
                "   ON u.id = d.depends_on"
                "   WHERE d.task_id = t.id AND u.state <> 'SUCCEEDED')"),
            [&](Statement& st) { st.Bind(1, id); }));
    for (Task& task : one) tasks.push_back(std::move(task));
  }
  std::sort(tasks.begin(), tasks.end(), LeasesBefore);
  return tasks;
}

void Store::BumpLeasableGeneration() {
  absl::MutexLock lock(&leasable_mu_);
  LeasableChange change;
  change.generation =
      leasable_generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  leasable_changes_.push_back(std::move(change));
  if (static_cast<int64_t>(leasable_changes_.size()) > kLeasableChangesKept) {
    leasable_changes_.pop_front();
  }
}

void Store::NoteCompletion(std::vector<std::string> dependents) {
  absl::MutexLock lock(&leasable_mu_);
  LeasableChange change;
  change.generation =
      leasable_generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  change.completion = true;
  change.dependents = std::move(dependents);
  leasable_changes_.push_back(std::move(change));
  if (static_cast<int64_t>(leasable_changes_.size()) > kLeasableChangesKept) {
    leasable_changes_.pop_front();
  }
}

Store::LeasableChanges Store::LeasableChangesSince(int64_t since) const {
  absl::MutexLock lock(&leasable_mu_);
  LeasableChanges changes;
  changes.generation = leasable_generation_.load(std::memory_order_acquire);
  if (since == changes.generation) {
    changes.dependents.emplace();
    return changes;
  }
  // Generations move one at a time with an entry each, so the entries
  // after `since` are the last (generation - since) ones, if kept.
  const int64_t moved = changes.generation - since;
  if (since > changes.generation ||
      moved > static_cast<int64_t>(leasable_changes_.size())) {
    return changes;
  }
  std::vector<std::string> dependents;
  for (auto it = leasable_changes_.end() - moved; it != leasable_changes_.end();
       ++it) {
    if (!it->completion) return changes;
    dependents.insert(dependents.end(), it->dependents.begin(),
                      it->dependents.end());
  }
  changes.dependents = std::move(dependents);
  return changes;
}

absl::StatusOr<std::optional<absl::Time>> Store::NextBackoffEnd(
    absl::Time now) {
  absl::MutexLock lock(&lease_reader_mu_);
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      lease_reader_->Prepare("SELECT MIN(not_before) FROM tasks"
                             " WHERE state = 'PENDING' AND not_before > ?"));
  st.Bind(1, ToMillis(now));
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row || st.IsNull(0)) return std::optional<absl::Time>();
  return std::optional<absl::Time>(FromMillis(st.ColumnInt(0)));
}

absl::StatusOr<int> Store::LeaseTask(const std::string& task_id,
                                     const std::string& worker_id,
                                     absl::Time now, absl::Duration lease) {
  if (worker_id.empty()) {
    return absl::InvalidArgumentError("a lease needs a worker id");
  }
  int attempt = 0;
  const WriteOrder order = WriteOrder::LeaseCritical(task_id);
  absl::Status status = writer_->Run(order, [&](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(
        bool draining,
        Exists(db, "SELECT 1 FROM workers WHERE id = ? AND draining = 1",
               worker_id));
    if (draining) {
      return absl::UnavailableError(
          absl::StrCat("worker ", worker_id,
                       " is draining: it takes no new tasks until `hlab "
                       "undrain ",
                       worker_id, "`"));
    }
    HLAB_ASSIGN_OR_RETURN(LeaseRow row, LoadLeaseRow(db, task_id));
    if (row.state != TaskState::kPending) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", task_id, " is ", ToString(row.state), ", not PENDING"));
    }
    HLAB_ASSIGN_OR_RETURN(
        bool blocked,
        Exists(db,
               "SELECT 1 FROM task_deps d JOIN tasks u ON u.id = d.depends_on"
               " WHERE d.task_id = ? AND u.state <> 'SUCCEEDED'",
               task_id));
    if (blocked) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task ", task_id, " has dependencies that have not succeeded"));
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement st, db.Prepare("SELECT not_before FROM tasks WHERE id = ?"));
    st.Bind(1, task_id);
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (has_row && st.ColumnInt(0) > ToMillis(now)) {
      return absl::FailedPreconditionError(
          absl::StrCat("task ", task_id, " is backing off until ",
                       absl::FormatTime(FromMillis(st.ColumnInt(0)))));
    }
    attempt = row.attempt + 1;
    const int64_t now_ms = ToMillis(now);
    HLAB_ASSIGN_OR_RETURN(
        Statement update,
        db.Prepare("UPDATE tasks SET state = 'LEASED', attempt = ?,"
                   " lease_worker = ?, lease_expiry = ?, updated_at = ?"
                   " WHERE id = ?"));
    update.Bind(1, attempt).Bind(2, worker_id);
    update.Bind(3, ToMillis(now + lease)).Bind(4, now_ms).Bind(5, task_id);
    HLAB_RETURN_IF_ERROR(update.Run());
    HLAB_ASSIGN_OR_RETURN(
        Statement record,
        db.Prepare("INSERT INTO attempts (task_id, attempt, worker_id,"
                   " started_at) VALUES (?, ?, ?, ?)"));
    record.Bind(1, task_id).Bind(2, attempt).Bind(3, worker_id).Bind(4, now_ms);
    HLAB_RETURN_IF_ERROR(record.Run());
    return internal::RefreshRunsOfTask(db, row, now);
  });
  if (!status.ok()) return status;
  return attempt;
}

absl::Status Store::ExtendLease(const std::string& task_id, int attempt,
                                const std::string& worker_id, absl::Time now,
                                absl::Duration lease) {
  return writer_->Run(WriteOrder::LeaseCritical(), [&](Database& db) {
    return ExtendLeaseInTxn(db, task_id, attempt, worker_id, now, lease);
  });
}

absl::Status Store::HeartbeatAndExtend(
    const std::string& worker_id,
    const std::vector<std::pair<std::string, int>>& held, absl::Time now,
    absl::Duration lease, std::vector<absl::Status>* extended) {
  std::promise<std::pair<absl::Status, std::vector<absl::Status>>> promise;
  auto future = promise.get_future();
  HeartbeatAndExtendAsync(
      worker_id, held, now, lease,
      [&promise](absl::Status status, std::vector<absl::Status> statuses) {
        promise.set_value({std::move(status), std::move(statuses)});
      });
  auto [status, statuses] = future.get();
  if (status.ok() && extended != nullptr) *extended = std::move(statuses);
  return status;
}

void Store::HeartbeatAndExtendAsync(
    std::string worker_id, std::vector<std::pair<std::string, int>> held,
    absl::Time now, absl::Duration lease, HeartbeatDone done) {
  // WriteOp and WriteDone are std::function (copyable): share the state.
  struct Beat {
    std::string worker_id;
    std::vector<std::pair<std::string, int>> held;
    std::vector<absl::Status> statuses;
  };
  auto beat = std::make_shared<Beat>();
  beat->worker_id = std::move(worker_id);
  beat->held = std::move(held);
  // Ahead of queued metric batches, even of its own tasks: an extension
  // changes only lease_expiry, which they do not read (ExpireLeases does:
  // overtaken, it finds the lease extended, as a moment later).
  writer_->SubmitAsync(
      [beat, now, lease](Database& db) -> absl::Status {
        beat->statuses.clear();
        HLAB_RETURN_IF_ERROR(HeartbeatWorkerInTxn(db, beat->worker_id, now));
        for (const auto& [task_id, attempt] : beat->held) {
          // A refused extension writes nothing: it needs no savepoint.
          absl::Status one = ExtendLeaseInTxn(db, task_id, attempt,
                                              beat->worker_id, now, lease);
          if (!one.ok() &&
              one.code() != absl::StatusCode::kFailedPrecondition &&
              one.code() != absl::StatusCode::kNotFound) {
            return one;
          }
          beat->statuses.push_back(std::move(one));
        }
        return absl::OkStatus();
      },
      [beat, done = std::move(done)](absl::Status status) {
        std::vector<absl::Status> statuses;
        if (status.ok()) statuses = std::move(beat->statuses);
        done(std::move(status), std::move(statuses));
      },
      WriteOrder::LeaseCritical());
}

absl::Status Store::CompleteTask(const std::string& task_id, int attempt,
                                 absl::Time now) {
  std::vector<std::string> dependents;
  // After the metric batches, checkpoints and evaluations of the task
  // queued before it, ahead of every other task's.
  const WriteOrder order = WriteOrder::LeaseCritical(task_id);
  absl::Status status = writer_->Run(order, [&](Database& db) -> absl::Status {
    dependents.clear();
    HLAB_ASSIGN_OR_RETURN(LeaseRow row, CheckLease(db, task_id, attempt));
    const int64_t now_ms = ToMillis(now);
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare(
              "UPDATE tasks SET state = 'SUCCEEDED', lease_expiry = NULL,"
              " failure_reason = NULL, updated_at = ? WHERE id = ?"));
      st.Bind(1, now_ms).Bind(2, task_id);
      HLAB_RETURN_IF_ERROR(st.Run());
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE attempts SET outcome = 'SUCCEEDED', ended_at = ?"
                   " WHERE task_id = ? AND attempt = ?"));
    st.Bind(1, now_ms).Bind(2, task_id).Bind(3, attempt);
    HLAB_RETURN_IF_ERROR(st.Run());
    HLAB_ASSIGN_OR_RETURN(
        Statement deps,
        db.Prepare("SELECT task_id FROM task_deps WHERE depends_on = ?"));
    deps.Bind(1, task_id);
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, deps.Step());
      if (!has_row) break;
      dependents.push_back(deps.ColumnText(0));
    }
    return internal::RefreshRunsOfTask(db, row, now);
  });
  // Its dependents may be leasable now: only they.
  if (status.ok() && !dependents.empty()) {
    NoteCompletion(std::move(dependents));
  }
  return status;
}

absl::StatusOr<TaskState> Store::FailTask(const std::string& task_id,
                                          int attempt,
                                          const AttemptFailure& failure,
                                          absl::Time now,
                                          absl::Duration backoff) {
  TaskState next = TaskState::kFailed;
  const WriteOrder order = WriteOrder::LeaseCritical(task_id);
  absl::Status status = writer_->Run(order, [&](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(LeaseRow row, CheckLease(db, task_id, attempt));
    HLAB_ASSIGN_OR_RETURN(
        next, FailAttempt(db, row, failure, "FAILED", now, backoff));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  // Requeued: leasable now or once its backoff ends. Failed for good (with
  // its dependents): nothing became leasable.
  if (next == TaskState::kPending) BumpLeasableGeneration();
  return next;
}

absl::StatusOr<std::vector<ExpiredLease>> Store::ExpireLeases(
    absl::Time now, absl::Duration backoff) {
  std::vector<ExpiredLease> expired;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    expired.clear();
    std::vector<std::string> ids;
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("SELECT id FROM tasks WHERE state = 'LEASED'"
                     " AND lease_expiry <= ? ORDER BY lease_expiry, id"));
      st.Bind(1, ToMillis(now));
      while (true) {
        HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
        if (!has_row) break;
        ids.push_back(st.ColumnText(0));
      }
    }
    for (const std::string& id : ids) {
      HLAB_ASSIGN_OR_RETURN(LeaseRow row, LoadLeaseRow(db, id));
      HLAB_ASSIGN_OR_RETURN(
          TaskState next,
          FailAttempt(db, row,
                      AttemptFailure{absl::StrCat("lease expired (worker ",
                                                  row.lease_worker, ")"),
                                     FaultClass::kInfrastructure, true},
                      "EXPIRED", now, backoff));
      expired.push_back(ExpiredLease{row.id, row.attempt, row.lease_worker,
                                     next == TaskState::kPending});
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (!expired.empty()) BumpLeasableGeneration();
  return expired;
}

absl::StatusOr<std::vector<ExpiredLease>> Store::DeregisterWorker(
    const std::string& worker_id, absl::Time now, absl::Duration backoff) {
  std::vector<ExpiredLease> requeued;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    requeued.clear();
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("UPDATE workers SET state = 'LOST' WHERE id = ?"));
      st.Bind(1, worker_id);
      HLAB_RETURN_IF_ERROR(st.Run());
      if (st.changes() == 0) {
        return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
      }
    }
    std::vector<std::string> ids;
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st, db.Prepare("SELECT id FROM tasks WHERE state = 'LEASED'"
                                   " AND lease_worker = ? ORDER BY id"));
      st.Bind(1, worker_id);
      while (true) {
        HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
        if (!has_row) break;
        ids.push_back(st.ColumnText(0));
      }
    }
    for (const std::string& id : ids) {
      HLAB_ASSIGN_OR_RETURN(LeaseRow row, LoadLeaseRow(db, id));
      HLAB_ASSIGN_OR_RETURN(
          TaskState next,
          FailAttempt(
              db, row,
              AttemptFailure{absl::StrCat("worker ", worker_id, " left"),
                             FaultClass::kInfrastructure, true},
              "EXPIRED", now, backoff));
      requeued.push_back(ExpiredLease{row.id, row.attempt, row.lease_worker,
                                      next == TaskState::kPending});
    }
    return InsertEvent(db, 0, "", "worker_left", worker_id, now).status();
  });
  if (!status.ok()) return status;
  if (!requeued.empty()) BumpLeasableGeneration();
  return requeued;
}

}  // namespace hlab::store
