// LocalCluster: a coordinator and worker daemons as child processes on
// loopback, for `hlab up` (the embedded default).
//
// The coordinator listens on 127.0.0.1 with a port the OS picks (it prints
// "listening on HOST:PORT", read from its stdout) and keeps its database in
// `dir`; each worker gets its own data directory under `dir` and
// `worker_capacity` task slots (default one); it runs training tasks with
// hlab-train and EVAL tasks with hlab-eval from the same bin directory. Logs
// go to `dir`/logs. The binaries are looked up next to the running `hlab`
// executable. Stop() (or the destructor) sends SIGTERM to the workers, then
// to the coordinator, and waits; a child that outlives its grace period gets
// SIGKILL.
//
// If `hlab` itself is terminated (SIGTERM, SIGHUP) the children get SIGTERM
// too (InstallStopOnSignal); if it is killed (SIGKILL, a crash) the kernel
// sends them SIGTERM (the parent-death signal), so no daemon outlives it.
//
// Not thread-safe. Start and restart the cluster from one thread that
// outlives it: the kernel sends the parent-death signal when the thread
// that spawned a child exits.
//
//   LocalClusterOptions options;
//   options.dir = "hlab-up";
//   options.workers = 2;
//   LocalCluster cluster(options);
//   HLAB_RETURN_IF_ERROR(cluster.Start());
//   std::string address = cluster.address();   // "127.0.0.1:40123"
#ifndef HLAB_CLI_LOCAL_CLUSTER_H_
#define HLAB_CLI_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace hlab::cli {

struct LocalClusterOptions {
  std::string dir = "hlab-up";
  int workers = 2;
  std::string metrics_listen = "none";  // the coordinator's /metrics
  // Where hlab-coordinator, hlab-worker, hlab-train and hlab-eval are;
  // empty: next to the running executable.
  std::string bin_dir;
  // The coordinator's lease time (--lease-seconds); 0: its default.
  int lease_seconds = 0;
  // Task slots of each worker (--capacity); a task with cpu_ranks R needs R.
  int worker_capacity = 1;
  // The workers checkpoint into <dir>/checkpoints, shared (--checkpoint-
  // root), so a task retried on another worker resumes where it was.
  bool share_checkpoints = true;
  // More flags for every worker (hlab-chaos: a short --stall-timeout).
  std::vector<std::string> worker_args = {};
};

class LocalCluster {
 public:
  explicit LocalCluster(LocalClusterOptions options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts the coordinator, waits for its address, starts the workers.
  // NotFound naming a missing binary; Unavailable when the coordinator
  // exits or prints no address within 30 s (its log is named).
  absl::Status Start();
  void Stop();

  // Starts the coordinator again on the same address and database (after
  // it died or was killed; it is killed first if still running). For the
  // fault tests: the workers reconnect by themselves.
  absl::Status RestartCoordinator();
  // Starts worker `index` again with the same name and data dir (after it
  // died or was killed; killed first if still running).
  absl::Status RestartWorker(size_t index);

  // Restarts every daemon of the cluster that has exited (a crash, the OOM
  // killer, kill -9) and returns one line per daemon found gone, saying how
  // it ended and what was done ("the coordinator was killed by signal 9
  // (Killed); restarted on 127.0.0.1:40123 with the same database ...").
  // The coordinator recovers its leases and the workers reconnect by
  // themselves (docs/operations.md). A daemon that has exited
  // kMaxRestartsPerMinute times within a minute is left down, and its line
  // says so and names its log. Call it from the thread that started the
  // cluster (hlab up does, every second, while its sweep is watched).
  std::vector<std::string> RestartExited();
  static constexpr int kMaxRestartsPerMinute = 3;

  pid_t coordinator_pid() const { return coordinator_; }
  const std::vector<pid_t>& worker_pids() const { return workers_; }

  // Makes SIGTERM and SIGHUP to this process send SIGTERM to the children
  // and exit, and ignores SIGPIPE (a closed stdout must not kill hlab before
  // it stops its children). One cluster per process.
  void InstallStopOnSignal();

  const std::string& address() const { return address_; }
  const std::string& dir() const { return options_.dir; }

 private:
  // Starts hlab-coordinator on `listen` and reads its address.
  absl::Status StartCoordinator(const std::string& listen);
  // Starts worker `index` (local-<index>); its pid or -1.
  pid_t StartWorker(size_t index);
  // Refreshes the pids the signal handler of InstallStopOnSignal stops.
  void PublishChildren();
  // Whether a daemon that exited at `now`, with the earlier exits in
  // `exits`, may be restarted (at most kMaxRestartsPerMinute a minute).
  static bool MayRestart(
      std::vector<std::chrono::steady_clock::time_point>* exits,
      std::chrono::steady_clock::time_point now);

  LocalClusterOptions options_;
  std::string bin_;
  std::string address_;
  pid_t coordinator_ = -1;
  std::vector<pid_t> workers_;
  bool stop_on_signal_ = false;
  // When each daemon was found exited (RestartExited), for the restart limit.
  std::vector<std::chrono::steady_clock::time_point> coordinator_exits_;
  std::vector<std::vector<std::chrono::steady_clock::time_point>> worker_exits_;
};

// The directory of the running executable (for sibling binaries).
std::string ExecutableDir();

}  // namespace hlab::cli

#endif  // HLAB_CLI_LOCAL_CLUSTER_H_
