// The one conversion between absl::Status and grpc::Status, used at the RPC
// boundary of the coordinator's services (and by its tests and clients).
//
// Codes map one to one (absl's codes are gRPC's); the message is kept.
//
// Thread-safe (pure functions).
//
//   absl::StatusOr<Sweep> sweep = LoadSweep(...);
//   if (!sweep.ok()) return reactor->Finish(ToGrpcStatus(sweep.status()));
#ifndef HLAB_COORDINATOR_STATUS_CONVERT_H_
#define HLAB_COORDINATOR_STATUS_CONVERT_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace hlab::coordinator {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_STATUS_CONVERT_H_
