// Writer: the store's one writer thread, with group commit.
//
// Callers submit write operations (closures over the writer's Database). The
// thread takes everything pending, runs it inside one BEGIN IMMEDIATE
// transaction, each operation inside its own SAVEPOINT, commits once, and then
// completes every caller with that caller's own Status. An operation that
// fails is rolled back to its savepoint and fails alone; the others in the
// batch still commit. A write is durable (committed, synchronous=NORMAL in WAL
// mode) when its completion runs.
//
// Thread-safety: Submit() and Run() are safe from any thread except the
// writer thread itself (an operation or completion that calls Run() would wait
// for itself). Submit's completions run on the writer thread after the
// commit: keep them short. SubmitAsync's run on a second thread, the
// completer, in commit order, so that completions doing real work (answering
// an RPC) do not hold up the next commit. Destruction (or Shutdown()) drains
// the queue: everything submitted before is executed and committed and its
// completion run, later submissions fail with Cancelled.
//
// Precedence: a lease-critical write (WriteOrder::lease_critical: a
// heartbeat, a lease, a completion or a failure, which a worker's lease
// waits on) commits ahead of the bulk writes (metric batches, everything
// else) queued before it. When both wait, the writer commits the
// lease-critical ones alone first, then the next batch takes everything
// queued, lease-critical writes first: so a heartbeat waits for the commit
// in progress and a small one, not for the metric batches queued ahead of
// it (a commit's bulk part is bounded: WriterOptions::max_batch_rows), and
// a bulk write waits for at most one lease-critical commit more
// than it would in arrival order (no starvation). What stays ordered:
//   - bulk writes among themselves, and lease-critical writes among
//     themselves, commit in the order they were queued;
//   - a lease-critical write never commits after a write queued after it;
//   - writes for the same task (WriteOrder::task_id) commit in the order
//     they were queued: a lease-critical write takes the bulk writes of its
//     task queued before it along, ahead of it (a metric batch of a task
//     commits before that task's Complete).
// Writes queued at the same time by different callers (nothing orders
// them) may commit in either order; each caller that waits for its write
// before the next sees its writes in order.
//
// Storage failures (disk full, a read-only file or file system, an I/O
// error: IsStorageFailure in database.h) refuse the write: every operation
// whose work the failure undid completes with Unavailable, its message
// starting with kStoreNotWritable (common/store_unavailable.h) and naming
// the cause, and nothing of it is stored. The writer does not keep the
// batch to retry it: a caller waiting on a full disk would wait for as long
// as it lasts, holding its RPC and its memory, and the queue would grow
// without bound. A refused write was never acknowledged, so nothing
// acknowledged is lost: a worker keeps the points it sent until they are
// acknowledged and sends them again (worker/task_runner.h), a client sees
// the message. Committed rows are untouched (SQLite rolls back the failed
// transaction). The writer is then not writable (stats().writable,
// on_storage) until a transaction commits a change again; it needs no
// restart, the next write after space returns simply succeeds. Reads use
// other connections and go on throughout.
//
//   Writer writer(std::move(db), WriterOptions{});
//   absl::Status s = writer.Run([&](Database& db) {
//     HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare("INSERT ..."));
//     return st.Run();
//   });
#ifndef HLAB_COORDINATOR_STORE_WRITER_H_
#define HLAB_COORDINATOR_STORE_WRITER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/database.h"

namespace hlab::store {

// A write operation. Runs on the writer thread inside a transaction; must not
// BEGIN/COMMIT itself. A non-OK return rolls back what it did.
using WriteOp = std::function<absl::Status(Database&)>;
// Called with the operation's final status once it is committed (or failed).
using WriteDone = std::function<void(absl::Status)>;

// How a write is ordered against the others queued (see "Precedence"
// above). The default: a bulk write for no particular task.
struct WriteOrder {
  // Commits ahead of the bulk writes queued before it: heartbeats, leases,
  // completions and failures, which workers and their leases wait on.
  bool lease_critical = false;
  // The task it writes for, if any: never committed before a write for the
  // same task queued earlier.
  std::string task_id;
  // The rows it writes, about (a metric batch's points): bounds a commit's
  // bulk part by WriterOptions::max_batch_rows.
  int64_t rows = 1;

  static WriteOrder Bulk(std::string task_id, int64_t rows = 1) {
    return WriteOrder{false, std::move(task_id), rows};
  }
  static WriteOrder LeaseCritical(std::string task_id = "") {
    return WriteOrder{true, std::move(task_id), 1};
  }
};

struct WriterStats {
  int64_t commits = 0;      // transactions committed (or attempted)
  int64_t ops = 0;          // operations executed
  int64_t failed_ops = 0;   // operations that completed with a non-OK status
  int64_t queue_depth = 0;  // operations waiting now
  int64_t max_batch = 0;    // largest number of operations in one commit
  // Commits of lease-critical writes alone, ahead of waiting bulk writes.
  int64_t lease_only_commits = 0;
  // Transactions (and maintenance operations) that failed for the storage.
  int64_t storage_failures = 0;
  // False from a storage failure until a transaction commits a change.
  bool writable = true;
  // The last storage failure's message while not writable; empty otherwise.
  std::string storage_error;
};

struct WriterOptions {
  // Largest number of operations committed in one transaction.
  int max_batch_ops = 1024;
  // Largest number of rows (WriteOrder::rows) of bulk writes committed in
  // one transaction; one write larger than this commits alone. A
  // lease-critical write waits for the commit in progress, so this bounds
  // that wait: at 2,000 workers sending 100 points a second each, commits
  // of 1,024 batches (102,400 points) held heartbeats for seconds, and
  // commits of at most 12,800 points stored as many points a second
  // (docs/performance.md, "2,000 workers").
  int64_t max_batch_rows = 12800;
  // Called on the writer thread after each commit with its wall time in
  // seconds (BEGIN to COMMIT done) and its number of operations: feed a
  // Prometheus histogram (hlab_db_commit_latency_seconds) from here.
  std::function<void(double seconds, int ops)> on_commit;
  // Called on the writer thread with false after each transaction (or
  // maintenance operation) that failed for the storage, and with true
  // once a transaction commits a change after such failures: feed
  // hlab_store_write_failures_total and hlab_store_writable from here.
  std::function<void(bool writable)> on_storage;
};

class Writer {
 public:
  // Takes the connection (already migrated) and starts the thread.
  Writer(std::unique_ptr<Database> db, WriterOptions options);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer();  // Shutdown()

  // Queues `op` (in `order`'s place); `done` runs on the writer thread with
  // its status after the commit. After Shutdown(), `done` runs at once with
  // Cancelled.
  void Submit(WriteOp op, WriteDone done, WriteOrder order = WriteOrder());

  // As Submit, but `done` runs on the completer thread (after the commit, in
  // commit order), not on the writer thread.
  void SubmitAsync(WriteOp op, WriteDone done, WriteOrder order = WriteOrder());

  // Queues `op`; the future holds its status once committed.
  std::future<absl::Status> Submit(WriteOp op, WriteOrder order = WriteOrder());

  // Submit and wait: returns the op's status once committed (durable).
  absl::Status Run(WriteOp op) { return Run(WriteOrder(), std::move(op)); }
  absl::Status Run(WriteOrder order, WriteOp op);

  // Runs `op` alone on the writer thread, outside any transaction, in queue
  // order (for maintenance that cannot run in a transaction, such as
  // PRAGMA wal_checkpoint), and waits for it. Not counted as a commit.
  absl::Status RunOutsideTransaction(WriteOp op);

  // Drains the queue, commits, and stops the thread. Idempotent.
  void Shutdown();

  WriterStats stats() const;

 private:
  struct Pending {
    WriteOp op;
    WriteDone done;
    bool outside_transaction = false;
    bool done_on_completer = false;
    WriteOrder order;
  };
  struct Completion {
    WriteDone done;
    absl::Status status;
  };

  // Queues `pending` in its place (see "Precedence"); after Shutdown(),
  // completes it with Cancelled instead.
  void Enqueue(Pending pending);
  // Moves the next batch out of the queues (see "Precedence").
  std::deque<Pending> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();
  void CompleterLoop();
  bool ReadyOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CompletionsOrStopping() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(completer_mu_);
  // What a batch did to the storage.
  struct BatchOutcome {
    absl::Status storage_failure;  // the first one met; OK if none
    bool wrote = false;  // committed, with a change by an op that succeeded
  };
  // Runs one batch in one transaction; returns each op's status.
  std::vector<absl::Status> Execute(std::deque<Pending>& batch,
                                    BatchOutcome* outcome);
  // Counts a storage failure, or a write after failures; logs and calls
  // options_.on_storage. Writer thread.
  void NoteStorage(const BatchOutcome& outcome);

  std::unique_ptr<Database> db_;  // used by the writer thread only
  const WriterOptions options_;

  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);  // bulk, and maintenance
  std::deque<Pending> lease_queue_ ABSL_GUARDED_BY(mu_);  // lease-critical
  // The last batch held lease-critical writes only, while bulk ones waited.
  bool last_lease_only_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  WriterStats stats_ ABSL_GUARDED_BY(mu_);
  int64_t failures_since_writable_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex completer_mu_;
  std::vector<Completion> completions_ ABSL_GUARDED_BY(completer_mu_);
  bool completer_stopping_ ABSL_GUARDED_BY(completer_mu_) = false;

  std::thread thread_;
  std::thread completer_;
};

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_WRITER_H_
