// hlab-worker: the worker daemon. Registers with the coordinator, leases
// tasks, runs each in hlab-train (or, for EVAL tasks, hlab-eval) child
// processes, relays their records, and reports the outcome. See
// docs/worker.md.
//
//   hlab-worker --coordinator 127.0.0.1:50151 --token-file ~/.hlab/worker.token
//               --data-dir /var/lib/hlab-worker
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/build_version.h"
#include "common/filesystem.h"
#include "common/log.h"
#include "worker/coordinator_client.h"
#include "worker/daemon.h"
#include "worker/devices.h"
#include "worker/metrics.h"

namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] = R"(usage: hlab-worker [flags]

Runs hlab-train (training) and hlab-eval (evaluation) tasks leased from an
hlab coordinator (docs/worker.md).

  --coordinator ADDR   coordinator gRPC address (default 127.0.0.1:50151)
  --token TOKEN        bearer token with the "worker" role (or env HLAB_TOKEN)
  --token-file FILE    read the token from FILE
  --tls-ca FILE        PEM CA certificate(s) of the coordinator's TLS
                       certificate; turns TLS on (default: plaintext)
  --tls-cert FILE, --tls-key FILE
                       client certificate and key for mutual TLS (both,
                       and with --tls-ca)
  --tls-server-name N  the name the coordinator's certificate must carry,
                       when it is not the --coordinator host
  --data-dir DIR       task directories, checkpoints and trainer logs
                       (default $HOME/.hlab/worker)
  --capacity N         tasks at once (default: one per GPU, else 1)
  --trainer PATH       hlab-train binary (default: next to hlab-worker)
  --evaluator PATH     hlab-eval binary for EVAL tasks (default: next to
                       hlab-worker; EVAL tasks fail, retryable, without it)
  --metrics-listen A   Prometheus endpoint HOST:PORT (default
                       127.0.0.1:9152; "none" disables it)
  --name NAME          worker id (default: the hostname)
  --kill-grace SECS    SIGTERM to SIGKILL for a stopped trainer (default 30)
  --stall-timeout SECS the watchdog: a trainer or evaluator that writes no
                       record for this long is hung; it is stopped and its
                       task retried as an infrastructure fault (default
                       1800; 0: no watchdog)
  --checkpoint-root DIR
                       checkpoints of training tasks under DIR/<task_id>, on
                       a filesystem every worker mounts at DIR (NFS, Lustre,
                       CephFS... are allowed here): a retry on any worker
                       resumes from the newest verified checkpoint, and
                       decays and evaluations read trunks' and runs'
                       checkpoints from any node. Default: under --data-dir,
                       this worker's alone (a retry elsewhere starts over)
  --allow-network-fs   accept a --data-dir on NFS, SMB, FUSE... (refused by
                       default: trainer pid files and checkpoints are per host)
  --version            the build (git commit) it was made from
  --help               this text

SIGTERM or SIGINT: trainers get SIGTERM (they checkpoint and exit 75), their
tasks are reported as retryable failures, the worker deregisters from the
coordinator and exits 0.
)";

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "hlab-worker: " << message << "\n";
  std::exit(2);
}

std::string SelfDir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "worker";
  return buf;
}

std::string ReadToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) Die(absl::StrCat("cannot read --token-file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token(absl::StripAsciiWhitespace(ss.str()));
  if (token.empty()) Die(absl::StrCat("--token-file ", path, " is empty"));
  return token;
}

// The PEM text of `--flag FILE`; dies naming the flag when the file cannot
// be read or holds no PEM block of the expected kind.
std::string ReadPem(const std::string& flag, const std::string& path,
                    const std::string& kind) {
  std::ifstream in(path);
  if (!in) Die(absl::StrCat("cannot read ", flag, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string pem = ss.str();
  if (pem.find("-----BEGIN") == std::string::npos ||
      pem.find(kind) == std::string::npos) {
    Die(absl::StrCat(flag, " ", path, " holds no PEM ", kind,
                     " (expected a -----BEGIN ...", kind, "----- block)"));
  }
  return pem;
}

void CheckDataDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "tasks", ec);
  if (ec)
    Die(absl::StrCat("cannot create --data-dir ", dir, ": ", ec.message()));
  const fs::path probe = fs::path(dir) / ".write-test";
  {
    std::ofstream out(probe);
    out << "ok\n";
    if (!out.good()) Die(absl::StrCat("--data-dir ", dir, " is not writable"));
  }
  fs::remove(probe, ec);
}

// Checks --checkpoint-root (absolute, created, writable; a network
// filesystem is what it is for) and says where checkpoints go, for the
// start-up line. Empty: under the data dir, which the line says too.
std::string CheckpointsAt(std::string& root, const std::string& data_dir) {
  if (root.empty()) {
    return absl::StrCat("checkpoints in ", data_dir,
                        "/tasks/*/checkpoints (this worker's alone: a task "
                        "retried on another worker starts over; give "
                        "--checkpoint-root on a shared filesystem to keep "
                        "its progress)");
  }
  root = fs::absolute(root).lexically_normal().string();
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    Die(absl::StrCat("cannot create --checkpoint-root ", root, ": ",
                     ec.message()));
  }
  const fs::path probe = fs::path(root) / (".write-test-" + Hostname());
  {
    std::ofstream out(probe);
    out << "ok\n";
    if (!out.good()) {
      Die(absl::StrCat("--checkpoint-root ", root, " is not writable"));
    }
  }
  fs::remove(probe, ec);
  absl::StatusOr<std::optional<std::string>> network =
      hlab::NetworkFilesystemOf(root, "--checkpoint-root");
  if (!network.ok()) Die(std::string(network.status().message()));
  return absl::StrCat(
      "checkpoints in ", root, "/<task> (",
      *network
          ? absl::StrCat(**network, ", shared by the workers that mount it")
          : "a local filesystem: shared only by the workers of this "
            "machine",
      ")");
}

// The command line, and what start-up derives from it.
struct Flags {
  std::string coordinator = "127.0.0.1:50151";
  std::string token;
  std::string token_file;
  std::string data_dir;
  std::string checkpoint_root;
  std::string trainer;
  std::string evaluator;
  std::string metrics_listen = "127.0.0.1:9152";
  std::string name;
  int capacity = 0;
  int kill_grace_s = 30;
  int stall_timeout_s = 1800;
  std::string tls_ca, tls_cert, tls_key;
  hlab::worker::CoordinatorTls tls;
  bool allow_network_fs = false;
  std::string checkpoints;  // where checkpoints go, for the start-up line
};

// Reads the flags (--help prints the usage and exits 0; a bad flag dies
// naming it).
Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die(arg + " needs a value (see --help)");
      return argv[++i];
    };
    auto number = [&](int min) {
      const std::string v = value();
      int n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < min) {
        Die(absl::StrCat(arg, " must be an integer >= ", min, ", got '", v,
                         "'"));
      }
      return n;
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--version") {
      std::cout << "hlab-worker " << hlab::BuildVersion() << "\n";
      std::exit(0);
    } else if (arg == "--coordinator") {
      f.coordinator = value();
    } else if (arg == "--token") {
      f.token = value();
    } else if (arg == "--token-file") {
      f.token_file = value();
    } else if (arg == "--tls-ca") {
      f.tls_ca = value();
    } else if (arg == "--tls-cert") {
      f.tls_cert = value();
    } else if (arg == "--tls-key") {
      f.tls_key = value();
    } else if (arg == "--tls-server-name") {
      f.tls.server_name = value();
    } else if (arg == "--data-dir") {
      f.data_dir = value();
    } else if (arg == "--checkpoint-root") {
      f.checkpoint_root = value();
    } else if (arg == "--capacity") {
      f.capacity = number(1);
    } else if (arg == "--trainer") {
      f.trainer = value();
    } else if (arg == "--evaluator") {
      f.evaluator = value();
    } else if (arg == "--metrics-listen") {
      f.metrics_listen = value();
    } else if (arg == "--name") {
      f.name = value();
    } else if (arg == "--kill-grace") {
      f.kill_grace_s = number(0);
    } else if (arg == "--stall-timeout") {
      f.stall_timeout_s = number(0);
    } else if (arg == "--allow-network-fs") {
      f.allow_network_fs = true;
    } else {
      Die(absl::StrCat("unknown flag '", arg, "' (see --help)"));
    }
  }
  return f;
}

// The bearer token (--token, --token-file or $HLAB_TOKEN) and the TLS files.
void ResolveCredentials(Flags& f) {
  if (!f.token.empty() && !f.token_file.empty()) {
    Die("give --token or --token-file, not both");
  }
  if (!f.token_file.empty()) f.token = ReadToken(f.token_file);
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    Die("--tls-cert and --tls-key go together (mutual TLS); give both or "
        "neither");
  }
  if (!f.tls_cert.empty() && f.tls_ca.empty()) {
    Die("--tls-cert needs --tls-ca (the CA that signed the coordinator's "
        "certificate)");
  }
  if (!f.tls.server_name.empty() && f.tls_ca.empty()) {
    Die("--tls-server-name needs --tls-ca (it names the TLS certificate)");
  }
  if (!f.tls_ca.empty())
    f.tls.root_certs = ReadPem("--tls-ca", f.tls_ca, "CERTIFICATE");
  if (!f.tls_cert.empty()) {
    f.tls.cert_chain = ReadPem("--tls-cert", f.tls_cert, "CERTIFICATE");
    f.tls.private_key = ReadPem("--tls-key", f.tls_key, "PRIVATE KEY");
  }
  if (f.token.empty()) {
    const char* env = std::getenv("HLAB_TOKEN");
    if (env != nullptr) f.token = env;
  }
}

// The data dir (absolute, local unless allowed, writable), the checkpoint
// root, the trainer and evaluator binaries and the worker's name.
void ResolvePaths(Flags& f) {
  if (f.data_dir.empty()) {
    const char* home = std::getenv("HOME");
    if (home == nullptr) Die("--data-dir is required (no $HOME)");
    f.data_dir = (fs::path(home) / ".hlab" / "worker").string();
  }
  // Absolute, so the paths in task files and checkpoint reports (what
  // hlab-eval later reads) do not depend on a process's working directory.
  f.data_dir = fs::absolute(f.data_dir).lexically_normal().string();
  if (!f.allow_network_fs) {
    absl::Status local = hlab::CheckLocalFilesystem(f.data_dir, "--data-dir");
    if (!local.ok()) Die(std::string(local.message()));
  }
  CheckDataDir(f.data_dir);
  f.checkpoints = CheckpointsAt(f.checkpoint_root, f.data_dir);
  if (f.trainer.empty())
    f.trainer = (fs::path(SelfDir()) / "hlab-train").string();
  if (::access(f.trainer.c_str(), X_OK) != 0) {
    Die(absl::StrCat("--trainer ", f.trainer, " is not an executable file"));
  }
  if (f.evaluator.empty()) {
    f.evaluator = (fs::path(SelfDir()) / "hlab-eval").string();
    if (::access(f.evaluator.c_str(), X_OK) != 0) {
      HLAB_LOG(WARNING) << "no evaluator at " << f.evaluator
                        << ": EVAL tasks will fail on this worker until it "
                           "is installed (or give --evaluator PATH)";
    }
  } else if (::access(f.evaluator.c_str(), X_OK) != 0) {
    Die(absl::StrCat("--evaluator ", f.evaluator,
                     " is not an executable file"));
  }
  if (f.name.empty()) f.name = Hostname();
}

}  // namespace

int main(int argc, char** argv) {
  // SIGTERM / SIGINT are taken by a thread with sigwait: block them before
  // any thread starts (gRPC's, the metrics server's), so every thread
  // inherits the mask. Children get a clean mask from posix_spawn.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  Flags f = ParseFlags(argc, argv);
  ResolveCredentials(f);
  ResolvePaths(f);

  auto devices = hlab::worker::ProbeDevices(f.trainer);
  if (!devices.ok()) {
    Die(absl::StrCat("cannot probe devices with ", f.trainer, ": ",
                     devices.status().message()));
  }
  auto metrics = hlab::worker::WorkerMetrics::Create(
      f.metrics_listen == "none" ? "" : f.metrics_listen);
  if (!metrics.ok()) Die(std::string(metrics.status().message()));

  hlab::worker::CoordinatorClient client(f.coordinator, f.token,
                                         absl::Seconds(10), f.tls);
  hlab::worker::DaemonOptions options;
  options.worker_id = f.name;
  options.hostname = Hostname();
  options.version = hlab::BuildVersion();
  options.devices = *devices;
  options.capacity = f.capacity;
  options.runner.trainer = f.trainer;
  options.runner.evaluator = f.evaluator;
  options.runner.data_dir = f.data_dir;
  options.runner.checkpoint_root = f.checkpoint_root;
  options.runner.kill_grace = absl::Seconds(f.kill_grace_s);
  options.runner.stall_timeout = absl::Seconds(f.stall_timeout_s);
  hlab::worker::Daemon daemon(options, &client, metrics->get());
  HLAB_LOG(INFO) << "hlab-worker " << f.name << " (build " << options.version
                 << "): coordinator " << f.coordinator << ", data dir "
                 << f.data_dir << ", " << f.checkpoints << ", trainer "
                 << f.trainer << ", evaluator " << f.evaluator << ", "
                 << hlab::worker::CountGpus(*devices) << " GPU(s), "
                 << "capacity " << daemon.capacity() << ", metrics "
                 << f.metrics_listen
                 << (f.tls.root_certs.empty() ? "" : ", TLS");

  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    HLAB_LOG(INFO) << "signal " << sig << ": shutting down";
    daemon.Shutdown();
  });
  signals.detach();
  const absl::Status status = daemon.Run();
  if (!status.ok()) Die(std::string(status.message()));
  return 0;
}
