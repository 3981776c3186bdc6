// Store: opening, sweeps, runs, gauges and recovery. Tasks and leases are in
// store_tasks.cc; results, events and workers in store_results.cc.
#include "coordinator/store/store.h"
#include <sqlite3.h>

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/backup.h"
#include "coordinator/store/internal/rows.h"
#include "coordinator/store/internal/transitions.h"
#include "coordinator/store/schema.h"

namespace hlab::store {

using internal::InsertEvent;
using internal::kRunColumns;
using internal::kSweepColumns;

namespace {

// The WAL file's size after it starts over (PRAGMA journal_size_limit):
// twice the checkpoint threshold at 4 KiB pages.
constexpr int64_t kWalSizeLimitBytes =
    int64_t{2} * Database::kWalAutocheckpointPages * 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   StoreOptions options) {
  HLAB_ASSIGN_OR_RETURN(internal::FileLock lock,
                        internal::FileLock::Acquire(path + ".lock"));
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                        Database::Open(path, Database::Mode::kReadWrite));
  HLAB_RETURN_IF_ERROR(Migrate(*db));
  HLAB_ASSIGN_OR_RETURN(
      std::unique_ptr<WalCheckpointer> checkpointer,
      WalCheckpointer::Start(path, options.wal_checkpoint_pages));
  // Replaces the writer connection's automatic checkpoint, which is a WAL
  // hook too (sqlite3_wal_autocheckpoint).
  sqlite3_wal_hook(db->raw(), &WalCheckpointer::Hook, checkpointer.get());
  // When a checkpoint has copied the whole WAL, the next commit starts the
  // file over and truncates it to this size: a reader that held the WAL
  // long (it grows meanwhile) leaves no large file behind.
  HLAB_RETURN_IF_ERROR(db->Exec(
      absl::StrCat("PRAGMA journal_size_limit = ", kWalSizeLimitBytes)));
  absl::flat_hash_set<std::string> draining;
  {
    HLAB_ASSIGN_OR_RETURN(
        Statement st, db->Prepare("SELECT id FROM workers WHERE draining = 1"));
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (!has_row) break;
      draining.insert(st.ColumnText(0));
    }
  }
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> reader,
                        Database::Open(path, Database::Mode::kReadOnly));
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> lease_reader,
                        Database::Open(path, Database::Mode::kReadOnly));
  auto writer =
      std::make_unique<Writer>(std::move(db), std::move(options.writer));
  std::unique_ptr<Store> store(
      new Store(path, std::move(lock), std::move(checkpointer),
                std::move(writer), std::move(reader), std::move(lease_reader)));
  {
    absl::MutexLock guard(&store->draining_mu_);
    store->draining_ = std::move(draining);
  }
  return store;
}

Store::~Store() { writer_->Shutdown(); }

// ---------------------------------------------------------------- sweeps

absl::StatusOr<CreateSweepResult> Store::CreateSweep(const SweepSpec& spec,
                                                     absl::Time now) {
  if (spec.name.empty() || spec.spec_hash.empty() || spec.spec.empty()) {
    return absl::InvalidArgumentError(
        "a sweep needs a name, a spec hash and a spec");
  }
  CreateSweepResult result;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare("SELECT id FROM sweeps WHERE spec_hash = ?"));
      st.Bind(1, spec.spec_hash);
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (has_row) {
        result = CreateSweepResult{st.ColumnInt(0), false};
        return absl::OkStatus();
      }
    }
    HLAB_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO sweeps (name, spec_hash, request_id, spec,"
                   " created_at, max_retries) VALUES (?, ?, ?, ?, ?, ?)"));
    st.Bind(1, spec.name).Bind(2, spec.spec_hash);
    st.BindTextOrNull(3, spec.request_id).Bind(4, spec.spec);
    st.Bind(5, ToMillis(now)).Bind(6, spec.max_retries);
    HLAB_RETURN_IF_ERROR(st.Run());
    result = CreateSweepResult{db.last_insert_rowid(), true};
    return InsertEvent(db, result.sweep_id, "", "sweep_created", spec.name, now)
        .status();
  });
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<Sweep> Store::GetSweep(int64_t sweep_id) {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(Statement st, reader_->Prepare(absl::StrCat(
                                          "SELECT ", kSweepColumns,
                                          " FROM sweeps WHERE id = ?")));
  st.Bind(1, sweep_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row) {
    return absl::NotFoundError(absl::StrCat("unknown sweep ", sweep_id));
  }
  return internal::ReadSweep(st);
}

absl::StatusOr<std::vector<Sweep>> Store::ListSweeps() {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(
      Statement st, reader_->Prepare(absl::StrCat("SELECT ", kSweepColumns,
                                                  " FROM sweeps ORDER BY id")));
  std::vector<Sweep> sweeps;
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) break;
    HLAB_ASSIGN_OR_RETURN(Sweep sweep, internal::ReadSweep(st));
    sweeps.push_back(std::move(sweep));
  }
  return sweeps;
}

// ------------------------------------------------------------------ runs

absl::StatusOr<AddRunsResult> Store::AddRuns(int64_t sweep_id,
                                             const std::vector<RunSpec>& runs,
                                             absl::Time now) {
  for (const RunSpec& run : runs) {
    if (run.id.empty()) return absl::InvalidArgumentError("a run needs an id");
  }
  AddRunsResult result;
  absl::Status status = writer_->Run([&](Database& db) -> absl::Status {
    result = AddRunsResult{};
    HLAB_RETURN_IF_ERROR(internal::RequireSweep(db, sweep_id));
    HLAB_ASSIGN_OR_RETURN(
        Statement insert,
        db.Prepare("INSERT OR IGNORE INTO runs (id, arch, scale,"
                   " budget_tokens, n_params, seed, config, max_attempts,"
                   " created_at, updated_at)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    HLAB_ASSIGN_OR_RETURN(
        Statement member,
        db.Prepare("INSERT OR IGNORE INTO sweep_runs (sweep_id, run_id)"
                   " VALUES (?, ?)"));
    const int64_t now_ms = ToMillis(now);
    for (const RunSpec& run : runs) {
      insert.Bind(1, run.id).Bind(2, run.arch).Bind(3, run.scale);
      insert.Bind(4, run.budget_tokens).Bind(5, run.n_params);
      insert.Bind(6, run.seed).Bind(7, run.config);
      insert.Bind(8, run.max_attempts).Bind(9, now_ms).Bind(10, now_ms);
      HLAB_RETURN_IF_ERROR(insert.Run());
      if (insert.changes() > 0) {
        ++result.added;
      } else {
        ++result.existing;
      }
      insert.Reset();
      member.Bind(1, sweep_id).Bind(2, run.id);
      HLAB_RETURN_IF_ERROR(member.Run());
      member.Reset();
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return result;
}

absl::StatusOr<Run> Store::GetRun(const std::string& run_id) {
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(
      Statement st, reader_->Prepare(absl::StrCat("SELECT ", kRunColumns,
                                                  " FROM runs WHERE id = ?")));
  st.Bind(1, run_id);
  HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
  if (!has_row)
    return absl::NotFoundError(absl::StrCat("unknown run ", run_id));
  return internal::ReadRun(st);
}

absl::StatusOr<std::vector<Run>> Store::ListRuns(const RunFilter& filter) {
  // Only the filters given go into the SQL, so each can use its index.
  std::string sql = absl::StrCat("SELECT ", kRunColumns, " FROM runs WHERE 1");
  if (filter.sweep_id) {
    absl::StrAppend(&sql, " AND id IN (SELECT run_id FROM sweep_runs",
                    " WHERE sweep_id = ?1)");
  }
  if (filter.state) absl::StrAppend(&sql, " AND state = ?2");
  if (!filter.phases.empty()) {
    // Names of an enum, not user text: no binding needed.
    absl::StrAppend(&sql, " AND phase IN (");
    for (size_t i = 0; i < filter.phases.size(); ++i) {
      absl::StrAppend(&sql, i == 0 ? "'" : ", '", ToString(filter.phases[i]),
                      "'");
    }
    absl::StrAppend(&sql, ")");
  }
  if (!filter.arch.empty()) absl::StrAppend(&sql, " AND arch = ?3");
  if (!filter.scale.empty()) absl::StrAppend(&sql, " AND scale = ?4");
  absl::StrAppend(&sql, " ORDER BY created_at, id");
  absl::MutexLock lock(&reader_mu_);
  HLAB_ASSIGN_OR_RETURN(Statement st, reader_->Prepare(sql));
  if (filter.sweep_id) st.Bind(1, *filter.sweep_id);
  if (filter.state) st.Bind(2, ToString(*filter.state));
  if (!filter.arch.empty()) st.Bind(3, filter.arch);
  if (!filter.scale.empty()) st.Bind(4, filter.scale);
  std::vector<Run> runs;
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
    if (!has_row) break;
    HLAB_ASSIGN_OR_RETURN(Run run, internal::ReadRun(st));
    runs.push_back(std::move(run));
  }
  return runs;
}

// ------------------------------------------------------------ maintenance

absl::Status Store::Backup(const std::string& dest_path) {
  return BackupDatabase(path_, dest_path).status();
}

absl::StatusOr<Store::WalCheckpoint> Store::CheckpointWal(bool truncate) {
  WalCheckpoint result;
  absl::Status status =
      writer_->RunOutsideTransaction([&](Database& db) -> absl::Status {
        int wal_pages = 0, checkpointed = 0;
        int rc = sqlite3_wal_checkpoint_v2(
            db.raw(), nullptr,
            truncate ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE,
            &wal_pages, &checkpointed);
        if (rc != SQLITE_OK) {
          return SqliteStatus(rc, sqlite3_errmsg(db.raw()), "wal checkpoint");
        }
        result.wal_pages = wal_pages;
        result.checkpointed_pages = checkpointed;
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return result;
}

// -------------------------------------------------- gauges and recovery

absl::StatusOr<StateCounts> Store::CountsByState() {
  StateCounts counts;
  for (RunState s :
       {RunState::kPending, RunState::kRunning, RunState::kSucceeded,
        RunState::kFailed, RunState::kCancelled, RunState::kPredicted}) {
    counts.runs[ToString(s)] = 0;
  }
  for (TaskState s :
       {TaskState::kPending, TaskState::kLeased, TaskState::kSucceeded,
        TaskState::kFailed, TaskState::kCancelled}) {
    counts.tasks[ToString(s)] = 0;
  }
  absl::MutexLock lock(&reader_mu_);
  for (auto [table, map] : {std::make_pair("runs", &counts.runs),
                            std::make_pair("tasks", &counts.tasks)}) {
    HLAB_ASSIGN_OR_RETURN(Statement st, reader_->Prepare(absl::StrCat(
                                            "SELECT state, count(*) FROM ",
                                            table, " GROUP BY state")));
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (!has_row) break;
      (*map)[st.ColumnText(0)] = st.ColumnInt(1);
    }
  }
  return counts;
}

absl::StatusOr<RecoveredState> Store::LoadState() {
  RecoveredState state;
  absl::MutexLock lock(&reader_mu_);
  Database& db = *reader_;
  // One read transaction, so the pieces are one consistent snapshot.
  HLAB_RETURN_IF_ERROR(db.Exec("BEGIN"));
  absl::Status status = [&]() -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(
        state.leased,
        internal::QueryTasks(db,
                             absl::StrCat("SELECT ", internal::kTaskColumns,
                                          " FROM tasks WHERE state = 'LEASED'"
                                          " ORDER BY lease_expiry, id"),
                             [](Statement&) {}));
    HLAB_ASSIGN_OR_RETURN(
        state.pending, internal::QueryTasks(
                           db,
                           absl::StrCat("SELECT ", internal::kTaskColumns,
                                        " FROM tasks WHERE state = 'PENDING'"
                                        " ORDER BY priority DESC,"
                                        " coalesce(order_key, cost_flops), id"),
                           [](Statement&) {}));
    {
      HLAB_ASSIGN_OR_RETURN(
          Statement st,
          db.Prepare(absl::StrCat("SELECT ", internal::kWorkerColumns,
                                  " FROM workers ORDER BY id")));
      while (true) {
        HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
        if (!has_row) break;
        HLAB_ASSIGN_OR_RETURN(WorkerInfo worker, internal::ReadWorker(st));
        state.workers.push_back(std::move(worker));
      }
    }
    HLAB_ASSIGN_OR_RETURN(
        state.last_event_seq,
        db.QueryInt("SELECT coalesce(max(seq), 0) FROM events"));
    return absl::OkStatus();
  }();
  absl::Status end = db.Exec("COMMIT");
  HLAB_RETURN_IF_ERROR(status);
  HLAB_RETURN_IF_ERROR(end);
  return state;
}

}  // namespace hlab::store
