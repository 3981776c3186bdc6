// TrainerProcess: one hlab-train child process of the worker daemon.
//
// Start() spawns the program (common/spawn.h) in a process group of its
// own, with stdin from /dev/null, stdout and stderr appended to a log file,
// and, when asked, a pipe on file descriptor 3 for the JSON-lines records
// (`--record-fd 3`). The child gets SIGKILL when the thread that started it
// exits, the whole worker dying included (kill -9, an OOM kill), so start
// and wait for it on one thread that outlives it.
// Signals go to the whole process group, so a wrapper script and its
// children die together. The exit is detected by waitpid, never by the end
// of the record pipe (a grandchild may hold it open).
//
// Not thread-safe: one supervising thread owns each TrainerProcess. The
// destructor kills (SIGKILL) and reaps a child that is still running, so a
// TrainerProcess never leaves a zombie or an orphan behind, and the
// parent-death signal covers the worker's own death.
//
//   TrainerLaunch launch;
//   launch.argv = {"/opt/hlab/bin/hlab-train", "--task", "t.json",
//                  "--record-fd", "3"};
//   launch.log_path = "/data/tasks/t1/trainer.log";
//   HLAB_ASSIGN_OR_RETURN(auto child, TrainerProcess::Start(launch));
//   while (!child->Poll()) {
//     for (const std::string& line : child->ReadLines(absl::Milliseconds(100)))
//       relay.Add(line);
//   }
//   ExitStatus exit = *child->exit_status();
#ifndef HLAB_WORKER_TRAINER_PROCESS_H_
#define HLAB_WORKER_TRAINER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hlab::worker {

// How a child ended: an exit code, or the signal that killed it.
struct ExitStatus {
  bool signaled = false;
  int code = 0;    // exit code when !signaled
  int signal = 0;  // terminating signal when signaled

  bool success() const { return !signaled && code == 0; }
  // "exit code 2", "killed by signal 9 (SIGKILL)".
  std::string ToString() const;
};

struct TrainerLaunch {
  std::vector<std::string> argv;  // argv[0] is the program path
  // Extra environment entries "KEY=VALUE", added to (or replacing those of)
  // the daemon's environment.
  std::vector<std::string> env;
  // stdout and stderr are appended here; empty: /dev/null.
  std::string log_path;
  // Open a pipe on the child's fd 3 for records.
  bool record_pipe = false;
};

class TrainerProcess {
 public:
  // The file descriptor the child writes records to.
  static constexpr int kRecordFd = 3;

  // Spawns the child. NotFound / PermissionDenied when the program cannot be
  // executed; Internal for failed system calls (pipe, log file).
  static absl::StatusOr<std::unique_ptr<TrainerProcess>> Start(
      const TrainerLaunch& launch);

  ~TrainerProcess();
  TrainerProcess(const TrainerProcess&) = delete;
  TrainerProcess& operator=(const TrainerProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Complete record lines available now, waiting up to `timeout` for the
  // first byte when none is buffered. Partial lines stay buffered until their
  // newline (or the end of the pipe). Empty without a record pipe (then it
  // just sleeps for `timeout`, so callers can use it as their tick).
  std::vector<std::string> ReadLines(absl::Duration timeout);

  // Reaps the child if it has exited; true once it has.
  bool Poll();
  // Blocks until the child exits (no timeout: kill it first if needed).
  ExitStatus Wait();
  // Sends `sig` to the child's process group (no-op once reaped).
  void Signal(int sig);
  // SIGTERM, then SIGKILL after `grace`; returns once reaped.
  ExitStatus Terminate(absl::Duration grace);

  // Set once Poll()/Wait() has reaped the child.
  const std::optional<ExitStatus>& exit_status() const { return exit_; }

 private:
  TrainerProcess(pid_t pid, int record_fd) : pid_(pid), record_fd_(record_fd) {}

  pid_t pid_;
  int record_fd_;  // read end of the record pipe, -1 when none or closed
  std::string partial_;
  std::optional<ExitStatus> exit_;
};

// Runs `argv` to completion with stdout captured (stderr to `log_path`, or
// discarded) and returns its stdout. DeadlineExceeded (after killing it) when
// it runs longer than `timeout`; Internal with the exit status when it fails.
absl::StatusOr<std::string> RunAndCapture(const std::vector<std::string>& argv,
                                          absl::Duration timeout,
                                          const std::string& log_path = "");

}  // namespace hlab::worker

#endif  // HLAB_WORKER_TRAINER_PROCESS_H_
