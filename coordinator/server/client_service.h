// ClientServiceImpl: the client API of hlab-coordinator (what `hlab` calls),
// over the store (proto/hlab/v1/client_service.proto, docs/api.md).
//
//   SubmitSweep  parse-free: the spec arrives as a proto; validate + plan
//                (coordinator/sweep), then CreateSweep/AddRuns/AddTasks.
//                Idempotent by request_id and spec hash; a bad spec is
//                INVALID_ARGUMENT naming the field and writes nothing.
//                A LongPPL reference run_id must name a run whose training
//                has finished (eval_inputs.h).
//   GetSweep, ListRuns, ListWorkers, Query (read-only QueryEngine),
//   Cancel, Resume, WatchSweep (a server stream, watch_reactor.h),
//   EvaluateRun (an on-demand EVAL task, evaluate_run.h), DrainWorker.
// Roles (auth.h): read for Get/List/Watch/Query, submit for
// Submit/Cancel/Resume/EvaluateRun, admin for DrainWorker.
//
// Handlers are thin: each checks the caller's role, runs one Do* method
// returning absl::Status, and finishes with ToGrpcStatus.
//
// Thread-safety: thread-safe; the unary handlers run on the client API's
// HandlerPool (ServiceContext::client_handlers), so a slow query never
// holds a gRPC thread; WatchSweep is a reactor of its own.
//
//   ClientServiceImpl service(&context);
//   builder.RegisterService(&service);
#ifndef HLAB_COORDINATOR_SERVER_CLIENT_SERVICE_H_
#define HLAB_COORDINATOR_SERVER_CLIENT_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "coordinator/server/context.h"
#include "hlab/v1/client_service.grpc.pb.h"

namespace hlab::coordinator {

class ClientServiceImpl final
    : public hlab::v1::ClientService::CallbackService {
 public:
  explicit ClientServiceImpl(ServiceContext* context) : context_(context) {}

  grpc::ServerUnaryReactor* SubmitSweep(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::SubmitSweepRequest* request,
      hlab::v1::SubmitSweepResponse* response) override;
  grpc::ServerUnaryReactor* GetSweep(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::GetSweepRequest* request,
      hlab::v1::GetSweepResponse* response) override;
  grpc::ServerUnaryReactor* ListRuns(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::ListRunsRequest* request,
      hlab::v1::ListRunsResponse* response) override;
  grpc::ServerWriteReactor<hlab::v1::Event>* WatchSweep(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::WatchSweepRequest* request) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const hlab::v1::CancelRequest* request,
                                   hlab::v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* Resume(grpc::CallbackServerContext* ctx,
                                   const hlab::v1::ResumeRequest* request,
                                   hlab::v1::ResumeResponse* response) override;
  grpc::ServerUnaryReactor* Query(grpc::CallbackServerContext* ctx,
                                  const hlab::v1::QueryRequest* request,
                                  hlab::v1::QueryResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::ListWorkersRequest* request,
      hlab::v1::ListWorkersResponse* response) override;
  grpc::ServerUnaryReactor* DrainWorker(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::DrainWorkerRequest* request,
      hlab::v1::DrainWorkerResponse* response) override;
  grpc::ServerUnaryReactor* EvaluateRun(
      grpc::CallbackServerContext* ctx,
      const hlab::v1::EvaluateRunRequest* request,
      hlab::v1::EvaluateRunResponse* response) override;

 private:
  absl::Status DoSubmitSweep(const hlab::v1::SubmitSweepRequest& request,
                             hlab::v1::SubmitSweepResponse* response);
  absl::Status DoGetSweep(const hlab::v1::GetSweepRequest& request,
                          hlab::v1::GetSweepResponse* response);
  absl::Status DoListRuns(const hlab::v1::ListRunsRequest& request,
                          hlab::v1::ListRunsResponse* response);
  absl::Status DoCancel(const hlab::v1::CancelRequest& request,
                        hlab::v1::CancelResponse* response);
  absl::Status DoResume(const hlab::v1::ResumeRequest& request,
                        hlab::v1::ResumeResponse* response);
  absl::Status DoQuery(const hlab::v1::QueryRequest& request,
                       hlab::v1::QueryResponse* response);
  absl::Status DoListWorkers(const hlab::v1::ListWorkersRequest& request,
                             hlab::v1::ListWorkersResponse* response);
  absl::Status DoDrainWorker(const hlab::v1::DrainWorkerRequest& request,
                             hlab::v1::DrainWorkerResponse* response);
  // `worker` as the API shows it, with the tasks it holds.
  absl::StatusOr<hlab::v1::Worker> WorkerWithTasks(
      const store::WorkerInfo& worker);

  ServiceContext* const context_;
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_CLIENT_SERVICE_H_
