// hlab-coordinator: the gRPC coordinator of hlab (docs/coordinator.md).
//
//   hlab-coordinator --db hlab.db [--listen 127.0.0.1:50151]
//       [--metrics-listen 127.0.0.1:9151|none] [--tokens-file FILE]
//       [--tls-cert PEM --tls-key PEM] [--lease-seconds 30]
//
// Prints its build ("hlab-coordinator 0388a6b2c1d4"), "listening on
// HOST:PORT" (the bound port, also for port 0) and "metrics on HOST:PORT"
// on stdout once serving; --version prints the build alone; SIGTERM or SIGINT
// shuts it down gracefully. Errors are one line on stderr with exit code 2 (bad
// flags) or 1 (cannot start).
#include <signal.h>

#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/build_version.h"
#include "coordinator/server/coordinator.h"

namespace {

constexpr char kUsage[] =
    "usage: hlab-coordinator [--db PATH] [--listen HOST:PORT]\n"
    "       [--metrics-listen HOST:PORT|none] [--tokens-file FILE]\n"
    "       [--tls-cert PEM --tls-key PEM] [--lease-seconds N]\n"
    "       [--auto-fit on|off] [--live-predictions on|off]\n"
    "       [--fit-bootstrap K] [--fit-threads T]\n"
    "       [--allow-network-fs] [--version]\n"
    "\n"
    "  --db PATH              SQLite database, created if missing (hlab.db)\n"
    "  --listen HOST:PORT     gRPC address (127.0.0.1:50151); port 0 picks\n"
    "                         one; printed as 'listening on HOST:PORT'\n"
    "  --metrics-listen A     Prometheus /metrics (127.0.0.1:9151); none\n"
    "  --tokens-file FILE     bearer tokens, lines 'role token' (roles:\n"
    "                         admin, submit, read, worker); without it only\n"
    "                         loopback addresses are allowed\n"
    "  --tls-cert, --tls-key  PEM certificate chain and key: serve TLS\n"
    "  --lease-seconds N      task lease time (30); heartbeats every N/6\n"
    "  --auto-fit on|off      fit power laws when a sweep finishes (on)\n"
    "  --live-predictions on|off  refit a running sweep as each run\n"
    "                         finishes and predict its pending and running\n"
    "                         runs' final targets (on)\n"
    "  --fit-bootstrap K      bootstrap resamples of those fits (200; at\n"
    "                         most the spec's fit.bootstrap; 0 = no CIs)\n"
    "  --fit-threads T        threads for those fits (1; 0 = all cores)\n"
    "  --allow-network-fs     accept a --db directory on NFS, SMB, FUSE...\n"
    "                         (refused by default: SQLite WAL needs a local\n"
    "                         disk)\n";

int Usage(const std::string& error) {
  std::cerr << "hlab-coordinator: " << error << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex lock
  // would update a process-wide lock-order graph under one global spin
  // lock (GraphCycles in perf profiles under load). Tests keep the check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  hlab::coordinator::CoordinatorOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (flag == "--version") {
      std::cout << "hlab-coordinator " << hlab::BuildVersion() << "\n";
      return 0;
    }
    if (flag == "--allow-network-fs") {
      options.allow_network_fs = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(absl::StrCat(flag, ": missing value"));
    const std::string value = argv[++i];
    if (flag == "--db") {
      options.db_path = value;
    } else if (flag == "--listen") {
      options.listen = value;
    } else if (flag == "--metrics-listen") {
      options.metrics_listen = value;
    } else if (flag == "--tokens-file") {
      options.tokens_file = value;
    } else if (flag == "--tls-cert") {
      options.tls_cert = value;
    } else if (flag == "--tls-key") {
      options.tls_key = value;
    } else if (flag == "--lease-seconds") {
      double seconds = 0;
      if (!absl::SimpleAtod(value, &seconds) || seconds <= 0) {
        return Usage(absl::StrCat("--lease-seconds: expected a positive ",
                                  "number, got '", value, "'"));
      }
      options.lease = absl::Seconds(seconds);
    } else if (flag == "--auto-fit" || flag == "--live-predictions") {
      if (value != "on" && value != "off") {
        return Usage(
            absl::StrCat(flag, ": expected on or off, got '", value, "'"));
      }
      (flag == "--auto-fit" ? options.auto_fit : options.live_predictions) =
          value == "on";
    } else if (flag == "--fit-bootstrap" || flag == "--fit-threads") {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 0) {
        return Usage(absl::StrCat(flag, ": expected an integer >= 0, got '",
                                  value, "'"));
      }
      (flag == "--fit-bootstrap" ? options.fit_bootstrap
                                 : options.fit_threads) = n;
    } else {
      return Usage(absl::StrCat("unknown flag ", flag));
    }
  }
  if (options.db_path.empty()) return Usage("--db: must not be empty");
  options.version = hlab::BuildVersion();

  // Signals go to sigwait below, not to a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto coordinator = hlab::coordinator::Coordinator::Start(options);
  if (!coordinator.ok()) {
    std::cerr << "hlab-coordinator: " << coordinator.status().message() << "\n";
    return coordinator.status().code() == absl::StatusCode::kInvalidArgument
               ? 2
               : 1;
  }
  std::cout << "hlab-coordinator " << options.version << "\n"
            << "listening on " << (*coordinator)->address() << std::endl;
  if ((*coordinator)->metrics_port() != 0) {
    const std::string& m = options.metrics_listen;
    std::cout << "metrics on " << m.substr(0, m.rfind(':')) << ":"
              << (*coordinator)->metrics_port() << std::endl;
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cerr << "hlab-coordinator: signal " << signal_number
            << ", shutting down\n";
  (*coordinator)->Shutdown();
  coordinator->reset();
  return 0;
}
