#include "coordinator/server/worker_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/alarm.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/planning/proto_mapping.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/planning/trainer_task.h"
#include "coordinator/server/handler_pool.h"
#include "proto/grpc_status.h"

namespace hlab::coordinator {
namespace {

using nlohmann::json;

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The devices (Device.index) a task with `resources` would use among
// `free`, or nullopt if it does not fit. A CPU task takes the "cpu" device
// and needs cpu_ranks of the worker's `free_slots` (all its ranks on this
// worker: gang); a GPU task takes `gpus` "cuda" devices with enough memory
// each.
std::optional<std::vector<int>> PickDevices(
    const store::TaskResources& resources,
    const google::protobuf::RepeatedPtrField<hlab::v1::Device>& free,
    int free_slots) {
  const int gpus = resources.gpus;
  const int64_t memory = resources.gpu_memory_bytes;
  const int ranks = std::max(1, resources.cpu_ranks);
  std::vector<int> picked;
  for (const hlab::v1::Device& d : free) {
    if (gpus == 0 && d.kind() == "cpu") {
      if (ranks > std::max(1, free_slots)) return std::nullopt;
      return std::vector<int>{d.index()};
    }
    if (gpus > 0 && d.kind() == "cuda" && d.memory_bytes() >= memory) {
      picked.push_back(d.index());
      if (static_cast<int>(picked.size()) == gpus) return picked;
    }
  }
  return std::nullopt;
}

// Candidates TryLease leases at most in one call.
constexpr int kLeaseTries = 8;

// The long poll of Lease: retries TryLease every `poll` until a task is
// leased, the wait is over, or the client cancels.
class LeaseReactor final : public grpc::ServerUnaryReactor {
 public:
  LeaseReactor(WorkerServiceImpl* service, const ServiceContext& context,
               const hlab::v1::LeaseRequest* request,
               hlab::v1::LeaseResponse* response)
      : service_(service),
        pool_(context.worker_handlers),
        request_(request),
        response_(response),
        poll_(context.lease_poll),
        deadline_(absl::Now() +
                  std::min(absl::Milliseconds(std::max(0, request->wait_ms())),
                           context.max_lease_wait)) {
    Schedule();
  }

  void OnCancel() override {
    cancelled_ = true;
    alarm_.Cancel();
  }
  void OnDone() override { delete this; }

 private:
  // Runs Step on the worker API's handler pool: TryLease waits on the
  // store, which gRPC's callback threads must not.
  void Schedule() {
    if (pool_ == nullptr) return Step();
    pool_->Run([this] { Step(); });
  }

  void Step() {
    if (cancelled_) return Finish(grpc::Status::CANCELLED);
    absl::Status status =
        service_->TryLease(*request_, response_, /*touch_worker=*/first_);
    first_ = false;
    const absl::Time now = absl::Now();
    if (!status.ok() || response_->has_task() || now >= deadline_) {
      return Finish(ToGrpcStatus(status));
    }
    const absl::Duration wait = std::min(poll_, deadline_ - now);
    alarm_.Set(
        std::chrono::system_clock::now() + absl::ToChronoMicroseconds(wait),
        [this](bool ok) {
          if (!ok) cancelled_ = true;
          Schedule();
        });
  }

  WorkerServiceImpl* const service_;
  HandlerPool* const pool_;
  const hlab::v1::LeaseRequest* const request_;
  hlab::v1::LeaseResponse* const response_;
  const absl::Duration poll_;
  const absl::Time deadline_;
  grpc::Alarm alarm_;
  std::atomic<bool> cancelled_{false};
  bool first_ = true;
};

}  // namespace

// ------------------------------------------------------------- handlers

#define HLAB_AUTHORIZE_WORKER(ctx)                                     \
  do {                                                                 \
    absl::Status auth_status =                                         \
        context_->auth.Check((ctx)->client_metadata(), Role::kWorker); \
    if (!auth_status.ok()) return Finish((ctx), auth_status);          \
  } while (false)

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(
    grpc::CallbackServerContext* ctx, const hlab::v1::RegisterRequest* request,
    hlab::v1::RegisterResponse* response) {
  HLAB_AUTHORIZE_WORKER(ctx);
  return AnswerOnPool(
      context_->worker_handlers, ctx,
      [this, request, response] { return DoRegister(*request, response); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(
    grpc::CallbackServerContext* ctx, const hlab::v1::HeartbeatRequest* request,
    hlab::v1::HeartbeatResponse* response) {
  HLAB_AUTHORIZE_WORKER(ctx);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  StartHeartbeat(*request, response, [reactor](const absl::Status& s) {
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Lease(
    grpc::CallbackServerContext* ctx, const hlab::v1::LeaseRequest* request,
    hlab::v1::LeaseResponse* response) {
  HLAB_AUTHORIZE_WORKER(ctx);
  return new LeaseReactor(this, *context_, request, response);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportMetrics(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::ReportMetricsRequest* request,
    hlab::v1::ReportMetricsResponse* response) {
  HLAB_AUTHORIZE_WORKER(ctx);
  // Answered from the store writer's completer thread once the batch is
  // committed: no gRPC thread waits for the commit, so every call in flight
  // can join the same group commit.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  StartReportMetrics(*request, response, [reactor](const absl::Status& s) {
    reactor->Finish(ToGrpcStatus(s));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportCheckpoint(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::ReportCheckpointRequest* request,
    hlab::v1::ReportCheckpointResponse* /*response*/) {
  HLAB_AUTHORIZE_WORKER(ctx);
  return AnswerOnPool(context_->worker_handlers, ctx,
                      [this, request] { return DoReportCheckpoint(*request); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Complete(
    grpc::CallbackServerContext* ctx, const hlab::v1::CompleteRequest* request,
    hlab::v1::CompleteResponse* /*response*/) {
  HLAB_AUTHORIZE_WORKER(ctx);
  return AnswerOnPool(context_->worker_handlers, ctx,
                      [this, request] { return DoComplete(*request); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Fail(
    grpc::CallbackServerContext* ctx, const hlab::v1::FailRequest* request,
    hlab::v1::FailResponse* response) {
  HLAB_AUTHORIZE_WORKER(ctx);
  return AnswerOnPool(
      context_->worker_handlers, ctx,
      [this, request, response] { return DoFail(*request, response); });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Deregister(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::DeregisterRequest* request,
    hlab::v1::DeregisterResponse* response) {
  HLAB_AUTHORIZE_WORKER(ctx);
  return AnswerOnPool(
      context_->worker_handlers, ctx,
      [this, request, response] { return DoDeregister(*request, response); });
}

#undef HLAB_AUTHORIZE_WORKER

// -------------------------------------------------------------- methods

absl::Status WorkerServiceImpl::DoRegister(
    const hlab::v1::RegisterRequest& request,
    hlab::v1::RegisterResponse* response) {
  const absl::Time now = context_->clock();
  store::WorkerInfo info;
  info.id = request.worker_id();
  if (info.id.empty()) {
    info.id =
        absl::StrCat(request.hostname().empty() ? "worker" : request.hostname(),
                     "-", absl::ToUnixMillis(now));
  }
  info.address = request.hostname();
  info.version = request.version();
  info.devices = DevicesToJson(request.devices());
  int gpus = 0;
  for (const auto& d : request.devices()) gpus += d.kind() == "cuda";
  info.capacity =
      request.capacity() > 0 ? request.capacity() : std::max(1, gpus);
  HLAB_RETURN_IF_ERROR(context_->store->RegisterWorker(info, now));
  store::Event event;
  event.kind = "worker_joined";
  event.message = absl::StrCat(info.id, " (", request.devices_size(),
                               " devices, ", request.version(), ")");
  event.time = now;
  HLAB_RETURN_IF_ERROR(context_->store->AppendEvent(event).status());
  response->set_worker_id(info.id);
  response->set_lease_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(context_->lease)));
  response->set_heartbeat_interval_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(context_->lease / 6)));
  HLAB_LOG(INFO) << "worker " << info.id << " registered with "
                 << request.devices_size() << " devices, build "
                 << (info.version.empty() ? "unknown" : info.version);
  if (!context_->version.empty() && !info.version.empty() &&
      info.version != context_->version) {
    HLAB_LOG(WARNING) << "worker " << info.id << " runs build " << info.version
                      << ", this coordinator " << context_->version
                      << ": its trainer may compute other bits than the "
                         "other workers'; `hlab workers` lists each build";
  }
  return absl::OkStatus();
}

void WorkerServiceImpl::StartHeartbeat(
    const hlab::v1::HeartbeatRequest& request,
    hlab::v1::HeartbeatResponse* response,
    std::function<void(const absl::Status&)> finish) {
  const absl::Time now = context_->clock();
  // The worker and all of its leases in one write (one commit to wait for).
  std::vector<std::pair<std::string, int>> held;
  for (const hlab::v1::TaskProgress& p : request.tasks()) {
    held.emplace_back(p.task_id(), static_cast<int>(p.attempt()));
  }
  HandlerPool* const pool = context_->worker_handlers;
  // Runs on the writer's completer thread, which must not wait on the
  // store: a task spec missing from the cache is read on the pool.
  auto committed = [this, &request, response, pool, finish = std::move(finish)](
                       absl::Status status,
                       std::vector<absl::Status> extended) mutable {
    const bool inline_answer = pool == nullptr || !status.ok() ||
                               HeartbeatSpecsCached(request, extended);
    auto answer = [this, &request, response, finish = std::move(finish),
                   status = std::move(status),
                   extended = std::move(extended)](bool read_store) {
      if (status.ok()) {
        AnswerHeartbeat(request, extended, read_store, response);
      }
      finish(status);
    };
    if (inline_answer) {
      answer(/*read_store=*/pool == nullptr);
    } else {
      pool->Run([answer = std::move(answer)]() mutable { answer(true); });
    }
  };
  context_->store->HeartbeatAndExtendAsync(request.worker_id(), std::move(held),
                                           now, context_->lease,
                                           std::move(committed));
}

bool WorkerServiceImpl::HeartbeatSpecsCached(
    const hlab::v1::HeartbeatRequest& request,
    const std::vector<absl::Status>& extended) const {
  if (context_->metrics == nullptr) return true;
  for (int i = 0; i < request.tasks_size(); ++i) {
    if (extended[static_cast<size_t>(i)].ok() &&
        task_specs_.Cached(request.tasks(i).task_id()) == nullptr) {
      return false;
    }
  }
  return true;
}

void WorkerServiceImpl::AnswerHeartbeat(
    const hlab::v1::HeartbeatRequest& request,
    const std::vector<absl::Status>& extended, bool read_store,
    hlab::v1::HeartbeatResponse* response) {
  response->set_draining(context_->store->WorkerDraining(request.worker_id()));
  for (int i = 0; i < request.tasks_size(); ++i) {
    const hlab::v1::TaskProgress& p = request.tasks(i);
    if (!extended[static_cast<size_t>(i)].ok()) {
      *response->add_stop() = p;  // stale, moved on, or unknown
      continue;
    }
    if (context_->metrics == nullptr) continue;
    context_->metrics->ObserveTaskTokens(p.task_id(), p.tokens(), p.tokens());
    // Its runs never change: from the cache, not a read per heartbeat.
    absl::StatusOr<std::shared_ptr<const TaskSpec>> spec =
        read_store ? task_specs_.Get(p.task_id())
                   : task_specs_.Cached(p.task_id());
    // Training progress only: an EVAL's heartbeat carries no tokens.
    if (!spec.ok() || *spec == nullptr ||
        (*spec)->task.spec.kind == store::TaskKind::kEval) {
      continue;
    }
    // The throughput of each run the task trains. A trunk trains a run only
    // up to its branch point: past it, that run's own training stands still.
    // Loss and progress ratio come from the store (LeaseReaper::Tick).
    const hlab::v1::Task& proto = (*spec)->proto;
    if (proto.kind() == hlab::v1::TASK_KIND_TRUNK) {
      for (const auto& b : proto.branch_points()) {
        context_->metrics->SetRunProgress(
            b.run_id(), p.tokens() < b.tokens() ? p.tokens_per_s() : 0, -1, -1);
      }
      continue;
    }
    for (const std::string& run_id : proto.run_ids()) {
      context_->metrics->SetRunProgress(run_id, p.tokens_per_s(), -1, -1);
    }
  }
}

absl::Status WorkerServiceImpl::TryLease(const hlab::v1::LeaseRequest& request,
                                         hlab::v1::LeaseResponse* response,
                                         bool touch_worker) {
  store::Store& store = *context_->store;
  const absl::Time now = context_->clock();
  if (touch_worker) {
    HLAB_RETURN_IF_ERROR(store.HeartbeatWorker(request.worker_id(), now));
  }
  // Drained (`hlab drain`): nothing new. LeaseTask checks it again in its
  // transaction, so a drain that lands after this check still holds.
  if (store.WorkerDraining(request.worker_id())) return absl::OkStatus();
  // A claim is exclusive, so a candidate is lost only when it went stale
  // (cancelled, or taken outside the queue); give up after a few and let
  // the long poll try again.
  for (int tries = 0; tries < kLeaseTries; ++tries) {
    std::optional<std::vector<int>> devices;
    HLAB_ASSIGN_OR_RETURN(
        std::optional<store::Task> task,
        lease_queue_.Claim(now, [&](const store::Task& candidate) {
          devices = PickDevices(candidate.spec.resources,
                                request.free_devices(), request.free_slots());
          return devices.has_value();
        }));
    if (!task) return absl::OkStatus();
    absl::StatusOr<int> attempt = store.LeaseTask(
        task->spec.id, request.worker_id(), now, context_->lease);
    lease_queue_.Release(task->spec.id, attempt.ok());
    if (attempt.status().code() == absl::StatusCode::kFailedPrecondition) {
      continue;  // no longer leasable
    }
    if (attempt.status().code() == absl::StatusCode::kUnavailable) {
      return absl::OkStatus();  // the worker was drained meanwhile
    }
    HLAB_RETURN_IF_ERROR(attempt.status());
    // Built once the lease is won, so no lost race pays for it.
    absl::StatusOr<std::string> trainer_task =
        BuildTrainerTaskFromStore(store, *context_->query, *task);
    if (!trainer_task.ok()) {
      // It can never be built (e.g. a trunk that succeeded without
      // reporting a branch checkpoint): fail it for good, visibly.
      HLAB_RETURN_IF_ERROR(
          FailUnbuildable(*task, *attempt, trainer_task.status(), now));
      continue;
    }
    hlab::v1::Task* out = response->mutable_task();
    *out = task_specs_.Remember(*task)->proto;
    out->set_state(hlab::v1::TASK_STATE_LEASED);
    out->set_attempt(*attempt);
    out->set_worker_id(request.worker_id());
    out->set_lease_expires_unix_ms(store::ToMillis(now + context_->lease));
    out->set_task_json(*trainer_task);
    absl::StatusOr<store::Checkpoint> newest =
        store.NewestCheckpoint(task->spec.id);
    if (newest.ok()) {
      out->set_resume_checkpoint(newest->path);
      out->set_resume_step(newest->step);
    }
    for (int d : *devices) response->add_device_indices(d);
    response->set_lease_expires_unix_ms(out->lease_expires_unix_ms());
    HLAB_LOG(INFO) << "leased " << task->spec.id << " attempt " << *attempt
                   << " to " << request.worker_id();
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status WorkerServiceImpl::FailUnbuildable(const store::Task& task,
                                                int attempt,
                                                const absl::Status& why,
                                                absl::Time now) {
  HLAB_LOG(ERROR) << "task " << task.spec.id << " cannot run: " << why;
  absl::StatusOr<store::TaskState> failed = context_->store->FailTask(
      task.spec.id, attempt,
      store::AttemptFailure{
          absl::StrCat(task.spec.kind == store::TaskKind::kEval
                           ? "cannot build its evaluator task: "
                           : "cannot build its trainer task: ",
                       why.message()),
          store::FaultClass::kTask, /*retryable=*/false},
      now, absl::ZeroDuration());
  if (failed.status().code() == absl::StatusCode::kFailedPrecondition) {
    return absl::OkStatus();  // its lease already ended (e.g. cancelled)
  }
  return failed.status();
}

absl::StatusOr<store::Task> WorkerServiceImpl::HeldTask(
    const std::string& task_id, int64_t attempt, const std::string& worker_id) {
  HLAB_ASSIGN_OR_RETURN(store::Task task, context_->store->GetTask(task_id));
  if (task.state != store::TaskState::kLeased || task.attempt != attempt) {
    return absl::FailedPreconditionError(absl::StrCat(
        "stale attempt ", attempt, " of task ", task_id, " (now attempt ",
        task.attempt, ", ", store::ToString(task.state), ")"));
  }
  if (!worker_id.empty() && task.lease_worker != worker_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", task_id, " is leased to ", task.lease_worker,
                     ", not ", worker_id));
  }
  return task;
}

void WorkerServiceImpl::ForgetFinishedRuns(const store::Task& task) {
  if (context_->metrics == nullptr) return;
  const hlab::v1::Task proto = ToProtoTask(task);
  for (const std::string& run_id : proto.run_ids()) {
    absl::StatusOr<store::Run> run = context_->store->GetRun(run_id);
    if (run.ok() && run->state != store::RunState::kRunning) {
      context_->metrics->RemoveRun(run_id);
    }
  }
}

absl::StatusOr<std::vector<store::MetricPoint>>
WorkerServiceImpl::PointsToStore(const hlab::v1::ReportMetricsRequest& request,
                                 std::string* run_id) {
  if (request.points_size() > 1000) {
    return absl::InvalidArgumentError("points: at most 1000 per batch");
  }
  // The task's kind and run only: the store's write checks the lease
  // (attempt and worker) in the same transaction as the insert.
  HLAB_ASSIGN_OR_RETURN(std::shared_ptr<const TaskSpec> held,
                        task_specs_.Get(request.task_id()));
  const store::Task& task = held->task;
  std::vector<store::MetricPoint> points;
  points.reserve(request.points_size());
  if (task.spec.kind == store::TaskKind::kTrunk) {
    // A trunk trains the shared prefix of its runs: a point at step s
    // belongs to every run whose branch point is at or after s.
    const hlab::v1::Task& proto = held->proto;
    for (const auto& p : request.points()) {
      if (!p.run_id().empty()) {
        points.push_back(FromProto(p));
        continue;
      }
      for (const auto& b : proto.branch_points()) {
        if (p.step() > b.step()) continue;
        points.push_back(FromProto(p));
        points.back().run_id = b.run_id();
      }
    }
  } else {
    // A point without a run stays without one: the store writes it to the
    // task's run (no copy of the run id per point).
    for (const auto& p : request.points()) points.push_back(FromProto(p));
  }
  if (run_id != nullptr) *run_id = task.spec.run_id;
  return points;
}

namespace {

// What a stored batch tells the Prometheus exposer: the token range seen
// and the newest loss and tokens/s of each run. Gathered before the write
// so that the completion (on the store writer's completer thread) only
// applies it.
struct MetricsProgress {
  struct RunProgress {
    std::string run_id;
    double tokens_per_s = -1;
  };
  std::string task_id;
  int64_t low_tokens = 0, high_tokens = 0;
  std::vector<RunProgress> runs;

  RunProgress& Of(const std::string& run_id) {
    for (RunProgress& r : runs) {
      if (r.run_id == run_id) return r;
    }
    return runs.emplace_back(RunProgress{run_id});
  }
};

// `task_run` is the run of points that name none.
MetricsProgress ProgressOf(const hlab::v1::ReportMetricsRequest& request,
                           const std::vector<store::MetricPoint>& points,
                           const std::string& task_run) {
  MetricsProgress progress;
  progress.task_id = request.task_id();
  for (const auto& p : request.points()) {
    if (p.tokens() <= 0) continue;
    progress.low_tokens = progress.low_tokens == 0
                              ? p.tokens()
                              : std::min(progress.low_tokens, p.tokens());
    progress.high_tokens = std::max(progress.high_tokens, p.tokens());
  }
  for (const store::MetricPoint& p : points) {
    const std::string& run = p.run_id.empty() ? task_run : p.run_id;
    if (p.name == "tokens_per_s") progress.Of(run).tokens_per_s = p.value;
  }
  return progress;
}

}  // namespace

void WorkerServiceImpl::StartReportMetrics(
    const hlab::v1::ReportMetricsRequest& request,
    hlab::v1::ReportMetricsResponse* response,
    std::function<void(const absl::Status&)> finish) {
  std::string task_run;
  absl::StatusOr<std::vector<store::MetricPoint>> points =
      PointsToStore(request, &task_run);
  if (!points.ok()) return finish(points.status());
  std::shared_ptr<MetricsProgress> progress;
  CoordinatorMetrics* metrics = context_->metrics;
  if (metrics != nullptr) {
    progress = std::make_shared<MetricsProgress>(
        ProgressOf(request, *points, task_run));
  }
  // Runs on the store writer's completer thread after the commit: the
  // points are durable.
  auto done = [response, metrics, progress, finish = std::move(finish)](
                  absl::Status status, int64_t accepted) {
    if (status.ok()) {
      response->set_accepted(static_cast<int32_t>(accepted));
      if (metrics != nullptr) {
        metrics->metric_points().Increment(static_cast<double>(accepted));
        metrics->ObserveTaskTokens(progress->task_id, progress->low_tokens,
                                   progress->high_tokens);
        for (const MetricsProgress::RunProgress& r : progress->runs) {
          metrics->SetRunProgress(r.run_id, r.tokens_per_s, -1, -1);
        }
      }
    }
    finish(status);
  };
  context_->store->RecordMetricsAsync(request.task_id(),
                                      static_cast<int>(request.attempt()),
                                      *std::move(points), request.worker_id(),
                                      context_->clock(), std::move(done));
}

absl::Status WorkerServiceImpl::DoReportCheckpoint(
    const hlab::v1::ReportCheckpointRequest& request) {
  HLAB_ASSIGN_OR_RETURN(
      store::Task task,
      HeldTask(request.task_id(), request.attempt(), request.worker_id()));
  const hlab::v1::Checkpoint& c = request.checkpoint();
  store::Checkpoint checkpoint;
  checkpoint.task_id = request.task_id();
  checkpoint.run_id = c.run_id();
  checkpoint.step = c.step();
  checkpoint.tokens = c.tokens();
  checkpoint.path = c.path();
  checkpoint.checksum = c.sha256();
  checkpoint.kind = c.branch_point() ? store::CheckpointKind::kBranch
                                     : store::CheckpointKind::kLatest;
  if (c.path().empty())
    return absl::InvalidArgumentError("checkpoint.path: required");
  // A trunk's branch checkpoint names the run it branches for; a worker
  // that did not say which is matched by step to the trunk's branch points.
  if (task.spec.kind == store::TaskKind::kTrunk && c.branch_point() &&
      checkpoint.run_id.empty()) {
    const hlab::v1::Task proto = ToProtoTask(task);
    for (const auto& b : proto.branch_points()) {
      if (b.step() == c.step()) checkpoint.run_id = b.run_id();
    }
    if (checkpoint.run_id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint.run_id: step ", c.step(),
                       " is no branch point of trunk ", task.spec.id));
    }
  }
  return context_->store->RecordCheckpoint(
      checkpoint, static_cast<int>(request.attempt()), context_->clock());
}

absl::Status WorkerServiceImpl::DoComplete(
    const hlab::v1::CompleteRequest& request) {
  HLAB_ASSIGN_OR_RETURN(
      store::Task task,
      HeldTask(request.task_id(), request.attempt(), request.worker_id()));
  const int attempt = static_cast<int>(request.attempt());
  if (task.spec.kind == store::TaskKind::kEval) {
    const int64_t step = ToProtoTask(task).eval_step();
    std::vector<store::EvalResult> evals;
    for (const auto& p : request.results()) {
      store::EvalResult& eval = evals.emplace_back();
      eval.run_id = p.run_id();
      eval.step = p.step() > 0 ? p.step() : step;
      // As hlab-eval names it ("niah_acc/single" included).
      eval.metric = p.name();
      eval.value = p.value();
      if (eval.metric.empty()) {
        return absl::InvalidArgumentError("results: a result without a name");
      }
      if (!p.details_json().empty()) {
        json details = json::parse(p.details_json(), nullptr, false);
        if (!details.is_object()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "results: details_json of ", p.name(), " is not a JSON object"));
        }
        eval.details = details.dump();
      }
    }
    for (const store::EvalResult& eval : evals) {
      HLAB_RETURN_IF_ERROR(
          context_->store->RecordEval(request.task_id(), attempt, eval));
    }
  } else if (request.results_size() > 0) {
    std::vector<store::MetricPoint> points;
    for (const auto& p : request.results()) points.push_back(FromProto(p));
    HLAB_RETURN_IF_ERROR(context_->store->RecordMetrics(
        request.task_id(), attempt, points, context_->clock()));
  }
  HLAB_RETURN_IF_ERROR(context_->store->CompleteTask(request.task_id(), attempt,
                                                     context_->clock()));
  HLAB_LOG(INFO) << "task " << request.task_id() << " attempt " << attempt
                 << " succeeded";
  task_specs_.Forget(request.task_id());
  ForgetFinishedRuns(task);
  return absl::OkStatus();
}

absl::Status WorkerServiceImpl::DoFail(const hlab::v1::FailRequest& request,
                                       hlab::v1::FailResponse* response) {
  HLAB_ASSIGN_OR_RETURN(
      store::Task task,
      HeldTask(request.task_id(), request.attempt(), request.worker_id()));
  // A worker older than fault classes sends UNSPECIFIED: a task error, as
  // every failure was before.
  const bool infra = request.fault() == hlab::v1::FAULT_CLASS_INFRASTRUCTURE;
  store::AttemptFailure failure;
  failure.fault =
      infra ? store::FaultClass::kInfrastructure : store::FaultClass::kTask;
  failure.retryable = infra || request.retryable();
  failure.error = request.error();
  if (request.exit_code() != 0) {
    failure.error =
        absl::StrCat("exit code ", request.exit_code(), ": ", failure.error);
  }
  // Each class backs off by its own count, so that faults of the node do
  // not lengthen the wait after the task's first own error and vice versa.
  const absl::Duration backoff = context_->catalog->Backoff(
      task.spec.sweep_id, infra ? task.infra_failures + 1 : task.failures + 1);
  HLAB_ASSIGN_OR_RETURN(
      store::TaskState state,
      context_->store->FailTask(request.task_id(),
                                static_cast<int>(request.attempt()), failure,
                                context_->clock(), backoff));
  response->set_will_retry(state == store::TaskState::kPending);
  if (response->will_retry() && context_->metrics != nullptr) {
    context_->metrics->CountRetry(infra);
  }
  HLAB_LOG(INFO) << "task " << request.task_id() << " attempt "
                 << request.attempt() << " failed ("
                 << (infra ? "infrastructure" : "task error") << ", "
                 << (response->will_retry() ? "will retry" : "for good")
                 << "): " << failure.error;
  if (!response->will_retry()) task_specs_.Forget(request.task_id());
  ForgetFinishedRuns(task);
  return absl::OkStatus();
}

absl::Status WorkerServiceImpl::DoDeregister(
    const hlab::v1::DeregisterRequest& request,
    hlab::v1::DeregisterResponse* response) {
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError("worker_id: required");
  }
  HLAB_ASSIGN_OR_RETURN(
      std::vector<store::ExpiredLease> requeued,
      context_->store->DeregisterWorker(request.worker_id(), context_->clock(),
                                        context_->expiry_backoff));
  for (const store::ExpiredLease& e : requeued) {
    HLAB_LOG(WARNING) << "worker " << request.worker_id() << " left holding "
                      << e.task_id << " attempt " << e.attempt << "; "
                      << (e.requeued ? "requeued" : "out of attempts");
    if (e.requeued && context_->metrics != nullptr) {
      context_->metrics->CountRetry(/*infrastructure=*/true);
    }
  }
  response->set_requeued(static_cast<int32_t>(requeued.size()));
  HLAB_LOG(INFO) << "worker " << request.worker_id() << " deregistered";
  return absl::OkStatus();
}

}  // namespace hlab::coordinator
