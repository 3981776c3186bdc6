// Store: the coordinator's durable state in SQLite (WAL), behind typed
// operations: sweeps, runs, tasks with leases and fencing, metrics, evals,
// checkpoints, fits, the event log and workers. See docs/store.md.
//
// Writes go through one writer thread with group commit (writer.h): each
// write method blocks until its transaction is committed, so a returned OK is
// durable. Reads use a separate read-only connection (WAL: they never wait for
// the writer) and see every write that has returned.
//
// Time is always an argument (`now`), never read from a clock, so the
// coordinator and tests decide what time it is.
//
// Fencing: every lease has an attempt number. Writes on behalf of a lease
// (ExtendLease, CompleteTask, FailTask, RecordMetrics, RecordCheckpoint,
// RecordEval) carry it; unless the task is LEASED with that very attempt they
// return FailedPrecondition and change nothing.
//
// Run phase, finer than its state, follows its tasks too, the shared trunk
// its DECAY task depends on included (RunPhase in types.h); each change of
// a phase that is not an end state appends a "run_progress" event per sweep
// of the run, and so does a run's progress (RecordMetrics).
//
// Run state follows its tasks (tasks with that run_id, except on-demand ones
// such as `hlab eval`'s: their failure is theirs, not the run's; a shared
// TRUNK task belongs to no run): FAILED when one of its tasks failed for
// good, SUCCEEDED
// when all of its tasks succeeded, RUNNING once one is leased or succeeded,
// PENDING otherwise; CANCELLED only by CancelRun/CancelSweep and left only by
// ResumeRuns/ResumeSweep; PREDICTED only by StopPredictedRuns (early stop)
// and left only by ResumeRuns. Every run state change appends a "run_state"
// event per sweep the run belongs to, and a run that ends the last open run
// of a sweep (not cancelled) a "sweep_finished" event
// (internal::NoteSweepEnd), again after a resume.
//
// Thread-safety: thread-safe; call from any thread, but not from a
// RecordMetricsAsync or HeartbeatAndExtendAsync completion (they run on
// the writer's completer thread,
// and a write from there would hold up every completion after it).
//
//   HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(path));
//   HLAB_ASSIGN_OR_RETURN(CreateSweepResult sweep,
//                         store->CreateSweep(spec, absl::Now()));
//   HLAB_RETURN_IF_ERROR(store->AddRuns(sweep.sweep_id, runs, now).status());
//   HLAB_ASSIGN_OR_RETURN(int attempt, store->LeaseTask(id, "w1", now,
//                                                       absl::Seconds(30)));
//   HLAB_RETURN_IF_ERROR(store->RecordMetrics(id, attempt, points, now));
#ifndef HLAB_COORDINATOR_STORE_STORE_H_
#define HLAB_COORDINATOR_STORE_STORE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/store/database.h"
#include "coordinator/store/internal/file_lock.h"
#include "coordinator/store/types.h"
#include "coordinator/store/wal_checkpointer.h"
#include "coordinator/store/writer.h"

namespace hlab::store {

struct StoreOptions {
  WriterOptions writer;
  // The WAL's size, in pages, at which a checkpoint starts: on a thread of
  // its own (wal_checkpointer.h), never in the writer's commits.
  int wal_checkpoint_pages = Database::kWalAutocheckpointPages;
};

class Store {
 public:
  // Opens (creating if missing) and migrates the database at `path`, and
  // holds an exclusive lock on `path`.lock while open. Unavailable naming the
  // path if it cannot be opened; FailedPrecondition if another Store (another
  // coordinator) has it open, or if the file has a newer schema than this
  // binary; InvalidArgument if WAL cannot be enabled (e.g. a network file
  // system).
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const std::string& path, StoreOptions options = StoreOptions());

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store();  // drains pending writes

  // ---- Sweeps and runs (store.cc)

  // Idempotent by spec_hash: an existing sweep returns its id with
  // created=false (and is left as it is). InvalidArgument if name, spec_hash
  // or spec is empty.
  absl::StatusOr<CreateSweepResult> CreateSweep(const SweepSpec& spec,
                                                absl::Time now);
  // NotFound for an unknown id.
  absl::StatusOr<Sweep> GetSweep(int64_t sweep_id);
  absl::StatusOr<std::vector<Sweep>> ListSweeps();

  // Adds runs to a sweep. A run already stored (same id, e.g. from another
  // sweep) is not changed; it only becomes a member of this sweep too.
  // NotFound for an unknown sweep; InvalidArgument for an empty run id.
  absl::StatusOr<AddRunsResult> AddRuns(int64_t sweep_id,
                                        const std::vector<RunSpec>& runs,
                                        absl::Time now);
  absl::StatusOr<Run> GetRun(const std::string& run_id);  // NotFound
  absl::StatusOr<std::vector<Run>> ListRuns(const RunFilter& filter);

  // ---- Tasks and leases (store_tasks.cc)

  // Adds tasks (INSERT OR IGNORE by id: re-adding is a no-op) with their
  // dependencies; returns how many were new. A dependency must name a task
  // already stored or earlier in `tasks` (so there are no cycles).
  // InvalidArgument for an unknown run, sweep or dependency, or a non-TRUNK
  // task without a run; nothing is added then.
  absl::StatusOr<int> AddTasks(const std::vector<TaskSpec>& tasks,
                               absl::Time now);
  absl::StatusOr<Task> GetTask(const std::string& task_id);  // NotFound
  absl::StatusOr<std::vector<Task>> ListTasks(const TaskFilter& filter);

  // Up to `limit` PENDING tasks whose dependencies all SUCCEEDED and whose
  // not_before <= now, by priority DESC, then order_key ASC where the
  // adaptive order set one (SetTaskOrder) and cost_flops ASC elsewhere,
  // then id.
  absl::StatusOr<std::vector<Task>> NextLeasableTasks(absl::Time now,
                                                      int limit);

  // A counter that grows after each committed change that may have made a
  // task leasable other than by time passing: tasks added, a task with
  // dependents succeeded, a task requeued (a retry, an expired lease, a
  // worker that left), runs or sweeps resumed or cancelled, an adaptive
  // order set. A cache of NextLeasableTasks (the coordinator's LeaseQueue) is
  // current while this has not moved and no backoff has ended
  // (NextBackoffEnd). Leasing does not move it, nor does a failure for good
  // (its dependents fail with it; nothing becomes leasable).
  int64_t leasable_generation() const {
    return leasable_generation_.load(std::memory_order_acquire);
  }

  // What moved leasable_generation() after `since` (a value it had).
  struct LeasableChanges {
    int64_t generation = 0;  // the generation these changes reach
    // When every change was a completion: the tasks that depend on the
    // completed ones (leasable now or not: UnblockedTasks says which), in
    // the order of the completions. nullopt when another change was among
    // them (tasks added, a requeue, cancel, resume, an order set: only
    // NextLeasableTasks sees what those did), or when `since` is older than
    // the last kLeasableChangesKept changes.
    std::optional<std::vector<std::string>> dependents;
  };
  static constexpr int64_t kLeasableChangesKept = 1024;
  LeasableChanges LeasableChangesSince(int64_t since) const;

  // The tasks among `task_ids` that are PENDING with every dependency
  // SUCCEEDED, whatever their not_before (so the caller sees a backoff that
  // has not ended), each once, in the lease order (LeasesBefore). Unknown
  // ids are left out. What a cache of NextLeasableTasks adds after a
  // completion instead of reading the whole list again.
  absl::StatusOr<std::vector<Task>> UnblockedTasks(
      const std::vector<std::string>& task_ids);

  // The earliest not_before after `now` of a PENDING task (one backing off
  // that becomes leasable then), or nullopt if none is backing off.
  absl::StatusOr<std::optional<absl::Time>> NextBackoffEnd(absl::Time now);

  // Leases a task to `worker_id` until now + lease; returns the new attempt
  // number (previous + 1). FailedPrecondition if the task is not leasable
  // now (not PENDING, a dependency not SUCCEEDED, or backing off);
  // Unavailable if the worker is draining (SetWorkerDraining); NotFound
  // for an unknown task; InvalidArgument for an empty worker id.
  absl::StatusOr<int> LeaseTask(const std::string& task_id,
                                const std::string& worker_id, absl::Time now,
                                absl::Duration lease);

  // Extends a held lease to now + lease. FailedPrecondition if `attempt` is
  // stale, the lease is held by another worker, or it has already expired
  // (the task may be handed to someone else); NotFound for an unknown task.
  absl::Status ExtendLease(const std::string& task_id, int attempt,
                           const std::string& worker_id, absl::Time now,
                           absl::Duration lease);

  // A worker's heartbeat in one write: HeartbeatWorker, then ExtendLease of
  // each (task id, attempt) in `held`; `extended` receives ExtendLease's
  // status for each (FailedPrecondition or NotFound: the worker must stop
  // that task). NotFound, with nothing written, for an unknown worker;
  // other errors are the database's.
  absl::Status HeartbeatAndExtend(
      const std::string& worker_id,
      const std::vector<std::pair<std::string, int>>& held, absl::Time now,
      absl::Duration lease, std::vector<absl::Status>* extended);
  // Called once a HeartbeatAndExtendAsync write is committed (or failed):
  // HeartbeatAndExtend's status and, when OK, one status per held task.
  using HeartbeatDone =
      std::function<void(absl::Status, std::vector<absl::Status> extended)>;
  // HeartbeatAndExtend without waiting, as RecordMetricsAsync: `done` runs
  // on the writer's completer thread after the commit. A server answers
  // heartbeats this way so that no thread of its own waits for a commit
  // per worker (2,000 workers send 400 heartbeats a second). Never write
  // to the store from `done`.
  void HeartbeatAndExtendAsync(std::string worker_id,
                               std::vector<std::pair<std::string, int>> held,
                               absl::Time now, absl::Duration lease,
                               HeartbeatDone done);

  // Marks the attempt SUCCEEDED. FailedPrecondition for a stale attempt;
  // NotFound for an unknown task.
  absl::Status CompleteTask(const std::string& task_id, int attempt,
                            absl::Time now);

  // Records a failed attempt. An infrastructure fault always requeues the
  // task (PENDING, not_before = now + backoff) and spends no budget. A task
  // error requeues it only if `retryable` and both the task's max_attempts
  // and its sweep's retry limit allow; otherwise the task (and every PENDING
  // task depending on it, directly or not) becomes FAILED with the reason,
  // and so do their runs; other runs are untouched. Returns the task's new
  // state (PENDING or FAILED). FailedPrecondition for a stale attempt
  // (nothing changed); NotFound for an unknown task.
  absl::StatusOr<TaskState> FailTask(const std::string& task_id, int attempt,
                                     const AttemptFailure& failure,
                                     absl::Time now, absl::Duration backoff);

  // Requeues every LEASED task whose lease expired (lease_expiry <= now) as
  // an infrastructure fault with `backoff`; the old holder's attempt is stale
  // from then on. Returns what expired.
  absl::StatusOr<std::vector<ExpiredLease>> ExpireLeases(
      absl::Time now, absl::Duration backoff = absl::ZeroDuration());

  // Cancels a sweep: its state becomes CANCELLED, and each of its runs that
  // is not finished and belongs to no other ACTIVE sweep is cancelled with
  // its unfinished tasks (and the sweep's unfinished TRUNK tasks). Returns
  // the leases that were cancelled. NotFound for an unknown sweep.
  absl::StatusOr<std::vector<CancelledLease>> CancelSweep(int64_t sweep_id,
                                                          absl::Time now);
  // Cancels one run (unless finished), its unfinished tasks, and the shared
  // trunks and trunk segments (pending or leased) that no task left
  // uncancelled depends on. NotFound.
  absl::StatusOr<std::vector<CancelledLease>> CancelRun(
      const std::string& run_id, absl::Time now);

  // Early stop (docs/sweeps.md, "Early stop"): each of `run_ids` that
  // qualifies becomes PREDICTED, in one transaction: its PENDING planned
  // tasks are CANCELLED (on-demand ones are left), a "run_state" event
  // "PREDICTED: <reason>" goes to each of its sweeps, and a TRUNK task its
  // DECAY depended on is CANCELLED too when it never started and every run
  // branching from it is PREDICTED now. A run qualifies when it is PENDING,
  // belongs to `sweep_id` and to no other sweep, none of its own TRAIN or
  // DECAY tasks was ever leased (each PENDING with attempt 0), and no task
  // of another run depends on one of its tasks (the LongPPL reference's
  // training), and it was never PREDICTED before (a run resumed with
  // ResumeRuns is trained as asked). Others are left alone, so a leased task is
  // never touched and fencing is unaffected. Returns the ids stopped, in the
  // order given. NotFound for an unknown sweep (nothing is stopped then).
  absl::StatusOr<std::vector<std::string>> StopPredictedRuns(
      int64_t sweep_id, const std::vector<std::string>& run_ids,
      const std::string& reason, absl::Time now);

  // The adaptive order (docs/sweeps.md, "Adaptive order"): replaces the
  // order of sweep `sweep_id`'s tasks, in one transaction. Every task of
  // the sweep loses its order (order_key, rank, score and reason become
  // unset), then each task of `order` that belongs to the sweep and is
  // PENDING takes its entry's; others (leased or finished meanwhile,
  // another sweep's) are skipped. Leasing orders PENDING tasks by
  // priority, then order_key where set and cost_flops elsewhere, then id
  // (NextLeasableTasks). Returns how many tasks took an order. NotFound for
  // an unknown sweep (nothing changes then).
  absl::StatusOr<int> SetTaskOrder(int64_t sweep_id,
                                   const std::vector<TaskOrder>& order);

  // Resumes FAILED or CANCELLED runs: run -> PENDING, its FAILED/CANCELLED
  // tasks and the failed tasks they depend on (a shared trunk) -> PENDING
  // with failures reset, and the retry count of the run's sweeps reset to 0.
  // Attempt numbers keep counting, so old holders stay fenced; checkpoints
  // are kept, so work resumes from the newest. ResumeRuns also resumes
  // PREDICTED runs (`hlab resume --run`: train it anyway); runs in other
  // states are left alone. ResumeSweep does this for every FAILED or
  // CANCELLED run of the sweep (not PREDICTED ones), also reopens the
  // sweep's failed TRUNK tasks (not one that only PREDICTED runs branch
  // from) and makes a CANCELLED sweep ACTIVE again. Returns the ids of the
  // runs resumed, in order (a worker may lease one before the caller reads
  // its state again). NotFound for an unknown sweep or run (nothing is
  // resumed then).
  absl::StatusOr<std::vector<std::string>> ResumeSweep(int64_t sweep_id,
                                                       absl::Time now);
  absl::StatusOr<std::vector<std::string>> ResumeRuns(
      const std::vector<std::string>& run_ids, absl::Time now);
  // Reopens a FAILED or CANCELLED on-demand task (TaskSpec::on_demand): ->
  // PENDING with failures reset, a "task_reopened" event; its run is left
  // as it is. Returns whether it was reopened (false for a task in another
  // state). NotFound for an unknown task; FailedPrecondition for a task that
  // is not on-demand (ResumeRuns reopens those, with their run).
  absl::StatusOr<bool> ReopenOnDemandTask(const std::string& task_id,
                                          absl::Time now);

  // ---- Results (store_results.cc)

  // Stores a batch of metric points (INSERT OR IGNORE on (run, name, step):
  // a replay adds nothing). Fenced; with a `worker_id`, the lease must also
  // be held by that worker (FailedPrecondition otherwise). InvalidArgument
  // for a point naming another run than the task's (allowed only for TRUNK
  // tasks) or an unknown run; nothing is stored then. `inserted`, if given,
  // receives the number of points that were new (the rest were already
  // stored). New `train_loss` points move their runs' progress (Run::
  // progress) and, every 1/1000 of a run's budget, append a "run_progress"
  // event at `now` (docs/store.md, "Run progress").
  absl::Status RecordMetrics(const std::string& task_id, int attempt,
                             const std::vector<MetricPoint>& points,
                             absl::Time now, int64_t* inserted = nullptr,
                             const std::string& worker_id = "");
  // Called once a RecordMetricsAsync batch is committed (or failed): its
  // status and, when OK, the number of points that were new.
  using MetricsDone = std::function<void(absl::Status, int64_t inserted)>;
  // RecordMetrics without waiting, so a server does not hold a thread per
  // pending write: the batch joins the writer's queue and `done` runs on the
  // writer's completer thread after the commit (durable then), with what
  // RecordMetrics would return. Never write to the store from `done`.
  void RecordMetricsAsync(std::string task_id, int attempt,
                          std::vector<MetricPoint> points,
                          std::string worker_id, absl::Time now,
                          MetricsDone done);
  // All points of one metric of a run, by step.
  absl::StatusOr<std::vector<MetricPoint>> ReadMetrics(
      const std::string& run_id, const std::string& name);

  // Records a checkpoint written by attempt `attempt` of its task. Fenced.
  // A TRUNK names the run a branch checkpoint is for (run_id), so that run's
  // DECAY task finds it with NewestRunCheckpoint; its own "latest"
  // checkpoints name no run.
  absl::Status RecordCheckpoint(const Checkpoint& checkpoint, int attempt,
                                absl::Time now);
  // The newest (highest step) checkpoint of a task / of a run. NotFound if
  // there is none.
  absl::StatusOr<Checkpoint> NewestCheckpoint(const std::string& task_id);
  absl::StatusOr<Checkpoint> NewestRunCheckpoint(const std::string& run_id);

  // Stores an evaluation result (a re-evaluation of the same (run, step,
  // metric) replaces it). Fenced.
  absl::Status RecordEval(const std::string& task_id, int attempt,
                          const EvalResult& eval);

  // Stores a fit (replacing the sweep's previous fit of arch and target).
  // NotFound for an unknown sweep.
  absl::Status RecordFit(const FitRecord& fit, absl::Time now);

  // ---- Live predictions (store_predictions.cc)

  // Stores a new prediction generation of `generation.sweep_id` (its
  // `generation` and `created_at` are ignored: the next number and `now`)
  // with its predictions, in one transaction; returns the generation
  // number. InvalidArgument, with nothing stored, for a run that is not in
  // the sweep, a target other than "loss", "longppl" or "train_loss", a
  // method other than "profile", "bootstrap", "fit" or "curve", a predicted
  // value or bound that is not
  // finite, or two predictions of the same run and target; NotFound for an
  // unknown sweep.
  absl::StatusOr<int64_t> RecordPredictions(
      const PredictionGeneration& generation, absl::Time now);
  // The sweep's newest generation with its predictions (by run, then
  // target), or nullopt when it has none. NotFound for an unknown sweep.
  absl::StatusOr<std::optional<PredictionGeneration>> LatestPredictions(
      int64_t sweep_id);

  // Appends to the event log; returns its sequence number.
  absl::StatusOr<int64_t> AppendEvent(const Event& event);
  // Events with seq > `after_seq`, oldest first, at most `limit`; for one
  // sweep, or for all with sweep_id 0.
  absl::StatusOr<std::vector<Event>> EventsSince(int64_t sweep_id,
                                                 int64_t after_seq, int limit);

  // ---- Workers (store_results.cc)

  // Registers (or re-registers) a worker: UP, heartbeat now.
  absl::Status RegisterWorker(const WorkerInfo& worker, absl::Time now);
  // Drains a worker (`draining` true) or undrains it. A draining worker
  // keeps its running tasks and its heartbeats, but LeaseTask refuses it
  // (Unavailable) until it is undrained, across re-registration and
  // coordinator restarts. A change appends a "worker_draining" or
  // "worker_undrained" event; the same state again changes nothing. Returns
  // the worker as it is now. NotFound for an unknown worker.
  absl::StatusOr<WorkerInfo> SetWorkerDraining(const std::string& worker_id,
                                               bool draining, absl::Time now);
  // Whether the worker is draining, from memory (no database read): the
  // lease path's check before it claims a task.
  bool WorkerDraining(const std::string& worker_id) const;
  // NotFound for an unknown worker (it should register again).
  absl::Status HeartbeatWorker(const std::string& worker_id, absl::Time now);
  absl::StatusOr<std::vector<WorkerInfo>> ListWorkers();
  // Marks UP workers silent since now - timeout as LOST; returns their ids.
  absl::StatusOr<std::vector<std::string>> MarkLostWorkers(
      absl::Time now, absl::Duration timeout);
  // A worker leaving cleanly: marks it LOST now (with a "worker_left" event)
  // and requeues, as ExpireLeases does (an infrastructure fault), every task
  // still LEASED to it
  // (none after a clean shutdown: its tasks were reported). Tasks leased to
  // other workers are untouched. Returns the requeued leases. NotFound for
  // an unknown worker. (store_tasks.cc)
  absl::StatusOr<std::vector<ExpiredLease>> DeregisterWorker(
      const std::string& worker_id, absl::Time now,
      absl::Duration backoff = absl::ZeroDuration());

  // ---- Maintenance (store.cc)

  // Copies a consistent snapshot of the database to `dest_path` with
  // SQLite's online backup API, while writes go on (BackupDatabase in
  // backup.h, which `hlab backup` calls on the file). AlreadyExists if
  // dest_path exists (never overwritten); Unavailable naming dest_path if it
  // cannot be written; DataLoss if the copy fails its integrity check.
  absl::Status Backup(const std::string& dest_path);

  struct WalCheckpoint {
    int64_t wal_pages = 0;           // pages in the WAL before
    int64_t checkpointed_pages = 0;  // of those, copied into the database
  };
  // Runs PRAGMA wal_checkpoint on the writer thread, between commits:
  // PASSIVE (never waits) or, with `truncate`, TRUNCATE (waits up to the busy
  // timeout for readers, then empties the WAL file). Call it periodically so
  // long-lived readers cannot make the WAL grow without bound. Unavailable
  // if a TRUNCATE could not finish because of readers.
  absl::StatusOr<WalCheckpoint> CheckpointWal(bool truncate);

  // ---- Gauges and recovery (store.cc)

  absl::StatusOr<StateCounts> CountsByState();
  absl::StatusOr<RecoveredState> LoadState();

  // The writer's counts, and whether the database can be written now
  // (WriterStats::writable: false from a write refused for the storage,
  // disk full or read-only, until a write succeeds again; writer.h).
  WriterStats writer_stats() const { return writer_->stats(); }
  // The background WAL checkpoints so far (wal_checkpointer.h).
  CheckpointerStats checkpointer_stats() const {
    return checkpointer_->stats();
  }

  // Runs `op` on the writer's connection, outside a transaction, between
  // commits (Writer::RunOutsideTransaction). For tests that make the
  // storage fail: PRAGMA max_page_count (a full disk), PRAGMA query_only
  // (read-only).
  absl::Status RunOnWriterForTesting(WriteOp op) {
    return writer_->RunOutsideTransaction(std::move(op));
  }
  const std::string& path() const { return path_; }

 private:
  Store(std::string path, internal::FileLock lock,
        std::unique_ptr<WalCheckpointer> checkpointer,
        std::unique_ptr<Writer> writer, std::unique_ptr<Database> reader,
        std::unique_ptr<Database> lease_reader)
      : path_(std::move(path)),
        lock_(std::move(lock)),
        checkpointer_(std::move(checkpointer)),
        writer_(std::move(writer)),
        reader_(std::move(reader)),
        lease_reader_(std::move(lease_reader)) {}

  // After a committed change that may have made tasks leasable: any change
  // (a cache must read the whole list again), or a completion that may have
  // made `dependents` leasable.
  void BumpLeasableGeneration();
  void NoteCompletion(std::vector<std::string> dependents);

  const std::string path_;
  internal::FileLock lock_;  // released after the writer and reader close
  // Outlives the writer, whose connection's WAL hook points at it.
  std::unique_ptr<WalCheckpointer> checkpointer_;
  std::unique_ptr<Writer> writer_;
  absl::Mutex reader_mu_;
  std::unique_ptr<Database> reader_ ABSL_GUARDED_BY(reader_mu_);
  // NextLeasableTasks, NextBackoffEnd and UnblockedTasks only: the lease
  // queue's reads, which a lease after a completion waits for, never queue
  // behind other reads (the housekeeping gauges, task and run lookups).
  absl::Mutex lease_reader_mu_;
  std::unique_ptr<Database> lease_reader_ ABSL_GUARDED_BY(lease_reader_mu_);
  // One entry per move of leasable_generation_ (moved under leasable_mu_),
  // the last kLeasableChangesKept of them: LeasableChangesSince.
  struct LeasableChange {
    int64_t generation = 0;
    bool completion = false;  // false: any change
    std::vector<std::string> dependents;
  };
  mutable absl::Mutex leasable_mu_;
  std::deque<LeasableChange> leasable_changes_ ABSL_GUARDED_BY(leasable_mu_);
  std::atomic<int64_t> leasable_generation_{0};
  // Ids of the draining workers (the workers table's draining = 1), kept
  // with every change SetWorkerDraining commits.
  mutable absl::Mutex draining_mu_;
  absl::flat_hash_set<std::string> draining_ ABSL_GUARDED_BY(draining_mu_);
};

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_STORE_H_
