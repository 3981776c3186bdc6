#include "coordinator/server/grpc_metrics.h"

#include <string>

#include "absl/status/status.h"
#include "proto/grpc_status.h"

namespace hlab::coordinator {
namespace {

using grpc::experimental::InterceptionHookPoints;

class HandledInterceptor final : public grpc::experimental::Interceptor {
 public:
  HandledInterceptor(grpc::experimental::ServerRpcInfo* info,
                     CoordinatorMetrics* metrics)
      : method_(info->method() ? info->method() : "unknown"),
        metrics_(metrics) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      // gRPC's and absl's codes are the same numbers.
      metrics_->RpcHandled(
          method_, absl::StatusCodeToString(FromGrpcCode(status.error_code())));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  CoordinatorMetrics* const metrics_;
};

class HandledFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit HandledFactory(CoordinatorMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new HandledInterceptor(info, metrics_);
  }

 private:
  CoordinatorMetrics* const metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
HandledCallsCounter(CoordinatorMetrics* metrics) {
  return std::make_unique<HandledFactory>(metrics);
}

}  // namespace hlab::coordinator
