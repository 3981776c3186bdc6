// CoordinatorClient: the worker's side of hlab.v1.WorkerService.
//
// One gRPC channel (which reconnects by itself) and one stub; every call
// carries the bearer token as `authorization: Bearer <token>` metadata and a
// deadline, and returns an absl::Status with the gRPC code and message
// (UNAVAILABLE while the coordinator is down, FAILED_PRECONDITION for a
// stale attempt, UNAUTHENTICATED / PERMISSION_DENIED for a bad token).
// Lease() is a long poll; CancelLeases() ends any in flight at once (used on
// shutdown). With CoordinatorTls.root_certs the channel is TLS (optionally
// with a client certificate, and a server name override for a certificate
// that does not name the address).
//
// Thread-safe: calls may run concurrently from any thread.
//
//   CoordinatorTls tls;
//   tls.root_certs = ca_pem;  // or leave empty for plaintext
//   CoordinatorClient client("127.0.0.1:50151", token, absl::Seconds(10), tls);
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

// TLS to the coordinator (PEM text, not file names). Empty root_certs:
// plaintext.
struct CoordinatorTls {
  std::string root_certs;   // CA(s) of the coordinator's certificate
  std::string cert_chain;   // client certificate (mutual TLS), with
  std::string private_key;  // its key
  std::string server_name;  // expected name in the certificate; empty: the
                            // address's host
};

class CoordinatorClient {
 public:
  // Channel to `address` ("host:port"), plaintext unless `tls` has root
  // certificates. An empty token sends no authorization header.
  CoordinatorClient(const std::string& address, std::string token,
                    absl::Duration rpc_timeout = absl::Seconds(10),
                    const CoordinatorTls& tls = {});

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
  absl::Status Deregister(const hlab::v1::DeregisterRequest& request,
                          hlab::v1::DeregisterResponse* response);

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
