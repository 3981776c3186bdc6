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
      return 0;
    } else if (arg == "--coordinator") {
      coordinator = value();
    } else if (arg == "--token") {
      token = value();
    } else if (arg == "--token-file") {
      token_file = value();
    } else if (arg == "--tls-ca") {
      tls_ca = value();
    } else if (arg == "--tls-cert") {
      tls_cert = value();
    } else if (arg == "--tls-key") {
      tls_key = value();
    } else if (arg == "--tls-server-name") {
      tls.server_name = value();
    } else if (arg == "--data-dir") {
      data_dir = value();
    } else if (arg == "--checkpoint-root") {
      checkpoint_root = value();
    } else if (arg == "--capacity") {
      capacity = number(1);
    } else if (arg == "--trainer") {
      trainer = value();
    } else if (arg == "--evaluator") {
      evaluator = value();
    } else if (arg == "--metrics-listen") {
      metrics_listen = value();
    } else if (arg == "--name") {
      name = value();
    } else if (arg == "--kill-grace") {
      kill_grace_s = number(0);
    } else if (arg == "--stall-timeout") {
      stall_timeout_s = number(0);
    } else if (arg == "--allow-network-fs") {
      allow_network_fs = true;
    } else {
      Die(absl::StrCat("unknown flag '", arg, "' (see --help)"));
    }
  }
  if (!token.empty() && !token_file.empty()) {
    Die("give --token or --token-file, not both");
  }
  if (!token_file.empty()) token = ReadToken(token_file);
  if (tls_cert.empty() != tls_key.empty()) {
    Die("--tls-cert and --tls-key go together (mutual TLS); give both or "
        "neither");
  }
  if (!tls_cert.empty() && tls_ca.empty()) {
    Die("--tls-cert needs --tls-ca (the CA that signed the coordinator's "
        "certificate)");
  }
  if (!tls.server_name.empty() && tls_ca.empty()) {
    Die("--tls-server-name needs --tls-ca (it names the TLS certificate)");
  }
  if (!tls_ca.empty())
    tls.root_certs = ReadPem("--tls-ca", tls_ca, "CERTIFICATE");
  if (!tls_cert.empty()) {
    tls.cert_chain = ReadPem("--tls-cert", tls_cert, "CERTIFICATE");
    tls.private_key = ReadPem("--tls-key", tls_key, "PRIVATE KEY");
  }
  if (token.empty()) {
    const char* env = std::getenv("HLAB_TOKEN");
    if (env != nullptr) token = env;
  }
  if (data_dir.empty()) {
    const char* home = std::getenv("HOME");
    if (home == nullptr) Die("--data-dir is required (no $HOME)");
    data_dir = (fs::path(home) / ".hlab" / "worker").string();
  }
  // Absolute, so the paths in task files and checkpoint reports (what
  // hlab-eval later reads) do not depend on a process's working directory.
  data_dir = fs::absolute(data_dir).lexically_normal().string();
  if (!allow_network_fs) {
    absl::Status local = hlab::CheckLocalFilesystem(data_dir, "--data-dir");
    if (!local.ok()) Die(std::string(local.message()));
  }
  CheckDataDir(data_dir);
  const std::string checkpoints = CheckpointsAt(checkpoint_root, data_dir);
  if (trainer.empty()) trainer = (fs::path(SelfDir()) / "hlab-train").string();
  if (::access(trainer.c_str(), X_OK) != 0) {
    Die(absl::StrCat("--trainer ", trainer, " is not an executable file"));
  }
  if (evaluator.empty()) {
    evaluator = (fs::path(SelfDir()) / "hlab-eval").string();
    if (::access(evaluator.c_str(), X_OK) != 0) {
      HLAB_LOG(WARNING) << "no evaluator at " << evaluator
                        << ": EVAL tasks will fail on this worker until it "
                           "is installed (or give --evaluator PATH)";
    }
  } else if (::access(evaluator.c_str(), X_OK) != 0) {
    Die(absl::StrCat("--evaluator ", evaluator, " is not an executable file"));
  }
  if (name.empty()) name = Hostname();

  auto devices = hlab::worker::ProbeDevices(trainer);
  if (!devices.ok()) {
    Die(absl::StrCat("cannot probe devices with ", trainer, ": ",
                     devices.status().message()));
  }
  auto metrics = hlab::worker::WorkerMetrics::Create(
      metrics_listen == "none" ? "" : metrics_listen);
  if (!metrics.ok()) Die(std::string(metrics.status().message()));

  hlab::worker::CoordinatorClient client(coordinator, token, absl::Seconds(10),
                                         tls);
  hlab::worker::DaemonOptions options;
  options.worker_id = name;
  options.hostname = Hostname();
  options.devices = *devices;
  options.capacity = capacity;
  options.runner.trainer = trainer;
  options.runner.evaluator = evaluator;
  options.runner.data_dir = data_dir;
  options.runner.checkpoint_root = checkpoint_root;
  options.runner.kill_grace = absl::Seconds(kill_grace_s);
  options.runner.stall_timeout = absl::Seconds(stall_timeout_s);
  hlab::worker::Daemon daemon(options, &client, metrics->get());
  HLAB_LOG(INFO) << "hlab-worker " << name << ": coordinator " << coordinator
                 << ", data dir " << data_dir << ", " << checkpoints
                 << ", trainer " << trainer << ", evaluator " << evaluator
                 << ", " << hlab::worker::CountGpus(*devices) << " GPU(s), "
                 << "capacity " << daemon.capacity() << ", metrics "
                 << metrics_listen << (tls.root_certs.empty() ? "" : ", TLS");

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
