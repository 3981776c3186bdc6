// TaskRunner: runs one leased task attempt on the worker, start to finish.
//
// Run() prepares the task directory <data_dir>/tasks/<task_id> (kept across
// attempts, so a retry resumes from the newest checkpoint in its
// checkpoints/ subdirectory, or in <checkpoint_root>/<task_id> when the
// workers share one), writes the task file with checkpoint.dir set
// there ("device": "cuda" when it has GPUs, else "cpu"), spawns hlab-train
// (W processes for a W-GPU task or a task with W CPU ranks: --rank r
// --world-size W --master-port P with a free loopback port, one GPU each
// through CUDA_VISIBLE_DEVICES), relays rank 0's records to the coordinator
// (ReportMetrics batches, ReportCheckpoint), and when every rank has exited
// reports the outcome:
//
//   all ranks exit 0               Complete
//   a rank exits 2 or 3            Fail(task error, retryable=false), the
//                                  trainer's last "error" record as the
//                                  message
//   a rank exits 74 (this node's   Fail(infrastructure): retried without
//   disk refused a checkpoint)     limit, from the previous checkpoint
//   75 or another code, or a crash Fail(task error, retryable=true); the
//   (SIGSEGV, SIGABRT, SIGBUS,     other ranks are terminated (SIGTERM,
//   SIGFPE, SIGILL)                grace, SIGKILL)
//   no record for stall_timeout    Fail(infrastructure): the watchdog
//   (a hung trainer)               stopped it (SIGCONT, SIGTERM, SIGKILL)
//   killed from outside (SIGKILL,  Fail(infrastructure): retried without
//   SIGTERM, SIGINT, SIGHUP,       limit, spending no budget; but a SIGKILL
//   SIGQUIT, SIGPIPE)              while the kernel's OOM killer counted a
//                                  kill in the worker's cgroup
//                                  (memory.events oom_kill) is a task error
//
// The task cannot be staged on this node (other than an invalid task, which
// is a task error for good) or its program cannot be started: Fail
// (infrastructure).
//
// An EVAL task runs one `hlab-eval --task FILE --record-fd 3` process
// instead (options.evaluator; all the task's GPUs visible), with
// "cache_dir" (<data_dir>/cache) filled in its task file and no
// checkpoint.dir; its "result" records go with Complete (results, with
// details_json). Exit codes count as for hlab-train; an exit 0 without any
// "result" record fails the task for good.
//
// Reports are retried with backoff while the coordinator is unreachable; a
// FAILED_PRECONDITION or NOT_FOUND answer (stale attempt, unknown task) means
// the lease is gone: the trainer is terminated and nothing more is reported.
// Stop() asks it to end early: kCancelled (the coordinator said stop, or the
// lease was lost) terminates the trainer and reports nothing; kShutdown (the
// daemon is stopping) terminates it (SIGTERM: the trainer checkpoints and
// exits 75) and reports an infrastructure fault, giving up on reports after
// `shutdown_report_timeout`.
//
// Thread-safe: Run() occupies one thread; Stop() and Progress() may be
// called from any other.
//
//   TaskRunner runner(options, lease.task(), {0}, &client, &metrics);
//   std::thread t([&] { runner.Run(); });
//   ...  heartbeat.add_tasks()->CopyFrom(runner.Progress());
//   runner.Stop(TaskRunner::StopReason::kCancelled);
//   t.join();
#ifndef HLAB_WORKER_TASK_RUNNER_H_
#define HLAB_WORKER_TASK_RUNNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hlab/v1/task.pb.h"
#include "worker/backoff.h"
#include "worker/trainer_process.h"

namespace hlab::worker {

class CoordinatorClient;
class RecordRelay;
class WorkerMetrics;

struct TaskRunnerOptions {
  std::string trainer;    // the hlab-train binary
  std::string evaluator;  // the hlab-eval binary (EVAL tasks)
  std::string data_dir;   // tasks live in <data_dir>/tasks/<task_id>
  // Where training tasks checkpoint: <checkpoint_root>/<task_id> when set
  // (a filesystem every worker mounts at this path, so that a retry on
  // another worker resumes from the newest verified checkpoint and decays
  // and evaluations anywhere read what a trunk or run wrote); empty:
  // <data_dir>/tasks/<task_id>/checkpoints, this worker's alone.
  std::string checkpoint_root;
  std::string worker_id;  // sent with every report
  // SIGTERM to SIGKILL on stop, cancel, lost lease or a failed peer rank.
  absl::Duration kill_grace = absl::Seconds(30);
  // The watchdog: a trainer (or evaluator) that writes no record for this
  // long is hung (SIGSTOPped, a deadlocked collective): it gets SIGCONT and
  // SIGTERM, SIGKILL after kill_grace, and the attempt is reported as an
  // infrastructure fault. Zero: no watchdog.
  absl::Duration stall_timeout = absl::Minutes(30);
  // How often the supervising loop polls the children and the outbox.
  absl::Duration tick = absl::Milliseconds(100);
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);
  // After a kShutdown stop, how long reports keep being retried.
  absl::Duration shutdown_report_timeout = absl::Seconds(10);
};

// What a finished attempt amounts to.
struct TaskOutcome {
  bool complete = false;
  // Not the task's fault (table above): retried without limit. When false
  // a failure is a task error, and `retryable` says whether a retry can help.
  bool infrastructure = false;
  bool retryable = false;
  int exit_code = 0;  // 128 + signal when killed by a signal
  std::string message;
};

// The outcome of an attempt whose ranks ended with `exits` (rank order),
// given the last "error" record's message (may be empty). The failure named
// is a permanent one if any, else that of rank `first_failed` (the rank that
// failed first, whose peers were then terminated), else the lowest failed
// rank. The message starts with `program` ("hlab-train", "hlab-eval").
// `oom_kills`: whether the kernel's OOM killer killed a process of the
// worker's cgroup while the ranks ran (a SIGKILL is then the task's fault).
TaskOutcome ClassifyExit(const std::vector<ExitStatus>& exits,
                         const std::string& last_error, int first_failed = -1,
                         const std::string& program = "hlab-train",
                         bool oom_kills = false);

// The kernel's count of OOM kills in this process's cgroup (cgroup v2
// memory.events "oom_kill"), or -1 where it cannot be read.
int64_t CgroupOomKills();

// The task's directory name: `task_id` with characters other than
// [A-Za-z0-9._-] replaced by '_'.
std::string TaskDirName(const std::string& task_id);

class TaskRunner {
 public:
  enum class StopReason { kNone, kCancelled, kShutdown };

  // `client` and `metrics` must outlive the runner. `devices` are the CUDA
  // ordinals given to its ranks (empty on CPU).
  TaskRunner(TaskRunnerOptions options, hlab::v1::Task task,
             std::vector<int> devices, CoordinatorClient* client,
             WorkerMetrics* metrics);
  ~TaskRunner();

  // Runs the attempt to its end (see the top comment).
  void Run();

  void Stop(StopReason reason);
  // Step, tokens, loss, throughput so far (task id and attempt set).
  hlab::v1::TaskProgress Progress() const;

  const hlab::v1::Task& task() const { return task_; }
  const std::vector<int>& devices() const { return devices_; }

 private:
  struct Ranks;

  // Writes the task file; returns its path.
  absl::StatusOr<std::string> Prepare();
  absl::Status Spawn(const std::string& task_file, Ranks* ranks);
  // Supervises the ranks until all have exited.
  void Supervise(Ranks* ranks);
  // Sends what is due (or, with `all`, everything) from the relay. Returns
  // false when the coordinator fenced the attempt.
  bool Flush(bool all);
  // One report RPC with retries until it lands, the attempt is fenced
  // (returns that status) or reports are given up.
  template <typename Call>
  absl::Status Report(const char* rpc, Call call);
  void Finish(const TaskOutcome& outcome);
  bool GiveUpReports() const;
  bool IsEval() const { return task_.kind() == hlab::v1::TASK_KIND_EVAL; }
  // "hlab-eval" for EVAL tasks, else "hlab-train".
  const char* ProgramName() const;
  StopReason stop_reason() const;

  const TaskRunnerOptions options_;
  const hlab::v1::Task task_;
  const std::vector<int> devices_;
  CoordinatorClient* const client_;
  WorkerMetrics* const metrics_;
  const std::string dir_;
  std::unique_ptr<RecordRelay> relay_;  // owned by the Run() thread
  Backoff send_backoff_;                // between failed sends while running
  absl::Time next_send_ = absl::InfinitePast();
  bool fenced_ = false;  // Run() thread only
  // The watchdog stopped the ranks after this long without a record (zero:
  // it did not). Run() thread only.
  absl::Duration stalled_for_ = absl::ZeroDuration();

  mutable absl::Mutex mu_;
  StopReason stop_ ABSL_GUARDED_BY(mu_) = StopReason::kNone;
  absl::Time stop_time_ ABSL_GUARDED_BY(mu_);
  hlab::v1::TaskProgress progress_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hlab::worker

#endif  // HLAB_WORKER_TASK_RUNNER_H_
