#include "chaos/faults.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hlab::chaos {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// The arguments of a process, or none once it is gone.
std::vector<std::string> Cmdline(pid_t pid) {
  const std::string text = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  std::vector<std::string> args;
  std::string arg;
  for (char c : text) {
    if (c == '\0') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += c;
    }
  }
  return args;
}

// The process state letter from /proc/<pid>/stat ('T' when stopped).
char State(pid_t pid) {
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size()
             ? '?'
             : stat[close + 2];
}

// The task directory of a trainer: the parent of its --task file.
fs::path TaskDir(pid_t pid) {
  const std::vector<std::string> args = Cmdline(pid);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--task") return fs::path(args[i + 1]).parent_path();
  }
  return {};
}

// The stop step of the attempt that `log` (trainer.log) records last: the
// "steps S -> E of T" of its newest start line; -1 if none.
int64_t StopStep(const fs::path& log) {
  std::ifstream in(log);
  std::string line;
  int64_t stop = -1;
  while (std::getline(in, line)) {
    const size_t at = line.find(" -> ");
    if (line.find(", steps ") == std::string::npos || at == std::string::npos) {
      continue;
    }
    const size_t end = line.find(' ', at + 4);
    int64_t e = 0;
    if (absl::SimpleAtoi(line.substr(at + 4, end - at - 4), &e)) stop = e;
  }
  return stop;
}

// Writes `path` until its file system has no byte left; returns the bytes
// written.
uint64_t FillUp(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 0;
  uint64_t written = 0;
  const std::string chunk(1 << 20, 'f');
  for (size_t size : {chunk.size(), size_t{4096}, size_t{1}}) {
    while (true) {
      const ssize_t n = ::write(fd, chunk.data(), size);
      if (n <= 0) break;
      written += static_cast<uint64_t>(n);
    }
  }
  ::close(fd);
  return written;
}

void Sleep(absl::Duration d) {
  std::this_thread::sleep_for(absl::ToChronoMilliseconds(d));
}

}  // namespace

const std::vector<Fault>& AllFaults() {
  static const std::vector<Fault> kAll = {
      Fault::kKillTrainer,    Fault::kKillWorker,  Fault::kKillCoordinator,
      Fault::kPauseTrainer,   Fault::kHangTrainer, Fault::kPartitionWorker,
      Fault::kFlipCheckpoint, Fault::kDiskFull,
  };
  return kAll;
}

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kKillTrainer:
      return "kill-trainer";
    case Fault::kKillWorker:
      return "kill-worker";
    case Fault::kKillCoordinator:
      return "kill-coordinator";
    case Fault::kPauseTrainer:
      return "pause-trainer";
    case Fault::kHangTrainer:
      return "hang-trainer";
    case Fault::kPartitionWorker:
      return "partition-worker";
    case Fault::kFlipCheckpoint:
      return "flip-checkpoint";
    case Fault::kDiskFull:
      return "disk-full";
  }
  return "unknown";
}

FaultInjector::FaultInjector(cli::LocalCluster* cluster, FaultOptions options)
    : cluster_(cluster), options_(options), rng_(options.seed) {}

std::vector<pid_t> FaultInjector::Trainers() const {
  std::vector<pid_t> pids;
  const std::string dir = fs::absolute(cluster_->dir()).string();
  for (const auto& entry : fs::directory_iterator("/proc")) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    const std::vector<std::string> args = Cmdline(pid);
    if (args.empty() || fs::path(args[0]).filename() != "hlab-train") continue;
    const fs::path task = TaskDir(pid);  // none for --probe-devices
    std::error_code ec;
    if (!task.empty() && fs::absolute(task, ec).string().rfind(dir, 0) == 0) {
      pids.push_back(pid);
    }
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

absl::StatusOr<std::string> FaultInjector::Inject(Fault fault) {
  std::vector<pid_t> running;
  for (pid_t pid : Trainers()) {
    if (State(pid) != 'T') running.push_back(pid);
  }
  const std::vector<pid_t>& workers = cluster_->worker_pids();
  switch (fault) {
    case Fault::kKillTrainer: {
      if (running.empty()) return absl::NotFoundError("no trainer running");
      const pid_t pid = Pick(running);
      ::kill(pid, SIGKILL);
      return absl::StrCat("kill -9 of hlab-train ", pid, " (",
                          TaskDir(pid).filename().string(), ")");
    }
    case Fault::kKillWorker: {
      if (workers.empty()) return absl::NotFoundError("no worker");
      const size_t index =
          std::uniform_int_distribution<size_t>(0, workers.size() - 1)(rng_);
      const pid_t pid = workers[index];
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      absl::Status restarted = cluster_->RestartWorker(index);
      if (!restarted.ok()) return restarted;
      return absl::StrCat("kill -9 of worker local-", index, " (pid ", pid,
                          "), started again");
    }
    case Fault::kKillCoordinator: {
      const pid_t pid = cluster_->coordinator_pid();
      absl::Status restarted = cluster_->RestartCoordinator();  // kill -9
      if (!restarted.ok()) return restarted;
      return absl::StrCat("kill -9 of the coordinator (pid ", pid,
                          "), started again");
    }
    case Fault::kPauseTrainer: {
      if (running.empty()) return absl::NotFoundError("no trainer running");
      const pid_t pid = Pick(running);
      const absl::Duration pause = options_.stall_timeout / 4;
      ::kill(pid, SIGSTOP);
      Sleep(pause);
      ::kill(pid, SIGCONT);
      return absl::StrCat("SIGSTOP of hlab-train ", pid, ", SIGCONT after ",
                          absl::FormatDuration(pause));
    }
    case Fault::kHangTrainer: {
      if (running.empty()) return absl::NotFoundError("no trainer running");
      const pid_t pid = Pick(running);
      ::kill(pid, SIGSTOP);
      // The watchdog continues and stops it; wait until it has.
      Sleep(options_.stall_timeout + options_.kill_grace + absl::Seconds(1));
      return absl::StrCat("SIGSTOP of hlab-train ", pid,
                          " until the watchdog stopped it");
    }
    case Fault::kPartitionWorker: {
      if (workers.empty()) return absl::NotFoundError("no worker");
      const pid_t pid = Pick(workers);
      const absl::Duration cut = options_.lease + absl::Seconds(2);
      ::kill(pid, SIGSTOP);
      Sleep(cut);
      ::kill(pid, SIGCONT);
      return absl::StrCat("SIGSTOP of worker pid ", pid, " for ",
                          absl::FormatDuration(cut),
                          " (past its lease), then SIGCONT");
    }
    case Fault::kFlipCheckpoint: {
      // The newest periodic checkpoint of a running task that is not its
      // last step (a run's final checkpoint is what its evaluations read).
      std::vector<std::pair<fs::path, int64_t>> candidates;
      const fs::path root = fs::path(cluster_->dir()) / "checkpoints";
      for (pid_t pid : running) {
        const fs::path task = TaskDir(pid);
        const int64_t stop = StopStep(task / "trainer.log");
        std::error_code ec;
        fs::path newest;
        for (const auto& e :
             fs::directory_iterator(root / task.filename(), ec)) {
          const std::string name = e.path().filename().string();
          if (name.rfind("step-", 0) == 0 && name.size() == 20 &&
              e.path().extension() == ".ckpt" && name > newest.filename()) {
            newest = e.path();
          }
        }
        int64_t step = -1;
        if (!newest.empty() &&
            absl::SimpleAtoi(newest.filename().string().substr(5, 10), &step) &&
            step < stop) {
          candidates.emplace_back(newest, step);
        }
      }
      if (candidates.empty()) {
        return absl::NotFoundError("no running task has a checkpoint yet");
      }
      const auto& [path, step] = Pick(candidates);
      std::error_code ec;
      const uintmax_t size = fs::file_size(path, ec);
      if (ec || size < 2) return absl::NotFoundError("checkpoint vanished");
      // A byte in the payload's second half: the header stays readable,
      // the SHA-256 no longer matches.
      const uintmax_t at =
          std::uniform_int_distribution<uintmax_t>(size / 2, size - 1)(rng_);
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(at));
      const int old = f.get();
      f.seekp(static_cast<std::streamoff>(at));
      f.put(static_cast<char>(old ^ 0x5a));
      if (!f.good()) return absl::NotFoundError("checkpoint vanished");
      return absl::StrCat("byte ", at, " of ", path.string(), " (step ", step,
                          ") flipped");
    }
    case Fault::kDiskFull: {
      if (options_.full_disk_dir.empty()) {
        return absl::FailedPreconditionError(options_.full_disk_unavailable);
      }
      const fs::path filler = fs::path(options_.full_disk_dir) / "filler";
      const uint64_t filled = FillUp(filler);
      Sleep(options_.disk_full_hold);
      std::error_code ec;
      fs::remove(filler, ec);
      return absl::StrCat("file system ", options_.full_disk_dir, " full for ",
                          absl::FormatDuration(options_.disk_full_hold), " (",
                          filled >> 20, " MiB of filler), then freed");
    }
  }
  return absl::InvalidArgumentError("unknown fault");
}

}  // namespace hlab::chaos
