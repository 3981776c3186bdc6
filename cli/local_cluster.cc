#include "cli/local_cluster.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/spawn.h"

namespace hlab::cli {
namespace {

namespace fs = std::filesystem;

// Spawns `argv` with stdout to `stdout_fd` (or the log) and stderr to the
// log file. Returns the pid or -1. The child gets SIGTERM when this
// process dies, even by SIGKILL (the parent-death signal: SIGTERM, so the
// coordinator closes its database and a worker stops its trainers as on
// Ctrl-C); the cluster is started and restarted from one thread that lives
// as long as it does (common/spawn.h).
pid_t Spawn(const std::vector<std::string>& args, const std::string& log,
            int stdout_fd) {
  SpawnOptions options;
  options.parent_death_signal = SIGTERM;
  options.Open(STDERR_FILENO, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
  options.Dup2(stdout_fd >= 0 ? stdout_fd : STDERR_FILENO, STDOUT_FILENO);
  options.Open(STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const absl::StatusOr<pid_t> pid = SpawnProcess(args, options);
  return pid.ok() ? *pid : -1;
}

// Children to signal when hlab is terminated (read by the signal handler).
constexpr int kMaxChildren = 64;
volatile sig_atomic_t g_child_count = 0;
pid_t g_children[kMaxChildren];

void OnTerminate(int signal) {
  for (int i = 0; i < g_child_count; ++i) ::kill(g_children[i], SIGTERM);
  ::_exit(128 + signal);
}

void Terminate(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

std::string ExecutableDir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

LocalCluster::LocalCluster(LocalClusterOptions options)
    : options_(std::move(options)) {}

LocalCluster::~LocalCluster() { Stop(); }

absl::Status LocalCluster::Start() {
  bin_ = options_.bin_dir.empty() ? ExecutableDir() : options_.bin_dir;
  for (const char* name :
       {"hlab-coordinator", "hlab-worker", "hlab-train", "hlab-eval"}) {
    const std::string path = bin_ + "/" + name;
    if (::access(path.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(
          "hlab up needs ", path, ": build it with scripts/setup.sh"));
    }
  }
  std::error_code ec;
  fs::create_directories(fs::path(options_.dir) / "logs", ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", options_.dir, "/logs: ", ec.message()));
  }
  if (absl::Status s = StartCoordinator("127.0.0.1:0"); !s.ok()) {
    Stop();
    return s;
  }
  for (int i = 0; i < options_.workers; ++i) {
    const pid_t pid = StartWorker(static_cast<size_t>(i));
    if (pid < 0) {
      Stop();
      return absl::UnavailableError("cannot start hlab-worker");
    }
    workers_.push_back(pid);
  }
  return absl::OkStatus();
}

pid_t LocalCluster::StartWorker(size_t index) {
  const std::string name = absl::StrCat("local-", index);
  std::vector<std::string> argv = {
      bin_ + "/hlab-worker",
      "--coordinator",
      address_,
      "--data-dir",
      absl::StrCat(options_.dir, "/", name),
      "--capacity",
      std::to_string(std::max(1, options_.worker_capacity)),
      "--evaluator",
      bin_ + "/hlab-eval",
      "--metrics-listen",
      "none",
      "--name",
      name};
  if (options_.share_checkpoints) {
    argv.insert(argv.end(), {"--checkpoint-root",
                             absl::StrCat(options_.dir, "/checkpoints")});
  }
  argv.insert(argv.end(), options_.worker_args.begin(),
              options_.worker_args.end());
  return Spawn(argv, absl::StrCat(options_.dir, "/logs/", name, ".log"), -1);
}

absl::Status LocalCluster::RestartWorker(size_t index) {
  if (index >= workers_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no worker ", index, " (", workers_.size(), " started)"));
  }
  if (workers_[index] > 0) {
    ::kill(workers_[index], SIGKILL);
    ::waitpid(workers_[index], nullptr, 0);
  }
  workers_[index] = StartWorker(index);
  PublishChildren();
  if (workers_[index] < 0) {
    return absl::UnavailableError("cannot start hlab-worker");
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StartCoordinator(const std::string& listen) {
  const std::string log = options_.dir + "/logs/coordinator.log";
  int out[2];
  if (::pipe(out) != 0) return absl::InternalError("pipe() failed");
  std::vector<std::string> args = {bin_ + "/hlab-coordinator",
                                   "--listen",
                                   listen,
                                   "--db",
                                   options_.dir + "/hlab.db",
                                   "--metrics-listen",
                                   options_.metrics_listen};
  if (options_.lease_seconds > 0) {
    args.push_back("--lease-seconds");
    args.push_back(std::to_string(options_.lease_seconds));
  }
  coordinator_ = Spawn(args, log, out[1]);
  ::close(out[1]);
  if (coordinator_ < 0) {
    ::close(out[0]);
    return absl::UnavailableError("cannot start hlab-coordinator");
  }
  const std::string address =
      ReadLineStartingWith(out[0], "listening on ", absl::Seconds(30));
  ::close(out[0]);
  if (address.empty()) {
    return absl::UnavailableError(
        absl::StrCat("hlab-coordinator did not start: see ", log));
  }
  address_ = address;
  return absl::OkStatus();
}

absl::Status LocalCluster::RestartCoordinator() {
  if (coordinator_ > 0) {
    ::kill(coordinator_, SIGKILL);
    ::waitpid(coordinator_, nullptr, 0);
    coordinator_ = -1;
  }
  // The port may take a moment to be free again.
  absl::Status status;
  for (int attempt = 0; attempt < 50; ++attempt) {
    status = StartCoordinator(address_);
    if (status.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  PublishChildren();
  return status;
}

void LocalCluster::PublishChildren() {
  if (!stop_on_signal_) return;
  // The handler reads g_children[0, g_child_count): shrink the count while
  // the entries change.
  g_child_count = 0;
  int count = 0;
  if (coordinator_ > 0) g_children[count++] = coordinator_;
  for (pid_t pid : workers_) {
    if (pid > 0 && count < kMaxChildren) g_children[count++] = pid;
  }
  g_child_count = count;
}

void LocalCluster::InstallStopOnSignal() {
  stop_on_signal_ = true;
  PublishChildren();
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGTERM, OnTerminate);
  std::signal(SIGHUP, OnTerminate);
}

bool LocalCluster::MayRestart(
    std::vector<std::chrono::steady_clock::time_point>* exits,
    std::chrono::steady_clock::time_point now) {
  exits->push_back(now);
  const auto window_start = now - std::chrono::minutes(1);
  exits->erase(std::remove_if(exits->begin(), exits->end(),
                              [&](auto t) { return t < window_start; }),
               exits->end());
  return static_cast<int>(exits->size()) <= kMaxRestartsPerMinute;
}

std::vector<std::string> LocalCluster::RestartExited() {
  std::vector<std::string> lines;
  const auto now = std::chrono::steady_clock::now();
  auto exited = [](pid_t pid, std::string* how) {
    int status = 0;
    if (pid <= 0 || ::waitpid(pid, &status, WNOHANG) != pid) return false;
    *how = WIFSIGNALED(status)
               ? absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                              ::strsignal(WTERMSIG(status)), ")")
               : absl::StrCat("exited with status ", WEXITSTATUS(status));
    return true;
  };
  std::string how;
  if (exited(coordinator_, &how)) {
    coordinator_ = -1;
    const std::string log = options_.dir + "/logs/coordinator.log";
    if (!MayRestart(&coordinator_exits_, now)) {
      lines.push_back(absl::StrCat(
          "the coordinator ", how, "; it exited ", coordinator_exits_.size(),
          " times within a minute, so it is left down: see ", log));
    } else if (absl::Status s = RestartCoordinator(); s.ok()) {
      lines.push_back(absl::StrCat("the coordinator ", how, "; restarted on ",
                                   address_,
                                   " with the same database (the workers "
                                   "reconnect; nothing stored is lost)"));
    } else {
      lines.push_back(absl::StrCat("the coordinator ", how,
                                   "; restarting it failed: ", s.message()));
    }
  }
  worker_exits_.resize(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!exited(workers_[i], &how)) continue;
    workers_[i] = -1;
    const std::string name = absl::StrCat("local-", i);
    if (!MayRestart(&worker_exits_[i], now)) {
      lines.push_back(absl::StrCat(
          "worker ", name, " ", how, "; it exited ", worker_exits_[i].size(),
          " times within a minute, so it is left down: see ", options_.dir,
          "/logs/", name, ".log"));
    } else if (absl::Status s = RestartWorker(i); s.ok()) {
      lines.push_back(absl::StrCat("worker ", name, " ", how,
                                   "; restarted (its task is retried, from "
                                   "its last checkpoint)"));
    } else {
      lines.push_back(absl::StrCat("worker ", name, " ", how,
                                   "; restarting it failed: ", s.message()));
    }
  }
  PublishChildren();
  return lines;
}

void LocalCluster::Stop() {
  g_child_count = 0;
  // A worker that is down (and was not restarted) is -1: kill(-1) would
  // signal every process this user may signal.
  for (pid_t pid : workers_) {
    if (pid > 0) ::kill(pid, SIGTERM);
  }
  for (pid_t pid : workers_) Terminate(pid);
  workers_.clear();
  Terminate(coordinator_);
  coordinator_ = -1;
}

}  // namespace hlab::cli
