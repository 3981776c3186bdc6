// WalCheckpointer: copies the store's WAL into the database file on a
// thread and connection of its own, so that the writer thread never does.
//
// SQLite's automatic checkpoint runs inside the commit that finds the WAL
// past its threshold, on the committing connection: with hlab's one writer
// thread, every write queued behind that commit waited for the copy and its
// fsyncs. Under a fleet's metric ingest that was one commit in every few
// seconds taking 20-115 ms, the whole p99 of heartbeats and leases
// (docs/performance.md, "A fleet at realistic churn"). Here the writer's
// connection has no automatic checkpoint; a WAL hook on it (run after each
// commit, with the WAL's size in pages) wakes this thread once the WAL
// holds `threshold_pages`, and it runs PASSIVE checkpoints, which never
// block the writer or readers, until it has copied every frame (so the
// next write starts the WAL file over) or a reader holds it back.
//
// The backstop: when commits come back to back (a metric flood) the
// thread may never catch up with the WAL's end, and SQLite starts the WAL
// over only when a checkpoint did; an earlier attempt at this design was
// dropped for that (docs/performance.md, "Ingest answered from the
// commit"). So at 4 x `threshold_pages` the writer checkpoints itself in
// the hook, as the automatic checkpoint did at 1 x: the WAL stays bounded,
// and only a flood pays the old pause.
//
// Durability is SQLite's with synchronous = NORMAL, as before: a commit is
// durable once in the WAL; the checkpoint only moves pages.
//
// Thread-safety: OnCommit is called from the writer's thread (the WAL hook);
// stats from any thread. Construct before, and destroy after, the writer
// connection whose hook points at it.
//
//   auto checkpointer = WalCheckpointer::Start(path, 8000);
//   sqlite3_wal_hook(writer_db, &WalCheckpointer::Hook, checkpointer.get());
#ifndef HLAB_COORDINATOR_STORE_WAL_CHECKPOINTER_H_
#define HLAB_COORDINATOR_STORE_WAL_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/database.h"

struct sqlite3;

namespace hlab::store {

struct CheckpointerStats {
  int64_t checkpoints = 0;  // PASSIVE checkpoints run by the thread
  // PASSIVE checkpoints the writer ran itself (the backstop, below).
  int64_t writer_checkpoints = 0;
  int64_t failures = 0;           // of those, ones that returned an error
  int64_t largest_wal_pages = 0;  // the largest WAL a commit reported
  double seconds = 0;             // time spent checkpointing
};

class WalCheckpointer {
 public:
  // Opens its own connection to `path` (already migrated) and starts the
  // thread. Unavailable naming the path if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Start(
      const std::string& path, int threshold_pages);
  ~WalCheckpointer();  // stops the thread (a checkpoint in progress ends)
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // sqlite3_wal_hook's callback: `self` is the WalCheckpointer.
  static int Hook(void* self, sqlite3* db, const char* name, int wal_pages);

  CheckpointerStats stats() const;

 private:
  WalCheckpointer(std::unique_ptr<Database> db, int threshold_pages);
  void Loop();

  const int threshold_pages_;
  std::unique_ptr<Database> db_;  // used only by the thread
  mutable absl::Mutex mu_;
  bool due_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  CheckpointerStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_WAL_CHECKPOINTER_H_
