#include "bench/coordinator_process.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/spawn.h"

namespace hlab::bench {

std::string CoordinatorBesideThisProgram() {
  std::error_code error;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  return (self.parent_path() / "hlab-coordinator").string();
}

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(
    const std::string& binary, const std::vector<std::string>& flags,
    const std::string& log_path) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe for hlab-coordinator's stdout");
  }
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(),
              {"--listen", "127.0.0.1:0", "--metrics-listen", "none"});
  SpawnOptions options;
  options.Open(STDIN_FILENO, "/dev/null", O_RDONLY);
  options.Dup2(out[1], STDOUT_FILENO);
  options.Open(STDERR_FILENO, log_path, O_WRONLY | O_CREAT | O_APPEND);
  options.reset_signal_mask = true;
  options.default_signal_handlers = true;
  options.parent_death_signal = SIGKILL;
  absl::StatusOr<pid_t> pid = SpawnProcess(argv, options);
  ::close(out[1]);
  if (!pid.ok()) {
    ::close(out[0]);
    return pid.status();
  }
  auto process = std::unique_ptr<CoordinatorProcess>(new CoordinatorProcess);
  process->pid_ = *pid;
  process->address_ =
      ReadLineStartingWith(out[0], "listening on ", absl::Seconds(60));
  ::close(out[0]);
  if (process->address_.empty()) {
    return absl::UnavailableError(absl::StrCat(
        binary, " did not print its address within 60 s: see ", log_path));
  }
  return process;
}

CoordinatorProcess::~CoordinatorProcess() { Stop(); }

ProcessUsage CoordinatorProcess::Usage() const {
  return pid_ > 0 ? ReadProcessUsage(pid_) : ProcessUsage();
}

int CoordinatorProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = -1;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (true) {
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (done < 0) {
      status = -1;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return status;
}

}  // namespace hlab::bench
