// hlab-chaos: runs a sweep on loopback twice, once without faults and once
// with N random faults (chaos/faults.h), and compares the two databases
// bit for bit (chaos/compare.h): runs, every metric point that is not a
// timing, every evaluation. Exit 0 when nothing was lost, duplicated or
// changed. docs/operations.md, "Chaos soak", has the figures.
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chaos/compare.h"
#include "chaos/faults.h"
#include "cli/cli.h"
#include "cli/local_cluster.h"
#include "common/process_usage.h"

namespace {

using hlab::chaos::Fault;

constexpr char kUsage[] = R"(usage: hlab-chaos [flags]

Runs a sweep on loopback without faults, then again with random faults, and
compares the two databases bit for bit: runs, every metric point but
timings, every evaluation. Exit 0 when no run was lost and no point
duplicated or changed; 1 otherwise; 2 for bad flags.

  --spec FILE        the sweep (default: a built-in one, two architectures,
                     shared trunks, validation loss, LongPPL and NIAH)
  --faults N         faults to inject (default 20)
  --kinds LIST       fault kinds, comma-separated (default: all of
                     kill-trainer, kill-worker, kill-coordinator,
                     pause-trainer, hang-trainer, partition-worker,
                     flip-checkpoint, disk-full)
  --interval-ms MS   mean wait between faults (default 1000)
  --seed S           random seed of the faults (default 1)
  --workers W        local workers (default 2)
  --dir DIR          working directory (default hlab-chaos; emptied)
  --reference DB     a fault-free database of the same spec to compare with
                     (default: run one first, in DIR/clean)
  --timeout-minutes  for each sweep to finish (default 30)
)";

// Two architectures with shared WSD trunks and every evaluation; about a
// minute without faults on 2 cores. Short backoffs: a soak retries a task
// many times, and the default (10 s doubling to 10 min) would leave the
// workers idle (infrastructure faults back off too).
constexpr char kDefaultSpec[] = R"(name: chaos
architectures: [full, gdn]
scales:
  - {name: C1, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2}
budgets: {tokens_per_param: [10, 20]}
seq_len: 128
batch_tokens: 1024
data: {source: synthetic, long_fraction: 0.5, seed: 0}
schedule: {peak_lr: 3.0e-3, warmup_steps: 10, decay_fraction: 0.1}
evaluation:
  validation_loss: {enabled: true}
  longppl: {enabled: true}
  niah: {enabled: true, context_lengths: [128], samples: 4}
resources:
  - {scale: C1, cpu_threads: 1}
retry: {backoff_base_seconds: 1, backoff_max_seconds: 10}
)";

int Usage(const std::string& what) {
  std::cerr << "hlab-chaos: " << what << "\n" << kUsage;
  return 2;
}

std::string Cli(const std::vector<std::string>& args, int* code = nullptr) {
  std::ostringstream out, err;
  const int rc = hlab::cli::RunCli(args, out, err);
  if (code != nullptr) *code = rc;
  return out.str();
}

// Runs of the cluster's sweeps not yet finished; -1 while the coordinator
// does not answer (restarting).
int64_t Unfinished(const std::string& address) {
  int code = 0;
  const std::string out =
      Cli({"query",
           "SELECT count(*) AS n FROM runs WHERE state NOT IN "
           "('SUCCEEDED', 'FAILED', 'CANCELLED', 'PREDICTED')",
           "--format", "csv", "--address", address},
          &code);
  int64_t n = -1;
  if (code != 0 || !absl::SimpleAtoi(out.substr(out.find('\n') + 1), &n)) {
    return -1;
  }
  return n;
}

bool WaitUntilFinished(const std::string& address, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Unfinished(address) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return false;
}

double RssMb(pid_t pid) {
  return static_cast<double>(hlab::ReadProcessUsage(pid).rss_bytes) / (1 << 20);
}

// Starts `cluster` and submits the spec to it; false (said on stderr) if
// either fails.
bool StartAndSubmit(hlab::cli::LocalCluster& cluster,
                    const std::string& spec_path) {
  if (absl::Status s = cluster.Start(); !s.ok()) {
    std::cerr << "hlab-chaos: " << s.message() << "\n";
    return false;
  }
  int code = 0;
  Cli({"submit", spec_path, "--address", cluster.address()}, &code);
  if (code != 0) {
    std::cerr << "hlab-chaos: cannot submit " << spec_path << "\n";
    return false;
  }
  return true;
}

struct Soak {
  std::map<std::string, int> injected;         // by kind
  std::map<std::string, std::string> skipped;  // kind -> reason
  int total = 0;
  std::vector<double> rss;  // coordinator MB after each fault
  int coordinator_restarts = 0;
};

// The command line.
struct Flags {
  std::string spec_path, dir = "hlab-chaos", reference;
  int faults = 20, workers = 2, interval_ms = 1000, timeout_min = 30;
  uint64_t seed = 1;
  std::vector<Fault> kinds = hlab::chaos::AllFaults();
};

// Reads the flags into `f`. An exit code when the process should end now
// (--help: 0; a bad flag: Usage's, which names it).
std::optional<int> ParseFlags(int argc, char** argv, Flags& f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      return i + 1 < argc ? argv[++i] : std::string();
    };
    auto number = [&](int* out, int min) {
      const std::string v = value();
      return absl::SimpleAtoi(v, out) && *out >= min;
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--spec") {
      f.spec_path = value();
    } else if (arg == "--dir") {
      f.dir = value();
    } else if (arg == "--reference") {
      f.reference = value();
    } else if (arg == "--faults") {
      if (!number(&f.faults, 0)) return Usage("--faults needs a count >= 0");
    } else if (arg == "--workers") {
      if (!number(&f.workers, 2)) return Usage("--workers needs 2 or more");
    } else if (arg == "--interval-ms") {
      if (!number(&f.interval_ms, 0)) return Usage("--interval-ms needs >= 0");
    } else if (arg == "--timeout-minutes") {
      if (!number(&f.timeout_min, 1)) return Usage("--timeout-minutes >= 1");
    } else if (arg == "--seed") {
      if (!absl::SimpleAtoi(value(), &f.seed)) return Usage("--seed: a number");
    } else if (arg == "--kinds") {
      f.kinds.clear();
      for (absl::string_view name : absl::StrSplit(value(), ',')) {
        bool known = false;
        for (Fault fault : hlab::chaos::AllFaults()) {
          if (name == hlab::chaos::FaultName(fault)) {
            f.kinds.push_back(fault);
            known = true;
          }
        }
        if (!known) {
          return Usage(absl::StrCat("--kinds: unknown fault '", name, "'"));
        }
      }
    } else {
      return Usage(absl::StrCat("unknown flag ", arg));
    }
  }
  return std::nullopt;
}

// The faulty cluster's directory as a tmpfs of its own (kSize), where
// mount(2) is allowed, for disk-full. Unmounted on destruction, after its
// database is copied to DIR/faulty-hlab.db.
class FaultyDisk {
 public:
  static constexpr char kSize[] = "size=512m";

  FaultyDisk(const std::string& dir, const std::string& out, bool wanted)
      : dir_(dir), out_(out) {
    if (!wanted) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, kSize) == 0) {
      mounted_ = true;
    } else {
      why_not_ = absl::StrCat("cannot mount a tmpfs for the cluster (",
                              std::strerror(errno),
                              "): disk-full needs mount(2), as root");
    }
  }
  ~FaultyDisk() {
    if (!mounted_) return;
    std::error_code ec;
    for (const char* suffix : {"", "-wal"}) {
      std::filesystem::copy_file(
          dir_ + "/hlab.db" + suffix, out_ + "/faulty-hlab.db" + suffix,
          std::filesystem::copy_options::overwrite_existing, ec);
    }
    ::umount2(dir_.c_str(), MNT_DETACH);
  }
  FaultyDisk(const FaultyDisk&) = delete;
  FaultyDisk& operator=(const FaultyDisk&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& why_not() const { return why_not_; }

 private:
  const std::string dir_;
  const std::string out_;
  bool mounted_ = false;
  std::string why_not_;
};

}  // namespace

int main(int argc, char** argv) {
  std::cout << std::unitbuf;  // each fault's line as it happens, into logs too
  Flags f;
  if (std::optional<int> exit = ParseFlags(argc, argv, f)) return *exit;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::remove_all(f.dir + "/faulty", ec);
  fs::create_directories(f.dir, ec);
  if (ec)
    return Usage(absl::StrCat("cannot create ", f.dir, ": ", ec.message()));
  f.dir = fs::absolute(f.dir).string();
  if (f.spec_path.empty()) {
    f.spec_path = f.dir + "/spec.yaml";
    std::ofstream(f.spec_path) << kDefaultSpec;
  }
  const std::string bin = hlab::cli::ExecutableDir();
  const absl::Duration timeout = absl::Minutes(f.timeout_min);
  ::signal(SIGPIPE, SIG_IGN);

  // 1. Without faults.
  absl::Duration clean_time;
  if (f.reference.empty()) {
    fs::remove_all(f.dir + "/clean", ec);
    hlab::cli::LocalClusterOptions clean_options;
    clean_options.dir = f.dir + "/clean";
    clean_options.workers = f.workers;
    clean_options.bin_dir = bin;
    hlab::cli::LocalCluster clean(clean_options);
    const absl::Time start = absl::Now();
    if (!StartAndSubmit(clean, f.spec_path)) return 1;
    if (!WaitUntilFinished(clean.address(), timeout)) {
      std::cerr << "hlab-chaos: the fault-free sweep did not finish\n";
      return 1;
    }
    clean_time = absl::Now() - start;
    clean.Stop();
    f.reference = f.dir + "/clean/hlab.db";
    std::cout << "hlab-chaos: fault-free sweep in "
              << absl::FormatDuration(absl::Trunc(clean_time, absl::Seconds(1)))
              << "\n";
  }

  // 2. With faults.
  const absl::Duration lease = absl::Seconds(3);
  hlab::chaos::FaultOptions fault_options;
  fault_options.seed = f.seed;
  fault_options.lease = lease;
  hlab::cli::LocalClusterOptions faulty_options;
  faulty_options.dir = f.dir + "/faulty";
  faulty_options.workers = f.workers;
  faulty_options.bin_dir = bin;
  faulty_options.lease_seconds = static_cast<int>(absl::ToInt64Seconds(lease));
  faulty_options.worker_args = {
      "--stall-timeout",
      std::to_string(absl::ToInt64Seconds(fault_options.stall_timeout)),
      "--kill-grace",
      std::to_string(absl::ToInt64Seconds(fault_options.kill_grace))};
  // disk-full: the faulty cluster on a tmpfs of its own, so that filling it
  // fills the disk under its database, data and checkpoints.
  const FaultyDisk disk(faulty_options.dir, f.dir,
                        std::find(f.kinds.begin(), f.kinds.end(),
                                  Fault::kDiskFull) != f.kinds.end());
  if (disk.mounted()) {
    fault_options.full_disk_dir = faulty_options.dir;
  } else {
    fault_options.full_disk_unavailable = disk.why_not();
  }
  hlab::cli::LocalCluster faulty(faulty_options);
  const absl::Time start = absl::Now();
  if (!StartAndSubmit(faulty, f.spec_path)) return 1;
  hlab::chaos::FaultInjector injector(&faulty, fault_options);
  std::mt19937_64 rng(f.seed ^ 0x9e3779b97f4a7c15ULL);
  std::exponential_distribution<double> wait(1.0 / std::max(1, f.interval_ms));
  Soak soak;
  const absl::Time deadline = start + timeout;
  while (soak.total < f.faults && !f.kinds.empty() && absl::Now() < deadline) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(static_cast<int64_t>(wait(rng))));
    if (Unfinished(faulty.address()) == 0) break;  // finished first
    const Fault fault = f.kinds[std::uniform_int_distribution<size_t>(
        0, f.kinds.size() - 1)(rng)];
    absl::StatusOr<std::string> done = injector.Inject(fault);
    const char* name = hlab::chaos::FaultName(fault);
    if (done.ok()) {
      ++soak.total;
      ++soak.injected[name];
      if (fault == Fault::kKillCoordinator) ++soak.coordinator_restarts;
      soak.rss.push_back(RssMb(faulty.coordinator_pid()));
      std::cout << "  fault " << soak.total << ": " << *done << "\n";
    } else if (done.status().code() == absl::StatusCode::kFailedPrecondition) {
      soak.skipped[name] = std::string(done.status().message());
      f.kinds.erase(std::remove(f.kinds.begin(), f.kinds.end(), fault),
                    f.kinds.end());
    } else if (done.status().code() != absl::StatusCode::kNotFound) {
      std::cerr << "hlab-chaos: " << name << ": " << done.status().message()
                << "\n";
      return 1;
    }
  }
  const bool finished =
      WaitUntilFinished(faulty.address(), deadline - absl::Now());
  const absl::Duration faulty_time = absl::Now() - start;
  const double final_rss = RssMb(faulty.coordinator_pid());
  faulty.Stop();

  // 3. Compare.
  absl::StatusOr<hlab::chaos::SweepRecord> clean_record =
      hlab::chaos::ReadSweepRecord(f.reference);
  absl::StatusOr<hlab::chaos::SweepRecord> faulty_record =
      hlab::chaos::ReadSweepRecord(f.dir + "/faulty/hlab.db");
  if (!clean_record.ok() || !faulty_record.ok()) {
    std::cerr << "hlab-chaos: cannot read the databases: "
              << (clean_record.ok() ? faulty_record.status()
                                    : clean_record.status())
                     .message()
              << "\n";
    return 1;
  }
  const hlab::chaos::Comparison c =
      hlab::chaos::CompareRecords(*clean_record, *faulty_record);
  std::cout << "hlab-chaos: " << soak.total << " faults (";
  bool first = true;
  for (const auto& [kind, n] : soak.injected) {
    std::cout << (first ? "" : ", ") << kind << " " << n;
    first = false;
  }
  std::cout << ") in "
            << absl::FormatDuration(absl::Trunc(faulty_time, absl::Seconds(1)))
            << (finished ? "" : ", the sweep did NOT finish") << "\n";
  for (const auto& [kind, why] : soak.skipped) {
    std::cout << "  skipped " << kind << ": " << why << "\n";
  }
  if (!soak.rss.empty()) {
    std::cout << "  coordinator RSS: " << soak.rss.front()
              << " MB after the first fault, "
              << *std::max_element(soak.rss.begin(), soak.rss.end())
              << " MB at most, " << final_rss << " MB at the end ("
              << soak.coordinator_restarts << " restarts)\n";
  }
  std::cout << "  result: " << c.Summary() << "\n";
  for (const std::string& e : c.examples) std::cout << "    " << e << "\n";
  int64_t clean_failed = 0;
  for (const auto& [run, state] : clean_record->runs) {
    if (state != "SUCCEEDED") ++clean_failed;
  }
  if (clean_failed > 0) {
    std::cout << "  the fault-free sweep has " << clean_failed
              << " runs that did not succeed: fix the spec\n";
  }
  const bool pass = finished && c.Equal() && clean_failed == 0;
  std::cout << (pass ? "PASS" : "FAIL") << "\n";
  return pass ? 0 : 1;
}
