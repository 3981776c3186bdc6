// SpawnProcess: starts a program with posix_spawn (fork + exec without
// running any code of ours in the child, so it is safe from a threaded
// process), with the child's file descriptors and signal state set up by a
// list of actions. The one way hlab starts child processes: the worker's
// trainers, the coordinator's sweep fitter, `hlab up`'s daemons.
//
// A child that must not outlive its parent (parent_death_signal) is started
// with fork + exec instead, since posix_spawn cannot set it: between the two
// the child makes only async-signal-safe system calls (prctl, sigaction,
// setpgid, open, dup2, close, execve), so this is safe from a threaded
// process too.
//
// The caller owns the child: it waits for it (waitpid) and signals it.
//
// Thread-safety: SpawnProcess is thread-safe; a SpawnOptions is a plain
// value (build it on one thread).
//
//   SpawnOptions options;
//   options.Open(STDIN_FILENO, "/dev/null", O_RDONLY);
//   options.Dup2(pipe_write_fd, STDOUT_FILENO);
//   options.reset_signal_mask = true;
//   HLAB_ASSIGN_OR_RETURN(pid_t pid, SpawnProcess({"/bin/ls", "-l"}, options));
#ifndef HLAB_COMMON_SPAWN_H_
#define HLAB_COMMON_SPAWN_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hlab {

struct SpawnOptions {
  // File actions, applied in the child in the order they were added.
  // Opens `path` with `flags` (and `mode` when created) onto `fd`.
  void Open(int fd, std::string path, int flags, int mode = 0644);
  // Duplicates the parent's `from` onto `to` (clearing close-on-exec).
  void Dup2(int from, int to);
  // Closes `fd`.
  void Close(int fd);

  // An empty signal mask in the child (else it inherits the caller's, e.g.
  // a daemon that blocks SIGTERM to sigwait for it).
  bool reset_signal_mask = false;
  // Default handling of every signal (else ignored signals stay ignored).
  bool default_signal_handlers = false;
  // A process group of its own (pgid = its pid), so a signal to -pid
  // reaches the child and its own children.
  bool new_process_group = false;
  // Linux: the signal the child gets when its parent dies (0: none). Set
  // SIGKILL for a child that must not outlive its parent: a trainer whose
  // worker was killed with SIGKILL, even a stopped (SIGSTOP) one. The
  // kernel sends it when the *thread* that spawned the child exits, so
  // spawn from a thread that outlives the child (and waits for it). A child
  // whose parent died before it could ask for the signal kills itself with
  // it at once.
  int parent_death_signal = 0;
  // The child's environment ("KEY=VALUE"); nullopt: the caller's.
  std::optional<std::vector<std::string>> environment;

  struct Action {
    enum Kind { kOpen, kDup2, kClose } kind;
    int fd;  // the child's descriptor (kDup2: the target)
    int from = -1;
    std::string path;
    int flags = 0;
    int mode = 0;
  };
  std::vector<Action> actions;
};

// Starts argv[0] (a path; not searched in PATH) with `argv`; returns the
// child's pid. InvalidArgument for an empty argv; NotFound when the program
// does not exist, PermissionDenied when it cannot be executed, Internal for
// other failures, each naming the program ("cannot run PATH: REASON").
absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                                   const SpawnOptions& options);

// Reads `fd` (a child's stdout, on a pipe) until a line that starts with
// `prefix` and returns the rest of that line, e.g. the address of a daemon
// that prints "listening on HOST:PORT". "" when the child closes its end
// (it exited) or `timeout` passes first. What was read past that line stays
// in `*buffer` for the next call (nullptr: dropped); lines before it are
// dropped.
std::string ReadLineStartingWith(int fd, std::string_view prefix,
                                 absl::Duration timeout,
                                 std::string* buffer = nullptr);

}  // namespace hlab

#endif  // HLAB_COMMON_SPAWN_H_
