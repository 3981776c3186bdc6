// CoordinatorClient: the worker's side of hlab.v1.WorkerService.
//
// One gRPC channel (which reconnects by itself) and one stub; every call
// carries the bearer token as `authorization: Bearer <token>` metadata and a
// deadline, and returns an absl::Status with the gRPC code and message
// (UNAVAILABLE while the coordinator is down, FAILED_PRECONDITION for a
// stale attempt, UNAUTHENTICATED / PERMISSION_DENIED for a bad token).
// Lease() is a long poll; CancelLeases() ends any in flight at once (used on
// shutdown).
//
// Thread-safe: calls may run concurrently from any thread.
//
//   CoordinatorClient client("127.0.0.1:50151", token);
//   hlab::v1::RegisterResponse reply;
//   HLAB_RETURN_IF_ERROR(client.Register(request, &reply));
#ifndef HLAB_WORKER_COORDINATOR_CLIENT_H_
#define HLAB_WORKER_COORDINATOR_CLIENT_H_

#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "hlab/v1/worker_service.grpc.pb.h"

namespace hlab::worker {

// The absl::Status for a gRPC status (same code and message).
absl::Status FromGrpc(const grpc::Status& status);

class CoordinatorClient {
 public:
  // Channel to `address` ("host:port"): TLS when `tls_root_certs` (PEM CA
  // certificates that sign the coordinator's certificate) is given, else
  // plaintext. An empty token sends no authorization header.
  CoordinatorClient(const std::string& address, std::string token,
                    absl::Duration rpc_timeout = absl::Seconds(10),
                    const std::string& tls_root_certs = "");

  absl::Status Register(const hlab::v1::RegisterRequest& request,
                        hlab::v1::RegisterResponse* response);
  absl::Status Heartbeat(const hlab::v1::HeartbeatRequest& request,
                         hlab::v1::HeartbeatResponse* response);
  // Deadline: the request's wait_ms plus the RPC timeout.
  absl::Status Lease(const hlab::v1::LeaseRequest& request,
                     hlab::v1::LeaseResponse* response);
  absl::Status ReportMetrics(const hlab::v1::ReportMetricsRequest& request,
                             hlab::v1::ReportMetricsResponse* response);
  absl::Status ReportCheckpoint(
      const hlab::v1::ReportCheckpointRequest& request,
      hlab::v1::ReportCheckpointResponse* response);
  absl::Status Complete(const hlab::v1::CompleteRequest& request,
                        hlab::v1::CompleteResponse* response);
  absl::Status Fail(const hlab::v1::FailRequest& request,
                    hlab::v1::FailResponse* response);

  // Cancels Lease calls in flight, and makes later ones return CANCELLED at
  // once.
  void CancelLeases();

 private:
  void Prepare(grpc::ClientContext* context, absl::Duration timeout) const;

  const std::string token_;
  const absl::Duration rpc_timeout_;
  std::unique_ptr<hlab::v1::WorkerService::Stub> stub_;

  absl::Mutex mu_;
  std::set<grpc::ClientContext*> leases_ ABSL_GUARDED_BY(mu_);
  bool leases_cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hlab::worker

#endif  // HLAB_WORKER_COORDINATOR_CLIENT_H_
