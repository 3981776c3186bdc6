#include "proto/grpc_status.h"

#include <string>

namespace hlab {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::StatusCode FromGrpcCode(grpc::StatusCode code) {
  return static_cast<absl::StatusCode>(code);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(FromGrpcCode(status.error_code()),
                      status.error_message());
}

}  // namespace hlab
