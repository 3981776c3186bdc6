// Row <-> struct mapping for the store's tables: the column lists the typed
// operations select, and readers that turn a statement's current row into a
// struct. Private to coordinator/store.
//
// Thread-safety: functions over a caller-owned Statement/Database.
//
//   HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare(absl::StrCat(
//       "SELECT ", kTaskColumns, " FROM tasks WHERE id = ?")));
//   ... st.Step() ...
//   HLAB_ASSIGN_OR_RETURN(Task task, ReadTask(st));
#ifndef HLAB_COORDINATOR_STORE_INTERNAL_ROWS_H_
#define HLAB_COORDINATOR_STORE_INTERNAL_ROWS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "coordinator/store/database.h"
#include "coordinator/store/types.h"

namespace hlab::store::internal {

extern const char kSweepColumns[];
extern const char kRunColumns[];
extern const char kTaskColumns[];
extern const char kWorkerColumns[];
extern const char kCheckpointColumns[];
extern const char kEventColumns[];

// Each reads the current row of a statement that selected the matching
// column list first. InvalidArgument (from Parse*) for a malformed enum.
absl::StatusOr<Sweep> ReadSweep(const Statement& st);
absl::StatusOr<Run> ReadRun(const Statement& st);
absl::StatusOr<Task> ReadTask(const Statement& st);  // without depends_on
absl::StatusOr<WorkerInfo> ReadWorker(const Statement& st);
absl::StatusOr<Checkpoint> ReadCheckpoint(const Statement& st);
Event ReadEvent(const Statement& st);

// Runs a query selecting kTaskColumns and returns the tasks, each with its
// depends_on filled in. `bind` binds the query's parameters.
absl::StatusOr<std::vector<Task>> QueryTasks(
    Database& db, const std::string& sql,
    const std::function<void(Statement&)>& bind);

// Whether `sql` (one `?` parameter, bound to `key`) yields a row.
template <typename Key>
absl::StatusOr<bool> Exists(Database& db, const char* sql, const Key& key) {
  absl::StatusOr<Statement> st = db.Prepare(sql);
  if (!st.ok()) return st.status();
  st->Bind(1, key);
  return st->Step();
}

// NotFound "unknown sweep N" unless the sweep exists: the check of every
// write that names a sweep.
inline absl::Status RequireSweep(Database& db, int64_t sweep_id) {
  absl::StatusOr<bool> known =
      Exists(db, "SELECT 1 FROM sweeps WHERE id = ?", sweep_id);
  if (!known.ok()) return known.status();
  if (!*known) {
    return absl::NotFoundError(absl::StrCat("unknown sweep ", sweep_id));
  }
  return absl::OkStatus();
}

// Milliseconds for a nullable time column: NULL for InfinitePast.
absl::Time TimeColumn(const Statement& st, int column);

}  // namespace hlab::store::internal

#endif  // HLAB_COORDINATOR_STORE_INTERNAL_ROWS_H_
