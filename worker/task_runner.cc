#include "worker/task_runner.h"
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/log.h"
#include "common/openmp_env.h"
#include "common/store_unavailable.h"
#include "task/eval_task.h"
#include "task/train_task.h"
#include "worker/backoff.h"
#include "worker/coordinator_client.h"
#include "worker/devices.h"
#include "worker/metrics.h"
#include "worker/record_relay.h"
#include "worker/stale_trainers.h"

namespace hlab::worker {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxBatch = 1000;  // WorkerService's limit per request

// The attempt is over as far as the coordinator is concerned.
bool Fenced(const absl::Status& s) {
  return s.code() == absl::StatusCode::kFailedPrecondition ||
         s.code() == absl::StatusCode::kNotFound;
}

// A coordinator that answers that it cannot write its database was reached
// (its refusal is retried like any other; docs/operations.md).
bool Unreachable(const absl::Status& s) {
  if (IsStoreNotWritable(s)) return false;
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded;
}

// A free TCP port on the loopback interface for rank 0's c10d store.
absl::StatusOr<int> FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  if (port < 0) return absl::InternalError("no free port for --master-port");
  return port;
}

std::string OneLine(std::string s) {
  s = absl::StrReplaceAll(s, {{"\r", " "}, {"\n", " "}});
  if (s.size() > 1000) s.resize(1000);
  return s;
}

}  // namespace

struct TaskRunner::Ranks {
  std::vector<std::unique_ptr<TrainerProcess>> procs;
  int first_failed = -1;  // the rank seen failing first
};

// Signals that end a process from outside it: an operator, a scheduler's
// preemption, the worker's own stop, a reader that went away. A crash
// (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, ...) is the process's own.
namespace {
bool KilledFromOutside(int signal) {
  return signal == SIGKILL || signal == SIGTERM || signal == SIGINT ||
         signal == SIGHUP || signal == SIGQUIT || signal == SIGPIPE;
}
}  // namespace

int64_t CgroupOomKills() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);  // cgroup v2
  }
  if (path.empty()) return -1;
  std::ifstream events("/sys/fs/cgroup" + path + "/memory.events");
  std::string key;
  int64_t value = 0;
  while (events >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return -1;
}

TaskOutcome ClassifyExit(const std::vector<ExitStatus>& exits,
                         const std::string& last_error, int first_failed,
                         const std::string& program, bool oom_kills) {
  TaskOutcome out;
  int chosen = first_failed >= 0 &&
                       static_cast<size_t>(first_failed) < exits.size() &&
                       !exits[static_cast<size_t>(first_failed)].success()
                   ? first_failed
                   : -1;
  for (size_t r = 0; r < exits.size(); ++r) {
    const ExitStatus& e = exits[r];
    if (e.success()) continue;
    const bool permanent = !e.signaled && (e.code == 2 || e.code == 3);
    if (chosen < 0 || permanent) chosen = static_cast<int>(r);
    if (permanent) break;
  }
  if (chosen < 0) {
    out.complete = true;
    return out;
  }
  const ExitStatus& e = exits[static_cast<size_t>(chosen)];
  out.retryable = e.signaled || (e.code != 2 && e.code != 3);
  const bool oom_killed = e.signaled && e.signal == SIGKILL && oom_kills;
  // This node's disk refused a checkpoint (hlab-train's kExitStorage, 74,
  // train/exit_codes.h): not the task's fault.
  const bool storage = !e.signaled && e.code == 74;
  out.infrastructure =
      (e.signaled && KilledFromOutside(e.signal) && !oom_killed) || storage;
  out.exit_code = e.signaled ? 128 + e.signal : e.code;
  out.message = absl::StrCat(
      program, exits.size() > 1 ? absl::StrCat(" rank ", chosen) : "", ": ",
      e.ToString(), oom_killed ? " by the kernel's OOM killer" : "",
      last_error.empty() ? "" : ": ", last_error);
  out.message = OneLine(out.message);
  return out;
}

std::string TaskDirName(const std::string& task_id) {
  std::string name = task_id.empty() ? "unnamed" : task_id;
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (name == "." || name == "..") name = "_";
  return name;
}

TaskRunner::TaskRunner(TaskRunnerOptions options, hlab::v1::Task task,
                       std::vector<int> devices, CoordinatorClient* client,
                       WorkerMetrics* metrics)
    : options_(std::move(options)),
      task_(std::move(task)),
      devices_(std::move(devices)),
      client_(client),
      metrics_(metrics),
      dir_(
          (fs::path(options_.data_dir) / "tasks" / TaskDirName(task_.task_id()))
              .string()),
      relay_(std::make_unique<RecordRelay>(task_)),
      send_backoff_(options_.min_backoff, options_.max_backoff) {
  progress_ = relay_->progress();
}

TaskRunner::~TaskRunner() = default;

void TaskRunner::Stop(StopReason reason) {
  absl::MutexLock lock(&mu_);
  if (stop_ != StopReason::kNone) return;
  stop_ = reason;
  stop_time_ = absl::Now();
}

TaskRunner::StopReason TaskRunner::stop_reason() const {
  absl::MutexLock lock(&mu_);
  return stop_;
}

hlab::v1::TaskProgress TaskRunner::Progress() const {
  absl::MutexLock lock(&mu_);
  return progress_;
}

const char* TaskRunner::ProgramName() const {
  return IsEval() ? "hlab-eval" : "hlab-train";
}

bool TaskRunner::GiveUpReports() const {
  absl::MutexLock lock(&mu_);
  if (stop_ == StopReason::kCancelled) return true;
  return stop_ == StopReason::kShutdown &&
         absl::Now() - stop_time_ > options_.shutdown_report_timeout;
}

absl::StatusOr<std::string> TaskRunner::Prepare() {
  const nlohmann::json lease = nlohmann::json::parse(
      task_.task_json(), nullptr, /*allow_exceptions=*/false);
  if (!lease.is_object()) {
    return absl::InvalidArgumentError(
        "the lease's task_json is not a JSON object");
  }
  const fs::path dir(dir_);
  // Training tasks checkpoint into the task dir; evaluations share the
  // worker's cache (tokenized corpora, LongPPL key tokens).
  const fs::path made =
      IsEval() ? fs::path(options_.data_dir) / "cache"
      : options_.checkpoint_root.empty()
          ? dir / "checkpoints"
          : fs::path(options_.checkpoint_root) / TaskDirName(task_.task_id());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec) fs::create_directories(made, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot create ", made.string(), ": ", ec.message()));
  }
  std::string text;
  if (IsEval()) {
    absl::StatusOr<task::EvalTask> eval = task::ReadEvalTask(lease);
    if (!eval.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the lease's EVAL task: ", eval.status().message()));
    }
    eval->cache_dir = made.string();
    text = task::EvalTaskToJson(*eval);
  } else {
    absl::StatusOr<task::TrainTask> train = task::ReadTrainTask(lease);
    if (!train.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the lease's training task: ", train.status().message()));
    }
    train->checkpoint.dir = made.string();
    // Resume from no checkpoint the coordinator has not recorded: the
    // points of the steps after it may have died with an earlier worker.
    train->checkpoint.resume_max_step =
        task_.resume_checkpoint().empty() ? int64_t{0} : task_.resume_step();
    // GPUs (given through CUDA_VISIBLE_DEVICES) mean CUDA training.
    train->device = devices_.empty() ? "cpu" : "cuda";
    text = task::TrainTaskToJson(*train);
  }
  const fs::path file = dir / "task.json";
  const fs::path tmp = dir / "task.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    if (!out.good()) {
      return absl::InternalError(absl::StrCat("cannot write ", tmp.string()));
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename: ", ec.message()));
  return file.string();
}

absl::Status TaskRunner::Spawn(const std::string& task_file, Ranks* ranks) {
  // hlab-eval is one process; hlab-train one per GPU, or the task's CPU
  // ranks (Gloo), all on this worker.
  const int world = IsEval() ? 1
                    : task_.resources().gpus() > 0
                        ? task_.resources().gpus()
                        : std::max(1, task_.resources().cpu_ranks());
  int port = 0;
  if (world > 1) {
    absl::StatusOr<int> p = FreePort();
    if (!p.ok()) return p.status();
    port = *p;
  }
  for (int r = 0; r < world; ++r) {
    TrainerLaunch launch;
    launch.argv =
        IsEval()
            ? std::vector<std::string>{options_.evaluator, "--task", task_file}
            : std::vector<std::string>{options_.trainer, "--task", task_file,
                                       "--progress"};
    if (r == 0) {
      launch.argv.insert(
          launch.argv.end(),
          {"--record-fd", std::to_string(TrainerProcess::kRecordFd)});
      launch.record_pipe = true;
    }
    if (world > 1) {
      launch.argv.insert(launch.argv.end(),
                         {"--rank", std::to_string(r), "--world-size",
                          std::to_string(world), "--master-addr", "127.0.0.1",
                          "--master-port", std::to_string(port)});
    }
    // Every child sees only its own GPUs (none for an EVAL task or a CPU
    // task), named through the daemon's own CUDA_VISIBLE_DEVICES.
    const std::vector<int> ordinals =
        devices_.empty() || world == 1
            ? devices_
            : std::vector<int>{
                  devices_[static_cast<size_t>(r) % devices_.size()]};
    const char* daemon_visible = std::getenv("CUDA_VISIBLE_DEVICES");
    absl::StatusOr<std::string> visible = ChildCudaVisibleDevices(
        ordinals, daemon_visible == nullptr
                      ? std::nullopt
                      : std::optional<std::string>(daemon_visible));
    if (!visible.ok()) return visible.status();
    launch.env.push_back("CUDA_VISIBLE_DEVICES=" + *visible);
    // hlab-train and hlab-eval re-execute themselves to get passive OpenMP
    // waiting when the variable is unset, which starts LibTorch twice; set it
    // here (an OMP_WAIT_POLICY the daemon was given is passed on instead).
    if (std::getenv(kOpenMpWaitPolicyVar) == nullptr) {
      launch.env.push_back(kOpenMpPassiveWaitEnv);
    }
    launch.log_path =
        (fs::path(dir_) / (IsEval() ? std::string("evaluator.log")
                           : r == 0 ? std::string("trainer.log")
                                    : absl::StrCat("trainer-rank", r, ".log")))
            .string();
    {
      std::ofstream log(launch.log_path, std::ios::app);
      log << "=== hlab-worker: attempt " << task_.attempt() << ", "
          << absl::FormatTime(absl::Now()) << ": "
          << absl::StrJoin(launch.argv, " ") << "\n";
    }
    absl::StatusOr<std::unique_ptr<TrainerProcess>> proc =
        TrainerProcess::Start(launch);
    if (!proc.ok()) return proc.status();
    ranks->procs.push_back(std::move(*proc));
  }
  return absl::OkStatus();
}

void TaskRunner::Supervise(Ranks* ranks) {
  TrainerProcess& rank0 = *ranks->procs[0];
  bool signaled = false, killed = false;
  absl::Time kill_at = absl::InfiniteFuture();
  absl::Time last_record = absl::Now();
  auto relay_lines = [&](const std::vector<std::string>& lines) {
    if (!lines.empty()) last_record = absl::Now();
    for (const std::string& line : lines) {
      absl::Status s = relay_->Add(line, absl::Now());
      if (!s.ok()) {
        HLAB_LOG(WARNING) << "task " << task_.task_id() << ": " << s;
      }
    }
    if (!lines.empty()) {
      absl::MutexLock lock(&mu_);
      progress_ = relay_->progress();
    }
  };
  while (true) {
    relay_lines(rank0.ReadLines(options_.tick));
    bool all_exited = true, peer_failed = false;
    for (size_t r = 0; r < ranks->procs.size(); ++r) {
      TrainerProcess& p = *ranks->procs[r];
      if (!p.Poll()) {
        all_exited = false;
      } else if (!p.exit_status()->success()) {
        peer_failed = true;
        if (ranks->first_failed < 0) ranks->first_failed = static_cast<int>(r);
      }
    }
    if (all_exited) break;
    const StopReason stop = stop_reason();
    const absl::Duration silent = absl::Now() - last_record;
    if (!signaled && options_.stall_timeout > absl::ZeroDuration() &&
        silent >= options_.stall_timeout) {
      // Hung: a stopped process gets SIGTERM only once continued, and may
      // then still checkpoint; one that ignores it is killed after grace.
      HLAB_LOG(WARNING) << "task " << task_.task_id() << " attempt "
                        << task_.attempt() << ": " << ProgramName()
                        << " wrote no record for " << silent
                        << "; the watchdog stops it";
      stalled_for_ = silent;
      for (auto& p : ranks->procs) {
        p->Signal(SIGCONT);
        p->Signal(SIGTERM);
      }
      signaled = true;
      kill_at = absl::Now() + options_.kill_grace;
      metrics_->WatchdogStopped();
    }
    if (!signaled && (stop != StopReason::kNone || fenced_ || peer_failed)) {
      HLAB_LOG(INFO) << "task " << task_.task_id() << " attempt "
                     << task_.attempt() << ": terminating trainer ("
                     << (stop == StopReason::kCancelled
                             ? "stopped by coordinator"
                         : stop == StopReason::kShutdown
                             ? "worker shutting down"
                         : fenced_ ? "lease lost"
                                   : "a rank failed")
                     << ")";
      for (auto& p : ranks->procs) p->Signal(SIGTERM);
      signaled = true;
      kill_at = absl::Now() + options_.kill_grace;
    }
    if (signaled && !killed && absl::Now() >= kill_at) {
      HLAB_LOG(WARNING) << "task " << task_.task_id()
                        << ": trainer ignored SIGTERM; SIGKILL";
      for (auto& p : ranks->procs) p->Signal(SIGKILL);
      killed = true;
    }
    if (stop != StopReason::kCancelled) Flush(/*all=*/false);
  }
  // Records written just before the exit.
  for (int i = 0; i < 100; ++i) {
    std::vector<std::string> lines = rank0.ReadLines(absl::ZeroDuration());
    if (lines.empty()) break;
    relay_lines(lines);
  }
}

bool TaskRunner::Flush(bool all) {
  Backoff& backoff = send_backoff_;
  while (!fenced_ && relay_->HasPending()) {
    const absl::Time now = absl::Now();
    if (!all && (now < next_send_ || !relay_->FlushDue(now))) return true;
    absl::Status s;
    const char* rpc;
    size_t sent = 0;
    if (!relay_->checkpoints().empty() &&
        (relay_->PeekPoints(1).empty() ||
         relay_->PeekPoints(1)[0].step() >
             relay_->checkpoints().front().step())) {
      rpc = "ReportCheckpoint";
      hlab::v1::ReportCheckpointRequest req;
      req.set_task_id(task_.task_id());
      req.set_attempt(task_.attempt());
      req.set_worker_id(options_.worker_id);
      *req.mutable_checkpoint() = relay_->checkpoints().front();
      hlab::v1::ReportCheckpointResponse resp;
      s = client_->ReportCheckpoint(req, &resp);
      if (s.ok() || s.code() == absl::StatusCode::kInvalidArgument) {
        relay_->AckCheckpoint();
      }
    } else {
      rpc = "ReportMetrics";
      hlab::v1::ReportMetricsRequest req;
      req.set_task_id(task_.task_id());
      req.set_attempt(task_.attempt());
      req.set_worker_id(options_.worker_id);
      for (auto& p : relay_->PeekPoints(kMaxBatch)) *req.add_points() = p;
      sent = static_cast<size_t>(req.points_size());
      hlab::v1::ReportMetricsResponse resp;
      s = client_->ReportMetrics(req, &resp);
      if (s.ok() || s.code() == absl::StatusCode::kInvalidArgument) {
        relay_->AckPoints(sent);
      }
      if (s.ok()) metrics_->PointsReported(sent);
    }
    metrics_->SetConnected(!Unreachable(s));
    if (s.ok()) {
      backoff.Reset();
      next_send_ = absl::InfinitePast();
      continue;
    }
    metrics_->ReportError(rpc);
    if (Fenced(s)) {
      HLAB_LOG(WARNING) << "task " << task_.task_id() << " attempt "
                        << task_.attempt() << ": " << rpc
                        << " refused, the lease is gone: " << s;
      fenced_ = true;
      return false;
    }
    if (s.code() == absl::StatusCode::kInvalidArgument) {
      HLAB_LOG(ERROR) << "task " << task_.task_id() << ": " << rpc
                      << " rejected, dropped: " << s;
      continue;
    }
    const absl::Duration wait = backoff.Next();
    if (!all) {
      next_send_ = now + wait;
      return true;
    }
    if (GiveUpReports()) return false;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(wait));
  }
  return !fenced_;
}

template <typename Call>
absl::Status TaskRunner::Report(const char* rpc, Call call) {
  Backoff backoff(options_.min_backoff, options_.max_backoff);
  while (true) {
    absl::Status s = call();
    metrics_->SetConnected(!Unreachable(s));
    if (s.ok()) return s;
    metrics_->ReportError(rpc);
    if (Fenced(s) || s.code() == absl::StatusCode::kInvalidArgument) {
      HLAB_LOG(WARNING) << "task " << task_.task_id() << " attempt "
                        << task_.attempt() << ": " << rpc << " refused: " << s;
      return s;
    }
    if (GiveUpReports()) {
      HLAB_LOG(WARNING) << "task " << task_.task_id() << ": giving up " << rpc
                        << ": " << s;
      return s;
    }
    HLAB_LOG(INFO) << "task " << task_.task_id() << ": " << rpc
                   << " failed, retrying: " << s;
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(backoff.Next()));
  }
}

void TaskRunner::Finish(const TaskOutcome& outcome) {
  const StopReason stop = stop_reason();
  const std::string what =
      absl::StrCat("task ", task_.task_id(), " attempt ", task_.attempt());
  if (stop == StopReason::kCancelled || fenced_ || !Flush(/*all=*/true)) {
    HLAB_LOG(INFO) << what << ": stopped ("
                   << (outcome.complete ? "completed" : outcome.message)
                   << "); not reported";
    metrics_->TaskStopped();
    return;
  }
  if (outcome.complete) {
    HLAB_LOG(INFO) << what << ": complete";
    hlab::v1::CompleteRequest req;
    req.set_task_id(task_.task_id());
    req.set_attempt(task_.attempt());
    req.set_worker_id(options_.worker_id);
    for (const hlab::v1::MetricPoint& p : relay_->results()) {
      *req.add_results() = p;
    }
    hlab::v1::CompleteResponse resp;
    if (Report("Complete", [&] {
          return client_->Complete(req, &resp);
        }).ok()) {
      metrics_->TaskCompleted();
    }
    return;
  }
  hlab::v1::FailRequest req;
  req.set_task_id(task_.task_id());
  req.set_attempt(task_.attempt());
  req.set_worker_id(options_.worker_id);
  const bool shutdown = stop == StopReason::kShutdown;
  const bool infrastructure = outcome.infrastructure || shutdown;
  req.set_fault(infrastructure ? hlab::v1::FAULT_CLASS_INFRASTRUCTURE
                               : hlab::v1::FAULT_CLASS_TASK);
  req.set_retryable(outcome.retryable || infrastructure);
  req.set_exit_code(outcome.exit_code);
  req.set_error(shutdown ? "worker shutting down; " + outcome.message
                         : outcome.message);
  HLAB_LOG(INFO) << what << ": failed ("
                 << (infrastructure    ? "infrastructure"
                     : req.retryable() ? "task error, retryable"
                                       : "task error, permanent")
                 << "): " << req.error();
  hlab::v1::FailResponse resp;
  if (Report("Fail", [&] { return client_->Fail(req, &resp); }).ok()) {
    metrics_->TaskFailed(req.retryable());
  }
}

void TaskRunner::Run() {
  metrics_->TaskStarted(task_.attempt());
  HLAB_LOG(INFO) << "task " << task_.task_id() << " attempt " << task_.attempt()
                 << ": starting in " << dir_;
  absl::StatusOr<std::string> task_file = Prepare();
  if (!task_file.ok()) {
    metrics_->TaskEnded();
    TaskOutcome outcome;
    // An invalid task is its own fault; anything else (a full disk, a
    // missing directory) is this node's.
    outcome.retryable =
        task_file.status().code() != absl::StatusCode::kInvalidArgument;
    outcome.infrastructure = outcome.retryable;
    outcome.exit_code = -1;
    outcome.message = OneLine(std::string(task_file.status().message()));
    Finish(outcome);
    return;
  }
  // Trainers of this task left running by a worker that died would share
  // its directory.
  StopStaleTrainers(dir_, options_.kill_grace);
  Ranks ranks;
  const int64_t oom_kills_before = CgroupOomKills();
  absl::Status spawned = Spawn(*task_file, &ranks);
  if (spawned.ok()) {
    std::vector<pid_t> pids;
    for (auto& p : ranks.procs) pids.push_back(p->pid());
    absl::Status recorded = RecordTrainerPids(dir_, pids);
    if (!recorded.ok()) {
      HLAB_LOG(WARNING) << recorded;
    }
  }
  if (!spawned.ok()) {
    for (auto& p : ranks.procs) p->Terminate(absl::ZeroDuration());
    metrics_->TaskEnded();
    TaskOutcome outcome;
    outcome.retryable = true;
    outcome.infrastructure = true;  // this node cannot start it
    outcome.exit_code = -1;
    outcome.message = OneLine(
        absl::StrCat("cannot start ", ProgramName(), ": ", spawned.message()));
    Finish(outcome);
    return;
  }
  Supervise(&ranks);
  ClearTrainerPids(dir_);
  metrics_->TaskEnded();
  std::vector<ExitStatus> exits;
  for (auto& p : ranks.procs) exits.push_back(*p->exit_status());
  const int64_t oom_kills_after = CgroupOomKills();
  TaskOutcome outcome = ClassifyExit(
      exits, relay_->last_error(), ranks.first_failed, ProgramName(),
      oom_kills_before >= 0 && oom_kills_after > oom_kills_before);
  if (stalled_for_ > absl::ZeroDuration() && !outcome.complete) {
    // Not the task's error: whatever it exited with after being stopped.
    outcome.infrastructure = true;
    outcome.retryable = true;
    outcome.message = OneLine(absl::StrCat(
        ProgramName(), " wrote no record for ",
        absl::FormatDuration(stalled_for_),
        " (hung); stopped by the worker's watchdog (--stall-timeout); ",
        outcome.message));
  }
  if (IsEval() && outcome.complete && relay_->results().empty()) {
    // Nothing to store: an evaluator that measured nothing is broken.
    outcome.complete = false;
    outcome.retryable = false;
    outcome.message = "hlab-eval: exited 0 without a result record";
  }
  Finish(outcome);
}

}  // namespace hlab::worker
