#include "tests/worker/fake_coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/store_unavailable.h"

namespace hlab::worker::testing {

std::vector<hlab::v1::MetricPoint> FakeState::Points(
    const std::string& name) const {
  std::vector<hlab::v1::MetricPoint> out;
  for (const auto& p : points) {
    if (p.name() == name) out.push_back(p);
  }
  return out;
}

bool FakeState::Failed(const std::string& task_id) const {
  return std::any_of(fails.begin(), fails.end(),
                     [&](const auto& f) { return f.task_id() == task_id; });
}

bool FakeState::Completed(const std::string& task_id) const {
  return std::any_of(completes.begin(), completes.end(),
                     [&](const auto& c) { return c.task_id() == task_id; });
}

void FakeCoordinator::AddTask(const hlab::v1::Task& task) {
  absl::MutexLock lock(&mu_);
  state_.queue.push_back(task);
}

void FakeCoordinator::StopTask(const std::string& task_id, int64_t attempt) {
  absl::MutexLock lock(&mu_);
  hlab::v1::TaskProgress stop;
  stop.set_task_id(task_id);
  stop.set_attempt(attempt);
  state_.stop.push_back(stop);
}

void FakeCoordinator::FenceTask(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  fenced_.push_back(task_id);
}

void FakeCoordinator::RefuseWrites(int n) {
  absl::MutexLock lock(&mu_);
  refuse_writes_ = n;
}

grpc::Status FakeCoordinator::Refusal() {
  if (refuse_writes_ == 0) return grpc::Status::OK;
  --refuse_writes_;
  ++state_.refused;
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      std::string(kStoreNotWritable) +
                          ": database /tmp/hlab.db cannot be written (disk "
                          "full): database or disk is full");
}

bool FakeCoordinator::IsFenced(const std::string& task_id) const {
  return std::find(fenced_.begin(), fenced_.end(), task_id) != fenced_.end();
}

bool FakeCoordinator::WaitFor(const std::function<bool(const FakeState&)>& pred,
                              absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  struct Args {
    const std::function<bool(const FakeState&)>* pred;
    const FakeState* state;
  } args{&pred, &state_};
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Args* a) { return (*a->pred)(*a->state); }, &args),
      timeout);
}

FakeState FakeCoordinator::Snapshot() {
  absl::MutexLock lock(&mu_);
  return state_;
}

void FakeCoordinator::NoteAuth(grpc::ServerContext* context) {
  const auto& md = context->client_metadata();
  auto it = md.find("authorization");
  state_.authorization.push_back(
      it == md.end() ? "" : std::string(it->second.data(), it->second.size()));
}

grpc::Status FakeCoordinator::Register(grpc::ServerContext* context,
                                       const hlab::v1::RegisterRequest* request,
                                       hlab::v1::RegisterResponse* response) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  state_.registers.push_back(*request);
  response->set_worker_id(request->worker_id().empty() ? "assigned-1"
                                                       : request->worker_id());
  response->set_heartbeat_interval_ms(100);
  response->set_lease_ms(30000);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Heartbeat(
    grpc::ServerContext* context, const hlab::v1::HeartbeatRequest* request,
    hlab::v1::HeartbeatResponse* response) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  state_.heartbeats.push_back(*request);
  for (const auto& s : state_.stop) *response->add_stop() = s;
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Lease(grpc::ServerContext* context,
                                    const hlab::v1::LeaseRequest* request,
                                    hlab::v1::LeaseResponse* response) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  state_.leases.push_back(*request);
  ++state_.leases_in_flight;
  const absl::Duration wait =
      std::min(absl::Milliseconds(request->wait_ms()), absl::Milliseconds(100));
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](FakeState* s) { return !s->queue.empty(); }, &state_),
      wait);
  --state_.leases_in_flight;
  // A poll its worker gave up on (a daemon that stopped) takes no task:
  // the task would go to an attempt nobody runs.
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "lease call cancelled");
  }
  if (state_.queue.empty()) return grpc::Status::OK;
  *response->mutable_task() = state_.queue.front();
  state_.queue.pop_front();
  ++state_.handed_out;
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::ReportMetrics(
    grpc::ServerContext* context, const hlab::v1::ReportMetricsRequest* request,
    hlab::v1::ReportMetricsResponse* response) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  if (IsFenced(request->task_id())) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stale attempt");
  }
  if (grpc::Status refused = Refusal(); !refused.ok()) return refused;
  for (const auto& p : request->points()) state_.points.push_back(p);
  response->set_accepted(request->points_size());
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::ReportCheckpoint(
    grpc::ServerContext* context,
    const hlab::v1::ReportCheckpointRequest* request,
    hlab::v1::ReportCheckpointResponse* /*response*/) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  if (IsFenced(request->task_id())) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stale attempt");
  }
  if (grpc::Status refused = Refusal(); !refused.ok()) return refused;
  state_.checkpoints.push_back(*request);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Complete(
    grpc::ServerContext* context, const hlab::v1::CompleteRequest* request,
    hlab::v1::CompleteResponse* /*response*/) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  if (IsFenced(request->task_id())) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stale attempt");
  }
  state_.completes.push_back(*request);
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Fail(grpc::ServerContext* context,
                                   const hlab::v1::FailRequest* request,
                                   hlab::v1::FailResponse* response) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  if (IsFenced(request->task_id())) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "stale attempt");
  }
  state_.fails.push_back(*request);
  response->set_will_retry(request->retryable());
  return grpc::Status::OK;
}

grpc::Status FakeCoordinator::Deregister(
    grpc::ServerContext* context, const hlab::v1::DeregisterRequest* request,
    hlab::v1::DeregisterResponse* /*response*/) {
  absl::MutexLock lock(&mu_);
  NoteAuth(context);
  state_.deregisters.push_back(*request);
  return grpc::Status::OK;
}

FakeServer::FakeServer(std::unique_ptr<FakeCoordinator> fake, int port,
                       std::shared_ptr<grpc::ServerCredentials> credentials)
    : fake_(std::move(fake)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), credentials,
                           &port_);
  builder.RegisterService(fake_.get());
  server_ = builder.BuildAndStart();
}

FakeServer::~FakeServer() { Shutdown(); }

std::string FakeServer::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

void FakeServer::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

}  // namespace hlab::worker::testing
