#include "tests/deploy/daemons.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/spawn.h"

namespace hlab::deploy_testing {
namespace {

pid_t Spawn(const std::vector<std::string>& args, int stdout_fd,
            const std::string& stderr_path, bool stderr_to_stdout) {
  SpawnOptions options;
  options.Open(STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  options.Dup2(stdout_fd, STDOUT_FILENO);
  if (stderr_to_stdout) {
    options.Dup2(stdout_fd, STDERR_FILENO);
  } else {
    options.Open(STDERR_FILENO, stderr_path, O_WRONLY | O_CREAT | O_APPEND,
                 0644);
  }
  const absl::StatusOr<pid_t> pid = SpawnProcess(args, options);
  return pid.ok() ? *pid : -1;
}

// waitpid with a deadline; the status, or -1 (still running).
int WaitUntil(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0) return 0;  // not our child (any more)
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

Daemon Daemon::Start(const std::vector<std::string>& argv,
                     const std::string& log_path) {
  Daemon d;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return d;
  d.pid_ = Spawn(argv, fds[1], log_path, /*stderr_to_stdout=*/false);
  ::close(fds[1]);
  d.stdout_fd_ = fds[0];
  return d;
}

Daemon::Daemon(Daemon&& other) noexcept { *this = std::move(other); }

Daemon& Daemon::operator=(Daemon&& other) noexcept {
  if (this != &other) {
    Stop();
    pid_ = other.pid_;
    stdout_fd_ = other.stdout_fd_;
    buffer_ = std::move(other.buffer_);
    other.pid_ = -1;
    other.stdout_fd_ = -1;
  }
  return *this;
}

Daemon::~Daemon() { Stop(); }

std::string Daemon::WaitForLine(const std::string& prefix,
                                absl::Duration timeout) {
  if (stdout_fd_ < 0) return "";
  return ReadLineStartingWith(stdout_fd_, prefix, timeout, &buffer_);
}

int Daemon::Stop() {
  int status = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    status = WaitUntil(
        pid_, std::chrono::steady_clock::now() + std::chrono::seconds(20));
    if (status == -1) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (stdout_fd_ >= 0) {
    ::close(stdout_fd_);
    stdout_fd_ = -1;
  }
  return status;
}

Finished RunToEnd(const std::vector<std::string>& argv,
                  absl::Duration timeout) {
  Finished result;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return result;
  const pid_t pid = Spawn(argv, fds[1], "", /*stderr_to_stdout=*/true);
  ::close(fds[1]);
  if (pid <= 0) {
    ::close(fds[0]);
    return result;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 ||
        ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    char chunk[4096];
    const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    result.output.append(chunk, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

absl::StatusOr<std::string> HttpGet(const std::string& host, int port,
                                    const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", host, ":", port));
  }
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host,
                   "\r\nConnection: close\r\n\r\n");
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string response;
  char chunk[8192];
  ssize_t n;
  while ((n = ::recv(fd, chunk, sizeof(chunk), 0)) > 0) {
    response.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat("no HTTP answer from ", host, ":", port, path));
  }
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.find(" 200") == std::string::npos) {
    return absl::InternalError(
        absl::StrCat(path, ": ", status_line, "\n", response.substr(body + 4)));
  }
  return response.substr(body + 4);
}

int PortOf(const std::string& address) {
  int port = 0;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return 0;
  }
  return port;
}

}  // namespace hlab::deploy_testing
