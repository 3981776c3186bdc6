// The one conversion between absl::Status and grpc::Status, at every RPC
// boundary: the coordinator's services, the worker's and the CLI's calls,
// the gRPC metrics.
//
// Codes map one to one (absl's codes are gRPC's); the message is kept.
//
// Thread-safe (pure functions).
//
//   absl::StatusOr<Sweep> sweep = LoadSweep(...);
//   if (!sweep.ok()) return reactor->Finish(ToGrpcStatus(sweep.status()));
//   absl::Status s = FromGrpcStatus(stub->Lease(&ctx, request, &response));
#ifndef HLAB_PROTO_GRPC_STATUS_H_
#define HLAB_PROTO_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace hlab {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);
// The code alone (for a message of the caller's own).
absl::StatusCode FromGrpcCode(grpc::StatusCode code);

}  // namespace hlab

#endif  // HLAB_PROTO_GRPC_STATUS_H_
