// Daemon: the worker daemon's control loop (hlab-worker).
//
// Run() registers with the coordinator (its devices and capacity), then
// leases tasks while it has free slots and runs each on its own thread with a
// TaskRunner (which spawns hlab-train and reports). A heartbeat thread sends
// every task's progress every few seconds and stops the tasks the
// coordinator names in its answer (cancelled, or the lease moved to a newer
// attempt).
//
// Slots: one per GPU (a W-GPU task takes W), or `capacity` on a CPU-only
// worker (a task with R CPU ranks takes R; Lease sends the free slots so the
// coordinator offers only tasks that fit). A new attempt of a task whose older
// attempt is still terminating on this worker waits for it, so two trainers
// never share a task directory.
//
// Coordinator unavailable: every loop retries with exponential backoff and
// the daemon re-registers (same worker id) once it answers again; running
// trainers keep running and their reports are retried. A crashing trainer
// only fails its task.
//
// Shutdown() (SIGTERM / SIGINT in hlab-worker): no new leases (a long poll in
// flight is cancelled), SIGTERM to every trainer (they checkpoint and exit
// 75), each task reported as a retryable failure, heartbeats until the
// trainers are gone, then Deregister (the coordinator marks the worker LOST
// at once rather than after a lease time), then Run() returns.
//
// Thread-safe: Shutdown() and the accessors may be called from any thread
// while Run() runs.
//
//   CoordinatorClient client("127.0.0.1:50151", token);
//   Daemon daemon(options, &client, metrics.get());
//   std::thread signals([&] { WaitForSigterm(); daemon.Shutdown(); });
//   absl::Status status = daemon.Run();
#ifndef HLAB_WORKER_DAEMON_H_
#define HLAB_WORKER_DAEMON_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hlab/v1/worker.pb.h"
#include "worker/task_runner.h"

namespace hlab::worker {

class CoordinatorClient;
class WorkerMetrics;

struct DaemonOptions {
  // Worker id sent on Register (stable across restarts); empty: the
  // coordinator assigns one.
  std::string worker_id;
  std::string hostname;
  // Sent on Register: the build it runs (hlab-worker: BuildVersion()).
  std::string version;
  // From ProbeDevices(): the CPU first, then the GPUs.
  std::vector<hlab::v1::Device> devices;
  // Tasks at once; 0: one per GPU, or 1 without GPUs.
  int capacity = 0;
  // Long-poll time of one Lease call.
  absl::Duration lease_wait = absl::Seconds(10);
  // Zero: the coordinator's heartbeat_interval_ms (5 s if it sends none).
  absl::Duration heartbeat_interval = absl::ZeroDuration();
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);
  // trainer, data_dir, kill_grace, ...; worker_id is filled in by the daemon.
  TaskRunnerOptions runner;
};

class Daemon {
 public:
  // `client` and `metrics` must outlive the daemon.
  Daemon(DaemonOptions options, CoordinatorClient* client,
         WorkerMetrics* metrics);
  // Shuts down and waits if Run() is still running on another thread.
  ~Daemon();

  // Blocks until Shutdown() has finished its work. Errors only for what
  // retrying cannot fix: the coordinator refused the registration
  // (UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT).
  absl::Status Run();
  // Starts the shutdown; returns at once.
  void Shutdown();

  // The id the coordinator confirmed (empty before registering).
  std::string worker_id() const;
  // Tasks (id, attempt) with a live runner.
  std::vector<hlab::v1::TaskProgress> RunningTasks() const;
  int capacity() const { return capacity_; }

 private:
  struct Entry {
    std::unique_ptr<TaskRunner> runner;
    std::thread thread;
    bool done = false;
  };

  absl::Status Register();
  // Tells the coordinator this worker leaves (once, best effort).
  void Deregister();
  void HeartbeatLoop();
  // Returns when stopping (OK) or on a fatal registration error.
  absl::Status LeaseLoop();
  // Free devices to offer, or empty when no slot is free.
  std::vector<hlab::v1::Device> FreeDevices() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartTask(const hlab::v1::Task& task, std::vector<int> devices);
  void RunTask(Entry* entry, const std::string& key);
  // Joins and drops finished runners.
  void Reap();
  // Sleeps up to `d`; false when the daemon is stopping.
  bool SleepUnlessStopping(absl::Duration d);
  void NoteRpc(const char* rpc, const absl::Status& status);

  const DaemonOptions options_;
  CoordinatorClient* const client_;
  WorkerMetrics* const metrics_;
  const int gpus_;
  const int capacity_;

  absl::Mutex register_mu_;  // one Register at a time
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  // As the last heartbeat's answer said (`hlab drain`): logged on a change.
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  // Keyed by "<task_id>#<attempt>".
  std::map<std::string, std::unique_ptr<Entry>> tasks_ ABSL_GUARDED_BY(mu_);
  std::set<int> busy_gpus_ ABSL_GUARDED_BY(mu_);
  int busy_slots_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hlab::worker

#endif  // HLAB_WORKER_DAEMON_H_
