#include "worker/trainer_process.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/spawn.h"
#include "common/status_macros.h"

extern char** environ;

namespace hlab::worker {
namespace {

// Longest record line kept; longer ones are cut (records are small).
constexpr size_t kMaxLine = 1 << 20;

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// The daemon's environment with `overrides` ("KEY=VALUE") applied.
std::vector<std::string> MergedEnvironment(
    const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  auto put = [&](const std::string& entry) {
    const size_t eq = entry.find('=');
    const std::string key = entry.substr(0, eq);
    if (vars.find(key) == vars.end()) order.push_back(key);
    vars[key] = entry;
  };
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) put(*e);
  for (const std::string& entry : overrides) put(entry);
  std::vector<std::string> out;
  out.reserve(order.size());
  for (const std::string& key : order) out.push_back(vars[key]);
  return out;
}

// Owns a file descriptor for the duration of Start().
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

ExitStatus FromWaitStatus(int status) {
  ExitStatus exit;
  if (WIFSIGNALED(status)) {
    exit.signaled = true;
    exit.signal = WTERMSIG(status);
  } else {
    exit.code = WEXITSTATUS(status);
  }
  return exit;
}

// Default signal handling, an empty signal mask and a process group of its
// own for the child, whatever the daemon blocks (it blocks SIGTERM/SIGINT to
// sigwait for them); stdin from /dev/null. SIGKILL when the worker dies, so
// a worker killed with SIGKILL (or lost to an OOM kill) leaves no trainer
// behind, not even one that is stopped and would never notice its record
// pipe close. The task runner's thread spawns and waits for its trainers,
// so it outlives them (the signal follows the spawning thread).
SpawnOptions ChildOptions() {
  SpawnOptions options;
  options.parent_death_signal = SIGKILL;
  options.reset_signal_mask = true;
  options.default_signal_handlers = true;
  options.new_process_group = true;
  options.Open(STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  return options;
}

}  // namespace

std::string ExitStatus::ToString() const {
  if (!signaled) return absl::StrCat("exit code ", code);
  const char* name = sigabbrev_np(signal);
  return absl::StrCat("killed by signal ", signal,
                      name != nullptr ? absl::StrCat(" (SIG", name, ")") : "");
}

absl::StatusOr<std::unique_ptr<TrainerProcess>> TrainerProcess::Start(
    const TrainerLaunch& launch) {
  if (launch.argv.empty()) return absl::InvalidArgumentError("empty argv");
  const std::string& program = launch.argv[0];
  if (::access(program.c_str(), X_OK) != 0) {
    const bool missing = errno == ENOENT;
    const std::string msg =
        absl::StrCat("cannot execute ", program, ": ", std::strerror(errno));
    return missing ? absl::NotFoundError(msg)
                   : absl::PermissionDeniedError(msg);
  }
  Fd read_end, write_end, log;
  if (launch.record_pipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Errno("pipe");
    read_end.fd = fds[0];
    // Keep the write end off fd 3, so dup2 onto 3 really duplicates it (and
    // clears close-on-exec).
    write_end.fd = ::fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
    ::close(fds[1]);
    if (write_end.fd < 0) return Errno("fcntl");
  }
  const std::string log_path =
      launch.log_path.empty() ? "/dev/null" : launch.log_path;
  log.fd =
      ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log.fd < 0) return Errno(absl::StrCat("open ", log_path));

  SpawnOptions options = ChildOptions();
  options.Dup2(log.fd, STDOUT_FILENO);
  options.Dup2(log.fd, STDERR_FILENO);
  if (launch.record_pipe) options.Dup2(write_end.fd, kRecordFd);
  options.environment = MergedEnvironment(launch.env);
  HLAB_ASSIGN_OR_RETURN(const pid_t pid, SpawnProcess(launch.argv, options));
  if (launch.record_pipe) {
    ::fcntl(read_end.fd, F_SETFL, ::fcntl(read_end.fd, F_GETFL) | O_NONBLOCK);
  }
  return std::unique_ptr<TrainerProcess>(
      new TrainerProcess(pid, launch.record_pipe ? read_end.release() : -1));
}

TrainerProcess::~TrainerProcess() {
  if (!exit_.has_value()) {
    Signal(SIGKILL);
    Wait();
  }
  if (record_fd_ >= 0) ::close(record_fd_);
}

std::vector<std::string> TrainerProcess::ReadLines(absl::Duration timeout) {
  std::vector<std::string> lines;
  if (record_fd_ < 0) {
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(timeout));
    return lines;
  }
  pollfd p{record_fd_, POLLIN, 0};
  const int n =
      ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (n <= 0) return lines;
  char buf[65536];
  while (true) {
    const ssize_t got = ::read(record_fd_, buf, sizeof(buf));
    if (got > 0) {
      partial_.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got == 0) {  // every writer closed it
      ::close(record_fd_);
      record_fd_ = -1;
      if (!partial_.empty()) partial_.push_back('\n');
    } else if (errno == EINTR) {
      continue;
    }
    break;  // EAGAIN: drained
  }
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    std::string line = partial_.substr(start, nl - start);
    if (line.size() > kMaxLine) line.resize(kMaxLine);
    if (!line.empty()) lines.push_back(std::move(line));
  }
  partial_.erase(0, start);
  if (partial_.size() > kMaxLine) partial_.clear();  // runaway line
  return lines;
}

bool TrainerProcess::Poll() {
  if (exit_.has_value()) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) exit_ = FromWaitStatus(status);
  return exit_.has_value();
}

ExitStatus TrainerProcess::Wait() {
  if (exit_.has_value()) return *exit_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  exit_ = r == pid_ ? FromWaitStatus(status) : ExitStatus{true, 0, SIGKILL};
  return *exit_;
}

void TrainerProcess::Signal(int sig) {
  if (exit_.has_value()) return;
  // The group first (wrappers and their children); the pid itself in case
  // it left its group.
  ::kill(-pid_, sig);
  ::kill(pid_, sig);
}

ExitStatus TrainerProcess::Terminate(absl::Duration grace) {
  Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  while (!Poll()) {
    if (absl::Now() >= deadline) {
      Signal(SIGKILL);
      return Wait();
    }
    ReadLines(absl::Milliseconds(20));
  }
  // The group may outlive its leader (a script's children): clean them up.
  ::kill(-pid_, SIGKILL);
  return *exit_;
}

absl::StatusOr<std::string> RunAndCapture(const std::vector<std::string>& argv,
                                          absl::Duration timeout,
                                          const std::string& log_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Errno("pipe");
  Fd read_end{fds[0]}, write_end{fds[1]};
  const std::string program = argv.empty() ? "" : argv[0];
  if (::access(program.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot execute ", program, ": ", std::strerror(errno)));
  }
  Fd err;
  err.fd = ::open(log_path.empty() ? "/dev/null" : log_path.c_str(),
                  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err.fd < 0) return Errno("open log");
  SpawnOptions options = ChildOptions();
  options.Dup2(write_end.fd, STDOUT_FILENO);
  options.Dup2(err.fd, STDERR_FILENO);
  HLAB_ASSIGN_OR_RETURN(const pid_t pid, SpawnProcess(argv, options));
  ::close(write_end.release());
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return absl::DeadlineExceededError(absl::StrCat(
          program, " did not finish within ", absl::FormatDuration(timeout)));
    }
    pollfd p{read_end.fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <=
        0) {
      continue;
    }
    const ssize_t got = ::read(read_end.fd, buf, sizeof(buf));
    if (got > 0) {
      out.append(buf, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const ExitStatus exit = FromWaitStatus(status);
  if (!exit.success()) {
    return absl::InternalError(
        absl::StrCat(program, " failed: ", exit.ToString()));
  }
  return out;
}

}  // namespace hlab::worker
