#include "common/spawn.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace hlab {
namespace {

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

absl::Status SpawnError(const std::string& program, int error,
                        const SpawnOptions& options) {
  std::string message =
      absl::StrCat("cannot run ", program, ": ", std::strerror(error));
  // The program is there, so a file its redirections open is not (or may
  // not be opened): say which ones, since errno does not.
  if ((error == ENOENT || error == EACCES) &&
      ::access(program.c_str(), X_OK) == 0) {
    std::vector<std::string> paths;
    for (const SpawnOptions::Action& a : options.actions) {
      if (a.kind == SpawnOptions::Action::kOpen) paths.push_back(a.path);
    }
    if (!paths.empty()) {
      message = absl::StrCat("cannot run ", program, ": ", std::strerror(error),
                             " (the program is there; ",
                             "the files opened for it are ",
                             absl::StrJoin(paths, ", "), ")");
    }
  }
  if (error == ENOENT) return absl::NotFoundError(message);
  if (error == EACCES) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

// Writes errno to `error_fd` and exits the child.
[[noreturn]] void ChildFail(int error_fd) {
  const int error = errno;
  (void)!::write(error_fd, &error, sizeof(error));
  ::_exit(127);
}

// The child's side of ForkExec: async-signal-safe calls only. On any
// failure it writes errno to `error_fd` (close-on-exec, so a successful exec
// closes it with nothing written) and exits 127.
[[noreturn]] void ExecChild(const SpawnOptions& options, pid_t parent,
                            const sigset_t& final_mask, const char* program,
                            char* const* argv, char* const* envp,
                            int error_fd) {
  auto fail = [error_fd]() { ChildFail(error_fd); };
  if (::prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) fail();
  // The parent died before the prctl: the signal will never come.
  if (::getppid() != parent) {
    ::kill(::getpid(), options.parent_death_signal);
    ::_exit(127);
  }
  if (options.default_signal_handlers) {
    struct sigaction action = {};
    action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig == SIGKILL || sig == SIGSTOP) continue;
      ::sigaction(sig, &action, nullptr);  // EINVAL for libc's own: fine
    }
  }
  if (options.new_process_group && ::setpgid(0, 0) != 0) fail();
  for (const SpawnOptions::Action& a : options.actions) {
    switch (a.kind) {
      case SpawnOptions::Action::kOpen: {
        const int fd =
            ::open(a.path.c_str(), a.flags, static_cast<mode_t>(a.mode));
        if (fd < 0) fail();
        if (fd != a.fd) {
          if (::dup2(fd, a.fd) < 0) fail();
          ::close(fd);
        }
        break;
      }
      case SpawnOptions::Action::kDup2:
        if (a.from == a.fd) {
          const int flags = ::fcntl(a.fd, F_GETFD);
          if (flags < 0 || ::fcntl(a.fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) {
            fail();
          }
        } else if (::dup2(a.from, a.fd) < 0) {
          fail();
        }
        break;
      case SpawnOptions::Action::kClose:
        ::close(a.fd);
        break;
    }
  }
  ::sigprocmask(SIG_SETMASK, &final_mask, nullptr);
  ::execve(program, argv, envp);
  ChildFail(error_fd);
}

// fork + exec, for what posix_spawn cannot do (the parent-death signal).
// Every signal is blocked across the fork, so no handler of the parent's
// runs in the child before its handlers are reset.
absl::StatusOr<pid_t> ForkExec(const std::string& program,
                               const SpawnOptions& options, char* const* argv,
                               char* const* envp) {
  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0)
    return SpawnError(program, errno, options);
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  sigset_t final_mask = saved;
  if (options.reset_signal_mask) sigemptyset(&final_mask);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(error_pipe[0]);
    ExecChild(options, parent, final_mask, program.c_str(), argv, envp,
              error_pipe[1]);
  }
  const int fork_error = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  ::close(error_pipe[1]);
  if (pid < 0) {
    ::close(error_pipe[0]);
    return SpawnError(program, fork_error, options);
  }
  int child_error = 0;
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &child_error, sizeof(child_error));
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == sizeof(child_error)) {
    ::waitpid(pid, nullptr, 0);
    return SpawnError(program, child_error, options);
  }
  return pid;
}

}  // namespace

void SpawnOptions::Open(int fd, std::string path, int flags, int mode) {
  actions.push_back({Action::kOpen, fd, -1, std::move(path), flags, mode});
}

void SpawnOptions::Dup2(int from, int to) {
  actions.push_back({Action::kDup2, to, from, "", 0, 0});
}

void SpawnOptions::Close(int fd) {
  actions.push_back({Action::kClose, fd, -1, "", 0, 0});
}

absl::StatusOr<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                                   const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) {
    return absl::InvalidArgumentError("spawn: no program to run");
  }
  std::vector<std::string> args = argv;
  std::vector<char*> c_args = CStrings(args);
  std::vector<std::string> env;
  std::vector<char*> c_env;
  if (options.environment) {
    env = *options.environment;
    c_env = CStrings(env);
  }
  char* const* envp = options.environment ? c_env.data() : environ;
  if (options.parent_death_signal != 0) {
    return ForkExec(argv[0], options, c_args.data(), envp);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (const SpawnOptions::Action& a : options.actions) {
    switch (a.kind) {
      case SpawnOptions::Action::kOpen:
        posix_spawn_file_actions_addopen(&actions, a.fd, a.path.c_str(),
                                         a.flags, static_cast<mode_t>(a.mode));
        break;
      case SpawnOptions::Action::kDup2:
        posix_spawn_file_actions_adddup2(&actions, a.from, a.fd);
        break;
      case SpawnOptions::Action::kClose:
        posix_spawn_file_actions_addclose(&actions, a.fd);
        break;
    }
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = 0;
  if (options.reset_signal_mask) {
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setsigmask(&attr, &empty);
    flags |= POSIX_SPAWN_SETSIGMASK;
  }
  if (options.default_signal_handlers) {
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigdefault(&attr, &all);
    flags |= POSIX_SPAWN_SETSIGDEF;
  }
  if (options.new_process_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);

  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr,
                               c_args.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc == 0) return pid;
  return SpawnError(argv[0], rc, options);
}

std::string ReadLineStartingWith(int fd, std::string_view prefix,
                                 absl::Duration timeout, std::string* buffer) {
  std::string local;
  std::string& text = buffer != nullptr ? *buffer : local;
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  while (true) {
    size_t newline;
    while ((newline = text.find('\n')) != std::string::npos) {
      std::string line = text.substr(0, newline);
      text.erase(0, newline + 1);
      if (line.compare(0, prefix.size(), prefix) == 0) {
        return line.substr(prefix.size());
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return "";
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";  // the child closed its end
    text.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace hlab
