#include "bench/coordinator_process.h"
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/spawn.h"

namespace hlab::bench {
namespace {

// "VmRSS:    1234 kB" -> bytes; 0 when absent.
int64_t StatusKilobytes(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return 0;
}

}  // namespace

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
  // Read "listening on HOST:PORT".
  std::string text;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (process->address_.empty() &&
         std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buffer[256];
    const ssize_t n = ::read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // exited
    text.append(buffer, static_cast<size_t>(n));
    const size_t at = text.find("listening on ");
    const size_t end = at == std::string::npos ? at : text.find('\n', at);
    if (end != std::string::npos) {
      process->address_ = text.substr(at + 13, end - at - 13);
    }
  }
  ::close(out[0]);
  if (process->address_.empty()) {
    return absl::UnavailableError(absl::StrCat(
        binary, " did not print its address within 60 s: see ", log_path));
  }
  return process;
}

CoordinatorProcess::~CoordinatorProcess() { Stop(); }

ProcessUsage CoordinatorProcess::Usage() const {
  ProcessUsage usage;
  if (pid_ <= 0) return usage;
  std::ifstream stat_file(absl::StrCat("/proc/", pid_, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(stat_file)),
                   std::istreambuf_iterator<char>());
  // Fields after the command's closing parenthesis: state is field 3, utime
  // 14, stime 15, cutime 16, cstime 17, num_threads 20 (proc(5)).
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return usage;
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 2), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0, cutime = 0, cstime = 0, threads = 0;
  if (fields.size() < 18 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime) ||
      !absl::SimpleAtoi(fields[13], &cutime) ||
      !absl::SimpleAtoi(fields[14], &cstime) ||
      !absl::SimpleAtoi(fields[17], &threads)) {
    return usage;
  }
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  usage.cpu_seconds = static_cast<double>(utime + stime) / ticks;
  usage.children_cpu_seconds = static_cast<double>(cutime + cstime) / ticks;
  usage.threads = static_cast<int>(threads);
  std::ifstream status_file(absl::StrCat("/proc/", pid_, "/status"));
  std::string status((std::istreambuf_iterator<char>(status_file)),
                     std::istreambuf_iterator<char>());
  usage.rss_bytes = StatusKilobytes(status, "VmRSS");
  usage.peak_rss_bytes = StatusKilobytes(status, "VmHWM");
  return usage;
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
