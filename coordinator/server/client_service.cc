#include "coordinator/server/client_service.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/planning/eval_inputs.h"
#include "coordinator/planning/evaluate_run.h"
#include "coordinator/planning/proto_mapping.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/server/adaptive_order.h"
#include "coordinator/server/handler_pool.h"
#include "coordinator/server/watch_reactor.h"
#include "coordinator/sweep/dry_run.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_parser.h"
#include "proto/grpc_status.h"

namespace hlab::coordinator {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The trunk a task belongs to, for the store's trunk_group column: a
// TRUNK's own id (a later segment's: its chain's first, which it depends
// on), a DECAY's first dependency's group. `groups` holds those of the
// plan's earlier tasks (a task comes after those it depends on).
std::string TrunkGroup(const hlab::v1::Task& task,
                       std::map<std::string, std::string>& groups) {
  if (task.kind() != hlab::v1::TASK_KIND_TRUNK &&
      task.kind() != hlab::v1::TASK_KIND_DECAY) {
    return "";
  }
  std::string group =
      task.kind() == hlab::v1::TASK_KIND_TRUNK ? task.task_id() : std::string();
  if (task.depends_on_size() > 0) {
    auto it = groups.find(task.depends_on(0));
    group = it != groups.end() ? it->second : task.depends_on(0);
  }
  if (task.kind() == hlab::v1::TASK_KIND_TRUNK) groups[task.task_id()] = group;
  return group;
}

bool Unfinished(store::RunState state) {
  return state == store::RunState::kPending ||
         state == store::RunState::kRunning;
}

}  // namespace

// ------------------------------------------------------------- handlers

#define HLAB_AUTHORIZE(ctx, role)                               \
  do {                                                          \
    absl::Status auth_status =                                  \
        context_->auth.Check((ctx)->client_metadata(), (role)); \
    if (!auth_status.ok()) return Finish((ctx), auth_status);   \
  } while (false)

grpc::ServerUnaryReactor* ClientServiceImpl::SubmitSweep(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::SubmitSweepRequest* request,
    hlab::v1::SubmitSweepResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kSubmit);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoSubmitSweep(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::GetSweep(
    grpc::CallbackServerContext* ctx, const hlab::v1::GetSweepRequest* request,
    hlab::v1::GetSweepResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kRead);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoGetSweep(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::ListRuns(
    grpc::CallbackServerContext* ctx, const hlab::v1::ListRunsRequest* request,
    hlab::v1::ListRunsResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kRead);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoListRuns(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::Cancel(
    grpc::CallbackServerContext* ctx, const hlab::v1::CancelRequest* request,
    hlab::v1::CancelResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kSubmit);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoCancel(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::Resume(
    grpc::CallbackServerContext* ctx, const hlab::v1::ResumeRequest* request,
    hlab::v1::ResumeResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kSubmit);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoResume(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::Query(
    grpc::CallbackServerContext* ctx, const hlab::v1::QueryRequest* request,
    hlab::v1::QueryResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kRead);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoQuery(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::ListWorkers(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::ListWorkersRequest* request,
    hlab::v1::ListWorkersResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kRead);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoListWorkers(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::DrainWorker(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::DrainWorkerRequest* request,
    hlab::v1::DrainWorkerResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kAdmin);
  return AnswerOnPool(
      context_->client_handlers, ctx,
      [this, request, response] { return DoDrainWorker(*request, response); });
}

grpc::ServerUnaryReactor* ClientServiceImpl::EvaluateRun(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::EvaluateRunRequest* request,
    hlab::v1::EvaluateRunResponse* response) {
  HLAB_AUTHORIZE(ctx, Role::kSubmit);
  return AnswerOnPool(
      context_->client_handlers, ctx, [this, request, response] {
        return coordinator::EvaluateRun(*context_->store, *context_->query,
                                        *context_->catalog, context_->clock(),
                                        *request, response);
      });
}

grpc::ServerWriteReactor<hlab::v1::Event>* ClientServiceImpl::WatchSweep(
    grpc::CallbackServerContext* ctx,
    const hlab::v1::WatchSweepRequest* request) {
  absl::Status status =
      context_->auth.Check(ctx->client_metadata(), Role::kRead);
  int64_t sweep_id = 0;
  if (status.ok() && !request->sweep().empty()) {
    absl::StatusOr<store::Sweep> sweep =
        context_->catalog->Resolve(request->sweep());
    if (sweep.ok()) {
      sweep_id = sweep->id;
    } else {
      status = sweep.status();
    }
  }
  if (!status.ok()) return new FailedWatchReactor(ToGrpcStatus(status));
  return new WatchReactor(context_, sweep_id, request->after_sequence(),
                          request->until_done() && sweep_id != 0);
}

#undef HLAB_AUTHORIZE

// -------------------------------------------------------------- methods

absl::Status ClientServiceImpl::DoSubmitSweep(
    const hlab::v1::SubmitSweepRequest& request,
    hlab::v1::SubmitSweepResponse* response) {
  HLAB_ASSIGN_OR_RETURN(sweep::SweepPlan plan,
                        sweep::PlanSweep(request.spec()));
  HLAB_RETURN_IF_ERROR(CheckReferenceRun(*context_->store, plan.spec));
  if (request.dry_run()) {
    *response = sweep::DryRunResponse(plan);
    return absl::OkStatus();
  }
  store::Store& store = *context_->store;
  const absl::Time now = context_->clock();
  // A retried request (same request_id) returns its sweep.
  if (!request.request_id().empty()) {
    HLAB_ASSIGN_OR_RETURN(std::vector<store::Sweep> sweeps, store.ListSweeps());
    for (const store::Sweep& s : sweeps) {
      if (s.spec.request_id != request.request_id()) continue;
      if (s.spec.spec_hash != plan.spec_hash) {
        return absl::AlreadyExistsError(
            absl::StrCat("request_id: '", request.request_id(),
                         "' was used for sweep ", s.id, " with another spec"));
      }
    }
  }
  store::SweepSpec stored;
  stored.name = plan.spec.name();
  stored.spec_hash = plan.spec_hash;
  stored.request_id = request.request_id();
  stored.spec = sweep::SweepSpecToCanonicalJson(plan.spec);
  stored.max_retries = plan.spec.retry().max_retries_per_sweep();
  HLAB_ASSIGN_OR_RETURN(store::CreateSweepResult created,
                        store.CreateSweep(stored, now));
  // Runs already finished in another sweep are reused, not trained again.
  std::vector<std::string> reused;
  for (const hlab::v1::Run& run : plan.runs) {
    if (!created.created) break;
    absl::StatusOr<store::Run> existing = store.GetRun(run.run_id());
    if (existing.ok() && existing->state == store::RunState::kSucceeded) {
      reused.push_back(run.run_id());
    }
  }
  // Always (re)add runs and tasks: both are idempotent, and this completes a
  // submit that died between CreateSweep and AddTasks.
  std::vector<store::RunSpec> runs;
  for (const hlab::v1::Run& run : plan.runs) {
    runs.push_back(ToRunSpec(run, plan.spec.retry().max_attempts_per_run()));
  }
  HLAB_RETURN_IF_ERROR(store.AddRuns(created.sweep_id, runs, now).status());
  std::vector<store::TaskSpec> tasks;
  std::map<std::string, std::string> groups;
  for (const hlab::v1::Task& task : plan.tasks) {
    tasks.push_back(
        ToTaskSpec(task, created.sweep_id, TrunkGroup(task, groups)));
    // Every task follows the spec's policy, a shared trunk (no run) too.
    tasks.back().max_attempts = plan.spec.retry().max_attempts_per_run();
  }
  HLAB_RETURN_IF_ERROR(store.AddTasks(tasks, now).status());
  auto shared = std::make_shared<const sweep::SweepPlan>(std::move(plan));
  context_->catalog->Remember(created.sweep_id, shared);
  // The adaptive order's seeds, before a worker leases by cost; the fit
  // thread ranks it again as runs finish. The submit stands without it.
  if (absl::StatusOr<int> ordered =
          OrderAdaptiveSweep(*context_, created.sweep_id);
      !ordered.ok()) {
    HLAB_LOG(WARNING) << "sweep " << created.sweep_id
                      << ": adaptive order: " << ordered.status();
  }

  HLAB_ASSIGN_OR_RETURN(store::Sweep sweep, store.GetSweep(created.sweep_id));
  HLAB_ASSIGN_OR_RETURN(*response->mutable_sweep(),
                        context_->catalog->SweepProto(sweep));
  response->set_created(created.created);
  store::RunFilter filter;
  filter.sweep_id = created.sweep_id;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> stored_runs,
                        store.ListRuns(filter));
  HLAB_ASSIGN_OR_RETURN(std::vector<hlab::v1::Run> protos,
                        context_->catalog->RunProtos(stored_runs));
  for (auto& r : protos) *response->add_runs() = std::move(r);
  for (const auto& id : reused) response->add_reused_run_ids(id);
  response->set_flops_shared(shared->flops_shared);
  response->set_flops_unshared(shared->flops_unshared);
  response->set_tokens_shared(shared->tokens_shared);
  response->set_tokens_unshared(shared->tokens_unshared);
  HLAB_LOG(INFO) << (created.created ? "created" : "resubmitted") << " sweep "
                 << created.sweep_id << " '" << stored.name
                 << "': " << runs.size() << " runs, " << tasks.size()
                 << " tasks";
  return absl::OkStatus();
}

absl::Status ClientServiceImpl::DoGetSweep(
    const hlab::v1::GetSweepRequest& request,
    hlab::v1::GetSweepResponse* response) {
  HLAB_ASSIGN_OR_RETURN(store::Sweep sweep,
                        context_->catalog->Resolve(request.sweep()));
  HLAB_ASSIGN_OR_RETURN(*response->mutable_sweep(),
                        context_->catalog->SweepProto(sweep));
  return absl::OkStatus();
}

absl::Status ClientServiceImpl::DoListRuns(
    const hlab::v1::ListRunsRequest& request,
    hlab::v1::ListRunsResponse* response) {
  store::RunFilter filter;
  if (!request.sweep().empty()) {
    HLAB_ASSIGN_OR_RETURN(store::Sweep sweep,
                          context_->catalog->Resolve(request.sweep()));
    filter.sweep_id = sweep.id;
  }
  std::set<store::RunState> states;
  for (int s : request.states()) {
    HLAB_ASSIGN_OR_RETURN(store::RunState state,
                          FromProto(static_cast<hlab::v1::RunState>(s)));
    states.insert(state);
  }
  if (states.size() == 1) filter.state = *states.begin();
  filter.arch = request.architecture();
  filter.scale = request.scale();
  int64_t offset = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &offset) || offset < 0)) {
    return absl::InvalidArgumentError("page_token: not a token of ListRuns");
  }
  const int64_t page_size =
      request.page_size() > 0 ? request.page_size() : 1000;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> runs,
                        context_->store->ListRuns(filter));
  std::vector<store::Run> selected;
  for (store::Run& run : runs) {
    if (!states.empty() && states.count(run.state) == 0) continue;
    selected.push_back(std::move(run));
  }
  const int64_t total = static_cast<int64_t>(selected.size());
  const int64_t begin = std::min(offset, total);
  const int64_t end = std::min(begin + page_size, total);
  std::vector<store::Run> page(selected.begin() + begin,
                               selected.begin() + end);
  HLAB_ASSIGN_OR_RETURN(std::vector<hlab::v1::Run> protos,
                        context_->catalog->RunProtos(page));
  for (auto& r : protos) *response->add_runs() = std::move(r);
  if (end < total) response->set_next_page_token(absl::StrCat(end));
  return absl::OkStatus();
}

absl::Status ClientServiceImpl::DoCancel(const hlab::v1::CancelRequest& request,
                                         hlab::v1::CancelResponse* response) {
  store::Store& store = *context_->store;
  const absl::Time now = context_->clock();
  std::vector<store::Run> before;
  if (request.target_case() == hlab::v1::CancelRequest::kSweep) {
    HLAB_ASSIGN_OR_RETURN(store::Sweep sweep,
                          context_->catalog->Resolve(request.sweep()));
    store::RunFilter filter;
    filter.sweep_id = sweep.id;
    HLAB_ASSIGN_OR_RETURN(before, store.ListRuns(filter));
    HLAB_RETURN_IF_ERROR(store.CancelSweep(sweep.id, now).status());
  } else if (request.target_case() == hlab::v1::CancelRequest::kRunId) {
    HLAB_ASSIGN_OR_RETURN(store::Run run, store.GetRun(request.run_id()));
    before.push_back(run);
    HLAB_RETURN_IF_ERROR(store.CancelRun(run.spec.id, now).status());
  } else {
    return absl::InvalidArgumentError("target: give a sweep or a run_id");
  }
  for (const store::Run& run : before) {
    if (!Unfinished(run.state)) continue;
    HLAB_ASSIGN_OR_RETURN(store::Run after, store.GetRun(run.spec.id));
    if (after.state == store::RunState::kCancelled) {
      response->add_run_ids(run.spec.id);
      if (context_->metrics) context_->metrics->RemoveRun(run.spec.id);
    }
  }
  HLAB_LOG(INFO) << "cancelled " << response->run_ids_size() << " runs"
                 << (request.reason().empty() ? "" : ": ") << request.reason();
  return absl::OkStatus();
}

absl::Status ClientServiceImpl::DoResume(const hlab::v1::ResumeRequest& request,
                                         hlab::v1::ResumeResponse* response) {
  store::Store& store = *context_->store;
  const absl::Time now = context_->clock();
  // The ids the store moved, not the runs PENDING after it: a worker may
  // lease a resumed run before they are read again.
  std::vector<std::string> resumed;
  if (request.target_case() == hlab::v1::ResumeRequest::kSweep) {
    HLAB_ASSIGN_OR_RETURN(store::Sweep sweep,
                          context_->catalog->Resolve(request.sweep()));
    HLAB_ASSIGN_OR_RETURN(resumed, store.ResumeSweep(sweep.id, now));
  } else if (request.target_case() == hlab::v1::ResumeRequest::kRunId) {
    HLAB_ASSIGN_OR_RETURN(store::Run run, store.GetRun(request.run_id()));
    HLAB_ASSIGN_OR_RETURN(resumed, store.ResumeRuns({run.spec.id}, now));
  } else {
    return absl::InvalidArgumentError("target: give a sweep or a run_id");
  }
  for (const std::string& id : resumed) response->add_run_ids(id);
  return absl::OkStatus();
}

absl::Status ClientServiceImpl::DoQuery(const hlab::v1::QueryRequest& request,
                                        hlab::v1::QueryResponse* response) {
  store::QueryOptions options;
  options.max_rows = request.max_rows() > 0 ? request.max_rows() : 10000;
  options.time_limit = context_->max_query_time;
  if (request.timeout_ms() > 0) {
    options.time_limit =
        std::min(options.time_limit, absl::Milliseconds(request.timeout_ms()));
  }
  HLAB_ASSIGN_OR_RETURN(store::QueryResult result,
                        context_->query->Run(request.sql(), options));
  for (auto& c : result.columns) response->add_columns(std::move(c));
  for (const auto& row : result.rows) {
    hlab::v1::QueryRow* out = response->add_rows();
    for (const store::Value& v : row) *out->add_values() = ToProto(v);
  }
  response->set_truncated(result.truncated);
  return absl::OkStatus();
}

absl::Status ClientServiceImpl::DoListWorkers(
    const hlab::v1::ListWorkersRequest& request,
    hlab::v1::ListWorkersResponse* response) {
  HLAB_ASSIGN_OR_RETURN(std::vector<store::WorkerInfo> workers,
                        context_->store->ListWorkers());
  for (const store::WorkerInfo& w : workers) {
    if (w.state == store::WorkerState::kLost && !request.include_lost()) {
      continue;
    }
    HLAB_ASSIGN_OR_RETURN(*response->add_workers(), WorkerWithTasks(w));
  }
  return absl::OkStatus();
}

absl::Status ClientServiceImpl::DoDrainWorker(
    const hlab::v1::DrainWorkerRequest& request,
    hlab::v1::DrainWorkerResponse* response) {
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError(
        "worker_id: empty; list workers with `hlab workers`");
  }
  absl::StatusOr<store::WorkerInfo> worker = context_->store->SetWorkerDraining(
      request.worker_id(), !request.undrain(), context_->clock());
  if (absl::IsNotFound(worker.status())) {
    return absl::NotFoundError(
        absl::StrCat("no worker '", request.worker_id(),
                     "'; list workers with `hlab workers --all`"));
  }
  HLAB_RETURN_IF_ERROR(worker.status());
  HLAB_LOG(INFO) << "worker " << request.worker_id()
                 << (request.undrain() ? " undrained" : " draining");
  HLAB_ASSIGN_OR_RETURN(*response->mutable_worker(), WorkerWithTasks(*worker));
  return absl::OkStatus();
}

absl::StatusOr<hlab::v1::Worker> ClientServiceImpl::WorkerWithTasks(
    const store::WorkerInfo& worker) {
  hlab::v1::Worker out = ToProtoWorker(worker);
  store::TaskFilter filter;
  filter.lease_worker = worker.id;
  filter.state = store::TaskState::kLeased;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Task> tasks,
                        context_->store->ListTasks(filter));
  for (const store::Task& t : tasks) out.add_task_ids(t.spec.id);
  return out;
}

}  // namespace hlab::coordinator
