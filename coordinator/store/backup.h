// BackupDatabase: a consistent copy of a live hlab database (`hlab backup`,
// Store::Backup), with SQLite's online backup API.
//
// The copy is taken from a read-only connection that holds one read
// transaction for the whole copy, so it is one snapshot of the database
// (WAL included) while the coordinator goes on committing: its writes never
// restart the copy and are never blocked by it (WAL readers do not block the
// writer; the coordinator's WAL checkpoints simply cannot pass the snapshot
// until the copy ends). Pages are copied `pages_per_step` at a time, with
// `progress` called after each step. The copy goes to "<dest>.partial-<pid>"
// beside `dest`, is checked with PRAGMA integrity_check, fsync'ed, and only
// then renamed onto `dest`: a failed or interrupted backup never leaves a
// file named `dest`.
//
// Thread-safety: thread-safe (each call opens its own connections).
//
//   BackupOptions options;
//   options.progress = [](int64_t done, int64_t total) { ... };
//   HLAB_ASSIGN_OR_RETURN(BackupResult r,
//                         BackupDatabase("hlab.db", "hlab-copy.db", options));
//   // r.pages, r.bytes
#ifndef HLAB_COORDINATOR_STORE_BACKUP_H_
#define HLAB_COORDINATOR_STORE_BACKUP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hlab::store {

struct BackupOptions {
  // Replace an existing `dest` (atomically, by rename). Without it an
  // existing `dest` is AlreadyExists and nothing is written.
  bool force = false;
  // Pages copied per sqlite3_backup_step; > 0.
  int pages_per_step = 1024;
  // Pause between steps, so a big copy leaves the disk to the coordinator.
  absl::Duration pause = absl::ZeroDuration();
  // Called after each step with (pages copied, pages in total).
  std::function<void(int64_t done, int64_t total)> progress;
};

struct BackupResult {
  int64_t pages = 0;  // pages copied
  int64_t bytes = 0;  // size of the backup file
};

// Copies `source` (an hlab SQLite database, possibly in use) to `dest`.
// Errors:
//   AlreadyExists       - `dest` exists and options.force is false;
//   InvalidArgument     - source and dest are the same file, or
//                         pages_per_step <= 0;
//   Unavailable         - `source` cannot be opened or read, or the
//                         directory of `dest` cannot be written (named);
//   DataLoss            - `source` is not a database, or the copy failed
//                         PRAGMA integrity_check (its first message).
absl::StatusOr<BackupResult> BackupDatabase(const std::string& source,
                                            const std::string& dest,
                                            const BackupOptions& options = {});

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_BACKUP_H_
