// Store: metrics, checkpoints, evals, fits, the event log and workers.
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/internal/rows.h"
#include "coordinator/store/internal/transitions.h"
#include "coordinator/store/store.h"

namespace hlab::store {

using internal::CheckLease;
using internal::LeaseRow;

namespace {

// The run a point or record written by `row`'s task belongs to (a view of
// `row` or `named`: no copy per point).
absl::StatusOr<absl::string_view> RunFor(const LeaseRow& row,
                                         const std::string& named) {
  if (named.empty()) {
    if (row.run_id.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", row.id, " is a trunk: its records must name a run"));
    }
    return row.run_id;
  }
  if (!row.run_id.empty() && named != row.run_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", row.id, " belongs to run ", row.run_id, ", not ", named));
  }
  return named;
}

// Turns a foreign-key failure (an unknown run) into InvalidArgument.
absl::Status UnknownRunIsInvalid(absl::Status status) {
  if (status.code() == absl::StatusCode::kFailedPrecondition) {
    return absl::InvalidArgumentError(status.message());
  }
  return status;
}

absl::Status WriteMetrics(Database& db, const std::string& task_id, int attempt,
                          const std::string& worker_id,
                          const std::vector<MetricPoint>& points,
                          absl::Time now, int64_t* inserted) {
  int64_t added = 0;
  HLAB_ASSIGN_OR_RETURN(LeaseRow row, CheckLease(db, task_id, attempt));
  if (!worker_id.empty() && row.lease_worker != worker_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " attempt ", attempt, " is leased to ",
                     row.lease_worker, ", not ", worker_id));
  }
  HLAB_ASSIGN_OR_RETURN(
      Statement insert,
      db.Prepare("INSERT OR IGNORE INTO metrics (run_id, name, step, value,"
                 " tokens, wall_time) VALUES (?, ?, ?, ?, ?, ?)"));
  // Runs with new training-loss points: their progress moves.
  std::set<std::string> moved;
  for (const MetricPoint& point : points) {
    HLAB_ASSIGN_OR_RETURN(absl::string_view run, RunFor(row, point.run_id));
    insert.Bind(1, run).Bind(2, point.name).Bind(3, point.step);
    insert.Bind(4, point.value).Bind(5, point.tokens).Bind(6, point.wall_time);
    HLAB_RETURN_IF_ERROR(UnknownRunIsInvalid(insert.Run()));
    if (insert.changes() > 0 && point.name == "train_loss") {
      moved.emplace(run);
    }
    added += insert.changes();
    insert.Reset();
  }
  for (const std::string& run : moved) {
    HLAB_RETURN_IF_ERROR(internal::RecordRunProgress(db, run, now));
  }
  if (inserted != nullptr) *inserted = added;
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------- metrics

absl::Status Store::RecordMetrics(const std::string& task_id, int attempt,
                                  const std::vector<MetricPoint>& points,
                                  absl::Time now, int64_t* inserted,
                                  const std::string& worker_id) {
  // A failed operation is rolled back to its savepoint: report nothing new.
  int64_t added = 0;
  absl::Status status = writer_->Run(
      WriteOrder::Bulk(task_id, static_cast<int64_t>(points.size())),
      [&](Database& db) {
        return WriteMetrics(db, task_id, attempt, worker_id, points, now,
                            &added);
      });
  if (inserted != nullptr) *inserted = status.ok() ? added : 0;
  return status;
}

void Store::RecordMetricsAsync(std::string task_id, int attempt,
                               std::vector<MetricPoint> points,
                               std::string worker_id, absl::Time now,
                               MetricsDone done) {
  // WriteOp and WriteDone are std::function (copyable): share the batch.
  struct Batch {
    std::string task_id, worker_id;
    int attempt = 0;
    std::vector<MetricPoint> points;
    absl::Time now;
    int64_t added = 0;
  };
  auto batch = std::make_shared<Batch>();
  batch->task_id = std::move(task_id);
  batch->worker_id = std::move(worker_id);
  batch->attempt = attempt;
  batch->points = std::move(points);
  batch->now = now;
  WriteOrder order = WriteOrder::Bulk(
      batch->task_id, static_cast<int64_t>(batch->points.size()));
  writer_->SubmitAsync(
      [batch](Database& db) {
        return WriteMetrics(db, batch->task_id, batch->attempt,
                            batch->worker_id, batch->points, batch->now,
                            &batch->added);
      },
      [batch, done = std::move(done)](absl::Status status) {
        // A failed operation was rolled back to its savepoint: nothing new.
        const int64_t added = status.ok() ? batch->added : 0;
        done(std::move(status), added);
      },
      std::move(order));
}

absl::StatusOr<std::vector<MetricPoint>> Store::ReadMetrics(
    const std::string& run_id, const std::string& name) {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      reader_->Prepare("SELECT step, value, tokens, wall_time FROM metrics"
                       " WHERE run_id = ? AND name = ? ORDER BY step"));
  st.Bind(1, run_id).Bind(2, name);
  std::vector<MetricPoint> points;
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) break;
    MetricPoint point;
    point.run_id = run_id;
    point.name = name;
    point.step = st.ColumnInt(0);
    point.value = st.ColumnDouble(1);
    point.tokens = st.ColumnInt(2);
    point.wall_time = st.ColumnDouble(3);
    points.push_back(std::move(point));
  }
  return points;
}

// ------------------------------------------------------------ checkpoints

absl::Status Store::RecordCheckpoint(const Checkpoint& checkpoint, int attempt,
                                     absl::Time now) {
  const WriteOrder order = WriteOrder::Bulk(checkpoint.task_id);
  return writer_->Run(order, [&](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(LeaseRow row,
                          CheckLease(db, checkpoint.task_id, attempt));
    std::string run =
        checkpoint.run_id.empty() ? row.run_id : checkpoint.run_id;
    if (!row.run_id.empty() && run != row.run_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task ", row.id, " belongs to run ", row.run_id, ", not ", run));
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO checkpoints (task_id, run_id, step, tokens,"
                   " path, checksum, kind, attempt, created_at)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    st.Bind(1, checkpoint.task_id).BindTextOrNull(2, run);
    st.Bind(3, checkpoint.step).Bind(4, checkpoint.tokens);
    st.Bind(5, checkpoint.path).Bind(6, checkpoint.checksum);
    st.Bind(7, ToString(checkpoint.kind)).Bind(8, attempt);
    st.Bind(9, ToMillis(now));
    return UnknownRunIsInvalid(st.Run());
  });
}

absl::StatusOr<Checkpoint> Store::NewestCheckpoint(const std::string& task_id) {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      reader_->Prepare(absl::StrCat(
          "SELECT ", internal::kCheckpointColumns,
          " FROM checkpoints WHERE task_id = ? ORDER BY step DESC, id DESC"
          " LIMIT 1")));
  st.Bind(1, task_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row) {
    return absl::NotFoundError(absl::StrCat("no checkpoint of task ", task_id));
  }
  return internal::ReadCheckpoint(st);
}

absl::StatusOr<Checkpoint> Store::NewestRunCheckpoint(
    const std::string& run_id) {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      reader_->Prepare(absl::StrCat(
          "SELECT ", internal::kCheckpointColumns,
          " FROM checkpoints WHERE run_id = ? ORDER BY step DESC, id DESC"
          " LIMIT 1")));
  st.Bind(1, run_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row) {
    return absl::NotFoundError(absl::StrCat("no checkpoint of run ", run_id));
  }
  return internal::ReadCheckpoint(st);
}

// ------------------------------------------------------------ evals, fits

absl::Status Store::RecordEval(const std::string& task_id, int attempt,
                               const EvalResult& eval) {
  const WriteOrder order = WriteOrder::Bulk(task_id);
  return writer_->Run(order, [&](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(LeaseRow row, CheckLease(db, task_id, attempt));
    HLAB_ASSIGN_OR_RETURN(absl::string_view run, RunFor(row, eval.run_id));
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO evals (run_id, step, metric, value, details)"
                   " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, step, metric)"
                   " DO UPDATE SET value = excluded.value,"
                   " details = excluded.details"));
    st.Bind(1, run).Bind(2, eval.step).Bind(3, eval.metric);
    st.Bind(4, eval.value).Bind(5, eval.details);
    return UnknownRunIsInvalid(st.Run());
  });
}

absl::Status Store::RecordFit(const FitRecord& fit, absl::Time now) {
  return writer_->Run([&](Database& db) -> absl::Status {
    HLAB_RETURN_IF_ERROR(internal::RequireSweep(db, fit.sweep_id));
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT OR REPLACE INTO fits (sweep_id, arch, target, e, a,"
                   " alpha, b, beta, ci, r2_fit, r2_verify, n_points, details,"
                   " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                   " ?, ?)"));
    st.Bind(1, fit.sweep_id).Bind(2, fit.arch).Bind(3, fit.target);
    st.Bind(4, fit.e).Bind(5, fit.a).Bind(6, fit.alpha).Bind(7, fit.b);
    st.Bind(8, fit.beta).Bind(9, fit.ci).Bind(10, fit.r2_fit);
    st.Bind(11, fit.r2_verify).Bind(12, fit.n_points).Bind(13, fit.details);
    st.Bind(14, ToMillis(now));
    return st.Run();
  });
}

// ----------------------------------------------------------------- events

absl::StatusOr<int64_t> Store::AppendEvent(const Event& event) {
  int64_t seq = 0;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(
        seq, internal::InsertEvent(db, event.sweep_id, event.run_id, event.kind,
                                   event.message, event.time));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return seq;
}

absl::StatusOr<std::vector<Event>> Store::EventsSince(int64_t sweep_id,
                                                      int64_t after_seq,
                                                      int limit) {
  absl::MutexLock lock(&reader_mu_);
  // Two forms, so each uses its index: (sweep_id, seq), or seq alone.
  HLAB_ASSIGN_OR_RETURN(
      Statement st,
      reader_->Prepare(absl::StrCat(
          "SELECT ", internal::kEventColumns, " FROM events WHERE ",
          sweep_id != 0 ? "sweep_id = ?2 AND seq > ?1" : "seq > ?1",
          " ORDER BY seq LIMIT ?3")));
  st.Bind(1, after_seq).Bind(3, limit);
  if (sweep_id != 0) st.Bind(2, sweep_id);
  std::vector<Event> events;
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) break;
    events.push_back(internal::ReadEvent(st));
  }
  return events;
}

// ---------------------------------------------------------------- workers

absl::Status Store::RegisterWorker(const WorkerInfo& worker, absl::Time now) {
  if (worker.id.empty())
    return absl::InvalidArgumentError("a worker needs an id");
  return writer_->Run([&](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO workers (id, address, devices, capacity,"
                   " registered_at, last_heartbeat, state, version)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?5, 'UP', ?6)"
                   " ON CONFLICT (id) DO UPDATE SET address = excluded.address,"
                   " devices = excluded.devices, capacity = excluded.capacity,"
                   " registered_at = excluded.registered_at,"
                   " last_heartbeat = excluded.last_heartbeat, state = 'UP',"
                   " version = excluded.version"));
    st.Bind(1, worker.id).Bind(2, worker.address).Bind(3, worker.devices);
    st.Bind(4, worker.capacity).Bind(5, ToMillis(now)).Bind(6, worker.version);
    return st.Run();
  });
}

absl::StatusOr<WorkerInfo> Store::SetWorkerDraining(
    const std::string& worker_id, bool draining, absl::Time now) {
  WorkerInfo worker;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare(absl::StrCat(
                                            "SELECT ", internal::kWorkerColumns,
                                            " FROM workers WHERE id = ?")));
    st.Bind(1, worker_id);
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) {
      return absl::NotFoundError(absl::StrCat("unknown worker ", worker_id));
    }
    HLAB_ASSIGN_OR_RETURN(worker, internal::ReadWorker(st));
    if (worker.draining == draining) return absl::OkStatus();
    HLAB_ASSIGN_OR_RETURN(
        Statement update,
        db.Prepare("UPDATE workers SET draining = ? WHERE id = ?"));
    update.Bind(1, draining ? 1 : 0).Bind(2, worker_id);
    HLAB_RETURN_IF_ERROR(update.Run());
    worker.draining = draining;
    return internal::InsertEvent(
               db, 0, "", draining ? "worker_draining" : "worker_undrained",
               worker_id, now)
        .status();
  });
  if (!status.ok()) return status;
  {
    absl::MutexLock lock(&draining_mu_);
    if (draining) {
      draining_.insert(worker_id);
    } else {
      draining_.erase(worker_id);
    }
  }
  // Undrained, its free devices may take tasks the queue passed over.
  if (!draining) BumpLeasableGeneration();
  return worker;
}

bool Store::WorkerDraining(const std::string& worker_id) const {
  absl::MutexLock lock(&draining_mu_);
  return draining_.contains(worker_id);
}

absl::Status Store::HeartbeatWorker(const std::string& worker_id,
                                    absl::Time now) {
  return writer_->Run(WriteOrder::LeaseCritical(), [&](Database& db) {
    return internal::HeartbeatWorkerInTxn(db, worker_id, now);
  });
}

absl::StatusOr<std::vector<WorkerInfo>> Store::ListWorkers() {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(Statement st, reader_->Prepare(absl::StrCat(
                                          "SELECT ", internal::kWorkerColumns,
                                          " FROM workers ORDER BY id")));
  std::vector<WorkerInfo> workers;
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) break;
    HLAB_ASSIGN_OR_RETURN(WorkerInfo worker, internal::ReadWorker(st));
    workers.push_back(std::move(worker));
  }
  return workers;
}

absl::StatusOr<std::vector<std::string>> Store::MarkLostWorkers(
    absl::Time now, absl::Duration timeout) {
  std::vector<std::string> lost;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    lost.clear();
    const int64_t cutoff = ToMillis(now - timeout);
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st, db.Prepare("SELECT id FROM workers WHERE state = 'UP'"
                                   " AND last_heartbeat < ? ORDER BY id"));
      st.Bind(1, cutoff);
      while (true) {
        HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
        if (!has_row) break;
        lost.push_back(st.ColumnText(0));
      }
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("UPDATE workers SET state = 'LOST' WHERE state = 'UP'"
                   " AND last_heartbeat < ?"));
    st.Bind(1, cutoff);
    return st.Run();
  });
  if (!status.ok()) return status;
  return lost;
}

}  // namespace hlab::store
