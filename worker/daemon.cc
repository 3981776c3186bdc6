#include "worker/daemon.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/store_unavailable.h"
#include "worker/backoff.h"
#include "worker/coordinator_client.h"
#include "worker/devices.h"
#include "worker/metrics.h"

namespace hlab::worker {
namespace {

// A coordinator that answers that it cannot write its database was reached
// (its refusal is retried like any other; docs/operations.md).
bool Unreachable(const absl::Status& s) {
  if (IsStoreNotWritable(s)) return false;
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded;
}

// Registration errors that retrying cannot fix.
bool Fatal(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnauthenticated ||
         s.code() == absl::StatusCode::kPermissionDenied ||
         s.code() == absl::StatusCode::kInvalidArgument;
}

std::string Key(const std::string& task_id, int64_t attempt) {
  return absl::StrCat(task_id, "#", attempt);
}

// Slots a task occupies: one per GPU, one per CPU rank, at least one.
int Slots(const hlab::v1::Task& task, const std::vector<int>& devices) {
  return std::max(
      {1, static_cast<int>(devices.size()),
       task.resources().gpus() > 0 ? 0 : task.resources().cpu_ranks()});
}

}  // namespace

Daemon::Daemon(DaemonOptions options, CoordinatorClient* client,
               WorkerMetrics* metrics)
    : options_(std::move(options)),
      client_(client),
      metrics_(metrics),
      gpus_(CountGpus(options_.devices)),
      capacity_(options_.capacity > 0 ? options_.capacity : std::max(1, gpus_)),
      heartbeat_interval_(options_.heartbeat_interval) {
  worker_id_ = options_.worker_id;
}

Daemon::~Daemon() {
  Shutdown();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Daemon* d) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !d->running_ || d->finished_;
      },
      this));
}

void Daemon::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    int live = 0;
    for (auto& [key, entry] : tasks_) {
      live += !entry->done;
      entry->runner->Stop(TaskRunner::StopReason::kShutdown);
    }
    HLAB_LOG(INFO) << "worker shutting down: stopping " << live << " task(s)";
  }
  client_->CancelLeases();
}

std::string Daemon::worker_id() const {
  absl::MutexLock lock(&mu_);
  return registered_ ? worker_id_ : "";
}

std::vector<hlab::v1::TaskProgress> Daemon::RunningTasks() const {
  absl::MutexLock lock(&mu_);
  std::vector<hlab::v1::TaskProgress> out;
  for (const auto& [key, entry] : tasks_) {
    if (!entry->done) out.push_back(entry->runner->Progress());
  }
  return out;
}

bool Daemon::SleepUnlessStopping(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

void Daemon::NoteRpc(const char* rpc, const absl::Status& status) {
  metrics_->SetConnected(!Unreachable(status));
  if (status.ok()) return;
  metrics_->ReportError(rpc);
  if (Unreachable(status) || status.code() == absl::StatusCode::kNotFound) {
    // Register again once it answers: a restarted coordinator may not know
    // this worker.
    absl::MutexLock lock(&mu_);
    registered_ = false;
  }
}

absl::Status Daemon::Register() {
  absl::MutexLock serialize(&register_mu_);
  Backoff backoff(options_.min_backoff, options_.max_backoff);
  while (true) {
    hlab::v1::RegisterRequest req;
    {
      absl::MutexLock lock(&mu_);
      if (registered_) return absl::OkStatus();
      if (stopping_) return absl::CancelledError("stopping");
      req.set_worker_id(worker_id_);
    }
    req.set_hostname(options_.hostname);
    req.set_version(options_.version);
    req.set_capacity(capacity_);
    for (const auto& d : options_.devices) *req.add_devices() = d;
    hlab::v1::RegisterResponse resp;
    absl::Status s = client_->Register(req, &resp);
    metrics_->SetConnected(!Unreachable(s));
    if (s.ok()) {
      absl::MutexLock lock(&mu_);
      if (!resp.worker_id().empty()) worker_id_ = resp.worker_id();
      if (options_.heartbeat_interval == absl::ZeroDuration()) {
        heartbeat_interval_ =
            resp.heartbeat_interval_ms() > 0
                ? absl::Milliseconds(resp.heartbeat_interval_ms())
                : absl::Seconds(5);
      }
      registered_ = true;
      HLAB_LOG(INFO) << "registered as " << worker_id_ << " ("
                     << options_.devices.size() << " devices, capacity "
                     << capacity_ << ", heartbeat every " << heartbeat_interval_
                     << ")";
      return absl::OkStatus();
    }
    metrics_->ReportError("Register");
    if (Fatal(s)) {
      return absl::Status(s.code(), absl::StrCat("coordinator refused the "
                                                 "registration: ",
                                                 s.message()));
    }
    const absl::Duration wait = backoff.Next();
    HLAB_LOG(WARNING) << "register failed (" << s << "); retrying in " << wait;
    if (!SleepUnlessStopping(wait)) return absl::CancelledError("stopping");
  }
}

void Daemon::Deregister() {
  hlab::v1::DeregisterRequest req;
  {
    absl::MutexLock lock(&mu_);
    if (!registered_) return;  // the coordinator does not know us now
    req.set_worker_id(worker_id_);
  }
  hlab::v1::DeregisterResponse resp;
  absl::Status s = client_->Deregister(req, &resp);
  NoteRpc("Deregister", s);
  if (!s.ok()) {
    HLAB_LOG(WARNING) << "deregister failed (" << s
                      << "); the coordinator marks this worker lost after a "
                         "lease time";
    return;
  }
  HLAB_LOG(INFO) << "deregistered " << req.worker_id()
                 << (resp.requeued() > 0
                         ? absl::StrCat("; ", resp.requeued(),
                                        " task(s) still leased were requeued")
                         : "");
}

void Daemon::HeartbeatLoop() {
  while (true) {
    absl::Duration interval;
    {
      absl::MutexLock lock(&mu_);
      interval = heartbeat_interval_;
      // Beats go on during shutdown, until the trainers are gone.
      mu_.AwaitWithTimeout(absl::Condition(&finished_), interval);
      if (finished_) return;
    }
    if (!Register().ok()) continue;  // stopping (fatal errors end Run)
    hlab::v1::HeartbeatRequest req;
    req.set_worker_id(worker_id());
    for (const auto& p : RunningTasks()) *req.add_tasks() = p;
    hlab::v1::HeartbeatResponse resp;
    absl::Status s = client_->Heartbeat(req, &resp);
    NoteRpc("Heartbeat", s);
    if (!s.ok()) {
      HLAB_LOG(WARNING) << "heartbeat failed: " << s;
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (resp.draining() != draining_) {
      draining_ = resp.draining();
      HLAB_LOG(INFO) << (draining_
                             ? "drained by the coordinator: no new tasks; the "
                               "running ones go on"
                             : "undrained by the coordinator: taking tasks");
    }
    for (const hlab::v1::TaskProgress& stop : resp.stop()) {
      for (auto& [key, entry] : tasks_) {
        const hlab::v1::Task& t = entry->runner->task();
        if (t.task_id() != stop.task_id()) continue;
        if (stop.attempt() != 0 && stop.attempt() != t.attempt()) continue;
        HLAB_LOG(INFO) << "coordinator stops task " << t.task_id()
                       << " attempt " << t.attempt();
        entry->runner->Stop(TaskRunner::StopReason::kCancelled);
      }
    }
  }
}

std::vector<hlab::v1::Device> Daemon::FreeDevices() const {
  // The CPU (for tasks that need no GPU) and the idle GPUs, while a slot is
  // free.
  std::vector<hlab::v1::Device> free;
  if (busy_slots_ >= capacity_) return free;
  for (const hlab::v1::Device& d : options_.devices) {
    if (d.kind() == "cpu" ||
        (d.kind() == "cuda" && busy_gpus_.count(d.index()) == 0)) {
      free.push_back(d);
    }
  }
  return free;
}

void Daemon::StartTask(const hlab::v1::Task& task, std::vector<int> devices) {
  TaskRunnerOptions runner_options = options_.runner;
  runner_options.worker_id = worker_id();
  auto entry = std::make_unique<Entry>();
  entry->runner = std::make_unique<TaskRunner>(runner_options, task, devices,
                                               client_, metrics_);
  Entry* e = entry.get();
  const std::string key = Key(task.task_id(), task.attempt());
  absl::MutexLock lock(&mu_);
  if (tasks_.count(key) != 0) {
    HLAB_LOG(WARNING) << "task " << key << " leased twice; ignored";
    return;
  }
  busy_slots_ += Slots(task, devices);
  for (int d : devices) busy_gpus_.insert(d);
  tasks_[key] = std::move(entry);
  if (stopping_) e->runner->Stop(TaskRunner::StopReason::kShutdown);
  e->thread = std::thread([this, e, key] { RunTask(e, key); });
}

void Daemon::RunTask(Entry* entry, const std::string& key) {
  const std::string& task_id = entry->runner->task().task_id();
  {
    // An older attempt of the same task still terminating here would share
    // the task directory: wait for it.
    absl::MutexLock lock(&mu_);
    auto older_alive = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (const auto& [k, e] : tasks_) {
        if (k != key && !e->done && e->runner->task().task_id() == task_id) {
          return true;
        }
      }
      return false;
    };
    mu_.Await(absl::Condition(
        +[](decltype(older_alive)* f) { return !(*f)(); }, &older_alive));
  }
  entry->runner->Run();
  absl::MutexLock lock(&mu_);
  entry->done = true;
  busy_slots_ -= Slots(entry->runner->task(), entry->runner->devices());
  for (int d : entry->runner->devices()) busy_gpus_.erase(d);
}

void Daemon::Reap() {
  std::vector<std::unique_ptr<Entry>> done;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (it->second->done) {
        done.push_back(std::move(it->second));
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& e : done) e->thread.join();
}

absl::Status Daemon::LeaseLoop() {
  Backoff backoff(options_.min_backoff, options_.max_backoff);
  while (true) {
    Reap();
    std::vector<hlab::v1::Device> free;
    int free_slots = 0;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stopping_ || !FreeDevices().empty();
      };
      // Wakes when a task ends (done), or at least every lease_wait to reap.
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](decltype(ready)* f) { return (*f)(); }, &ready),
          options_.lease_wait);
      if (stopping_) return absl::OkStatus();
      free = FreeDevices();
      free_slots = capacity_ - busy_slots_;
    }
    if (free.empty()) continue;
    absl::Status registered = Register();
    if (!registered.ok()) {
      if (registered.code() == absl::StatusCode::kCancelled) {
        return absl::OkStatus();  // stopping
      }
      return registered;
    }
    hlab::v1::LeaseRequest req;
    req.set_worker_id(worker_id());
    for (const auto& d : free) *req.add_free_devices() = d;
    req.set_free_slots(free_slots);
    req.set_wait_ms(
        static_cast<int32_t>(absl::ToInt64Milliseconds(options_.lease_wait)));
    hlab::v1::LeaseResponse resp;
    absl::Status s = client_->Lease(req, &resp);
    NoteRpc("Lease", s);
    if (!s.ok()) {
      const absl::Duration wait = backoff.Next();
      HLAB_LOG(WARNING) << "lease failed (" << s << "); retrying in " << wait;
      SleepUnlessStopping(wait);
      continue;
    }
    backoff.Reset();
    if (!resp.has_task()) continue;
    // A GPU task's device_indices are CUDA ordinals (the first free GPUs if
    // the coordinator named none); a CPU task gets no GPU.
    std::vector<int> devices;
    const int want = resp.task().resources().gpus();
    if (want > 0) {
      devices.assign(resp.device_indices().begin(),
                     resp.device_indices().end());
      const bool named = !devices.empty();
      for (const auto& g : free) {
        if (named || static_cast<int>(devices.size()) >= want) break;
        if (g.kind() == "cuda") devices.push_back(g.index());
      }
    }
    HLAB_LOG(INFO) << "leased task " << resp.task().task_id() << " attempt "
                   << resp.task().attempt();
    StartTask(resp.task(), std::move(devices));
  }
}

absl::Status Daemon::Run() {
  {
    absl::MutexLock lock(&mu_);
    if (running_) return absl::FailedPreconditionError("Run() called twice");
    running_ = true;
  }
  absl::Status registered = Register();
  if (!registered.ok() && registered.code() != absl::StatusCode::kCancelled) {
    absl::MutexLock lock(&mu_);
    finished_ = true;
    return registered;
  }
  std::thread heartbeats([this] { HeartbeatLoop(); });
  const absl::Status leasing = LeaseLoop();
  if (!leasing.ok()) {
    HLAB_LOG(ERROR) << leasing << "; stopping";
  }
  // Stopping: the runners were told in Shutdown() (or are told here after a
  // fatal error); wait for them.
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [key, entry] : tasks_) {
      entry->runner->Stop(TaskRunner::StopReason::kShutdown);
    }
  }
  while (true) {
    Reap();
    absl::MutexLock lock(&mu_);
    if (tasks_.empty()) break;
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Daemon* d) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                               for (auto& [k, e] : d->tasks_) {
                                 if (e->done) return true;
                               }
                               return false;
                             },
                             this),
                         absl::Seconds(1));
  }
  {
    absl::MutexLock lock(&mu_);
    finished_ = true;
  }
  heartbeats.join();
  if (leasing.ok()) Deregister();
  HLAB_LOG(INFO) << "worker stopped";
  return leasing;
}

}  // namespace hlab::worker
