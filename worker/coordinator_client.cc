#include "worker/coordinator_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "proto/grpc_status.h"

namespace hlab::worker {

namespace {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const CoordinatorTls& tls) {
  grpc::ChannelArguments args;
  // Keepalive as orchestration.md suggests; reconnect quickly after a
  // coordinator restart (gRPC's default backoff grows to 120 s).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (tls.root_certs.empty()) {
    return grpc::CreateCustomChannel(address,
                                     grpc::InsecureChannelCredentials(), args);
  }
  if (!tls.server_name.empty()) args.SetSslTargetNameOverride(tls.server_name);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls.root_certs;
  ssl.pem_cert_chain = tls.cert_chain;
  ssl.pem_private_key = tls.private_key;
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

}  // namespace

CoordinatorClient::CoordinatorClient(const std::string& address,
                                     std::string token,
                                     absl::Duration rpc_timeout,
                                     const CoordinatorTls& tls)
    : token_(std::move(token)),
      rpc_timeout_(rpc_timeout),
      stub_(hlab::v1::WorkerService::NewStub(MakeChannel(address, tls))) {}

void CoordinatorClient::Prepare(grpc::ClientContext* context,
                                absl::Duration timeout) const {
  if (!token_.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  }
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(timeout));
}

#define HLAB_WORKER_UNARY(Method, Request, Response)                       \
  absl::Status CoordinatorClient::Method(const hlab::v1::Request& request, \
                                         hlab::v1::Response* response) {   \
    grpc::ClientContext context;                                           \
    Prepare(&context, rpc_timeout_);                                       \
    return FromGrpcStatus(stub_->Method(&context, request, response));     \
  }

HLAB_WORKER_UNARY(Register, RegisterRequest, RegisterResponse)
HLAB_WORKER_UNARY(Heartbeat, HeartbeatRequest, HeartbeatResponse)
HLAB_WORKER_UNARY(ReportMetrics, ReportMetricsRequest, ReportMetricsResponse)
HLAB_WORKER_UNARY(ReportCheckpoint, ReportCheckpointRequest,
                  ReportCheckpointResponse)
HLAB_WORKER_UNARY(Complete, CompleteRequest, CompleteResponse)
HLAB_WORKER_UNARY(Fail, FailRequest, FailResponse)
HLAB_WORKER_UNARY(Deregister, DeregisterRequest, DeregisterResponse)

#undef HLAB_WORKER_UNARY

absl::Status CoordinatorClient::Lease(const hlab::v1::LeaseRequest& request,
                                      hlab::v1::LeaseResponse* response) {
  grpc::ClientContext context;
  Prepare(&context, absl::Milliseconds(request.wait_ms()) + rpc_timeout_);
  {
    absl::MutexLock lock(&mu_);
    if (leases_cancelled_) return absl::CancelledError("worker stopping");
    leases_.insert(&context);
  }
  grpc::Status status = stub_->Lease(&context, request, response);
  absl::MutexLock lock(&mu_);
  leases_.erase(&context);
  return FromGrpcStatus(status);
}

void CoordinatorClient::CancelLeases() {
  absl::MutexLock lock(&mu_);
  leases_cancelled_ = true;
  for (grpc::ClientContext* context : leases_) context->TryCancel();
}

}  // namespace hlab::worker
