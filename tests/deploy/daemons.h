// Helpers for the deploy tests: hlab's daemons (and Prometheus) as child
// processes on loopback, a free port, and a minimal HTTP GET.
//
// Not thread-safe: one test thread drives them.
//
//   Daemon coordinator = Daemon::Start({bin + "/hlab-coordinator", "--db",
//       db, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"},
//       dir + "/coordinator.log");
//   std::string grpc = coordinator.WaitForLine("listening on ");
//   absl::StatusOr<std::string> page = HttpGet("127.0.0.1", port, "/metrics");
#ifndef HLAB_TESTS_DEPLOY_DAEMONS_H_
#define HLAB_TESTS_DEPLOY_DAEMONS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hlab::deploy_testing {

// A child process with stdout on a pipe (read by WaitForLine) and stderr
// appended to a log file. The destructor stops it (SIGTERM, then SIGKILL
// after 20 s).
class Daemon {
 public:
  static Daemon Start(const std::vector<std::string>& argv,
                      const std::string& log_path);
  Daemon() = default;
  Daemon(Daemon&& other) noexcept;
  Daemon& operator=(Daemon&& other) noexcept;
  ~Daemon();

  // The rest of the first stdout line that starts with `prefix` ("" if the
  // process exits or `timeout` passes first).
  std::string WaitForLine(const std::string& prefix,
                          absl::Duration timeout = absl::Seconds(60));
  // SIGTERM and wait; returns the exit status as waitpid reports it (-1 if
  // not running).
  int Stop();
  // Forgets the process (the caller has reaped it with waitpid).
  void Release() { pid_ = -1; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
};

// Runs argv to completion with a time limit; stdout and stderr together.
struct Finished {
  int exit_code = -1;  // -1: killed or did not start
  std::string output;
};
Finished RunToEnd(const std::vector<std::string>& argv,
                  absl::Duration timeout = absl::Seconds(60));

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

// GET http://host:port/path with HTTP/1.0; the body of a 200 answer.
// Unavailable if it cannot connect, Internal for another status.
absl::StatusOr<std::string> HttpGet(const std::string& host, int port,
                                    const std::string& path);

// "HOST:PORT" -> PORT (0 if malformed).
int PortOf(const std::string& address);

}  // namespace hlab::deploy_testing

#endif  // HLAB_TESTS_DEPLOY_DAEMONS_H_
