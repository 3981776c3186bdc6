// A gRPC server interceptor that counts every finished call in
// hlab_grpc_server_handled_total{method,code} (CoordinatorMetrics), so the
// dashboard and alerts see gRPC errors without touching the services.
//
// Thread-safety: thread-safe (one interceptor per call; the counters are
// CoordinatorMetrics').
//
//   std::vector<std::unique_ptr<
//       grpc::experimental::ServerInterceptorFactoryInterface>> creators;
//   creators.push_back(HandledCallsCounter(metrics));
//   builder.experimental().SetInterceptorCreators(std::move(creators));
#ifndef HLAB_COORDINATOR_SERVER_GRPC_METRICS_H_
#define HLAB_COORDINATOR_SERVER_GRPC_METRICS_H_

#include <memory>

#include <grpcpp/support/server_interceptor.h>

#include "coordinator/server/metrics.h"

namespace hlab::coordinator {

// `metrics` must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
HandledCallsCounter(CoordinatorMetrics* metrics);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_GRPC_METRICS_H_
