// CoordinatorProcess: a real hlab-coordinator as a child process of
// hlab-bench-coordinator, so that its CPU time and memory are measured
// apart from the simulated workers' (the "churn" profile).
//
// The child gets its own temp database and log, listens on 127.0.0.1 port
// 0 and prints "listening on HOST:PORT" (read by Start). CPU time and RSS
// come from /proc/PID/stat and /proc/PID/status. The destructor stops it
// (SIGTERM, then SIGKILL after 20 s).
//
// Not thread-safe: one thread drives it.
//
//   HLAB_ASSIGN_OR_RETURN(auto coordinator, CoordinatorProcess::Start(
//       "build/bin/hlab-coordinator", {"--db", dir + "/load.db"},
//       dir + "/coordinator.log"));
//   ProcessUsage before = coordinator->Usage();
#ifndef HLAB_BENCH_COORDINATOR_PROCESS_H_
#define HLAB_BENCH_COORDINATOR_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/process_usage.h"

namespace hlab::bench {

class CoordinatorProcess {
 public:
  // Starts `binary` with --listen 127.0.0.1:0 --metrics-listen none, then
  // `flags` (which may override those); stderr to `log_path`. Unavailable
  // (naming the log) when it does not print its address within 60 s.
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(
      const std::string& binary, const std::vector<std::string>& flags,
      const std::string& log_path);
  ~CoordinatorProcess();

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

  // Now; zeros once the process has exited.
  ProcessUsage Usage() const;

  // SIGTERM and wait (SIGKILL after 20 s); the exit status as waitpid
  // reports it, -1 when it was not running.
  int Stop();

 private:
  CoordinatorProcess() = default;

  pid_t pid_ = -1;
  std::string address_;
};

// hlab-coordinator beside the running program (/proc/self/exe's folder).
std::string CoordinatorBesideThisProgram();

}  // namespace hlab::bench

#endif  // HLAB_BENCH_COORDINATOR_PROCESS_H_
