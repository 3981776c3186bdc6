// The generated hlab.v1 code: messages round-trip through the wire format,
// and a client reaches an in-process server through the generated stubs
// (services without handlers answer UNIMPLEMENTED). Binds 127.0.0.1:0.
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "hlab/v1/client_service.grpc.pb.h"
#include "hlab/v1/worker_service.grpc.pb.h"

namespace hlab {
namespace {

TEST(ApiTest, TaskRoundTripsThroughTheWireFormat) {
  v1::Task task;
  task.set_task_id("trunk-0123456789abcdef");
  task.set_kind(v1::TASK_KIND_TRUNK);
  task.add_run_ids("aaaa");
  auto* bp = task.add_branch_points();
  bp->set_run_id("aaaa");
  bp->set_step(90);
  task.set_attempt(3);
  std::string wire;
  ASSERT_TRUE(task.SerializeToString(&wire));
  v1::Task back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.branch_points(0).step(), 90);
  EXPECT_EQ(back.attempt(), 3);
  EXPECT_EQ(back.kind(), v1::TASK_KIND_TRUNK);
}

// A ClientService with one handler, for the stub round trip.
class GetSweepOnly final : public v1::ClientService::CallbackService {
  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* context,
                                     const v1::GetSweepRequest* request,
                                     v1::GetSweepResponse* response) override {
    response->mutable_sweep()->set_sweep_id(request->sweep());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

TEST(ApiTest, StubsReachAnInProcessServer) {
  GetSweepOnly client_service;
  v1::WorkerService::CallbackService worker_service;  // no handlers
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&client_service);
  builder.RegisterService(&worker_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials());

  auto client = v1::ClientService::NewStub(channel);
  grpc::ClientContext get_context;
  v1::GetSweepRequest get;
  get.set_sweep("sweep-1");
  v1::GetSweepResponse got;
  ASSERT_TRUE(client->GetSweep(&get_context, get, &got).ok());
  EXPECT_EQ(got.sweep().sweep_id(), "sweep-1");

  grpc::ClientContext submit_context;
  v1::SubmitSweepResponse submitted;
  EXPECT_EQ(
      client->SubmitSweep(&submit_context, v1::SubmitSweepRequest(), &submitted)
          .error_code(),
      grpc::StatusCode::UNIMPLEMENTED);

  auto worker = v1::WorkerService::NewStub(channel);
  grpc::ClientContext lease_context;
  v1::LeaseResponse leased;
  EXPECT_EQ(
      worker->Lease(&lease_context, v1::LeaseRequest(), &leased).error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
  server->Shutdown();
}

}  // namespace
}  // namespace hlab
