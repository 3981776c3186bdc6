// Tokens and roles, listening rules, and the Prometheus endpoint.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "coordinator/server/auth.h"
#include "coordinator/server/coordinator.h"
#include "tests/coordinator/server/coordinator_test_util.h"

namespace hlab::coordinator {
namespace {

using testing::FakeClock;
using testing::TempDir;

// GET /metrics over a plain socket; the whole response.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

TEST(AuthorizerTest, ParsesTokensFileAndChecksRoles) {
  auto auth = Authorizer::FromText(
      "# role token\nadmin a1\nread r1\n\nsubmit s1  # comment\nworker w1\n");
  ASSERT_TRUE(auth.ok()) << auth.status();
  std::multimap<grpc::string_ref, grpc::string_ref> md;
  EXPECT_EQ(auth->Check(md, Role::kRead).code(),
            absl::StatusCode::kUnauthenticated);
  const std::string bearer_r = "Bearer r1", bearer_s = "Bearer s1",
                    bearer_x = "Bearer nope", bearer_a = "Bearer a1";
  md.emplace("authorization", bearer_r);
  EXPECT_TRUE(auth->Check(md, Role::kRead).ok());
  EXPECT_EQ(auth->Check(md, Role::kSubmit).code(),
            absl::StatusCode::kPermissionDenied);
  md.clear();
  md.emplace("authorization", bearer_s);
  EXPECT_TRUE(auth->Check(md, Role::kRead).ok());
  EXPECT_EQ(auth->Check(md, Role::kWorker).code(),
            absl::StatusCode::kPermissionDenied);
  md.clear();
  md.emplace("authorization", bearer_x);
  EXPECT_EQ(auth->Check(md, Role::kRead).code(),
            absl::StatusCode::kUnauthenticated);
  md.clear();
  md.emplace("authorization", bearer_a);
  EXPECT_TRUE(auth->Check(md, Role::kWorker).ok());

  EXPECT_FALSE(Authorizer::FromText("root x\n").ok());
  EXPECT_FALSE(Authorizer::FromText("read\n").ok());
  EXPECT_FALSE(Authorizer::FromText("read x\nadmin x\n").ok());
  EXPECT_FALSE(Authorizer::FromText("# nothing\n").ok());
}

class SecureCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tokens = dir_.File("tokens");
    std::ofstream(tokens) << "read r-token\nsubmit s-token\nworker w-token\n";
    CoordinatorOptions options =
        testing::TestOptions(dir_.File("hlab.db"), &clock_);
    options.tokens_file = tokens;
    options.metrics_listen = "127.0.0.1:0";
    coordinator_ = testing::StartOrDie(options);
    ASSERT_NE(coordinator_, nullptr);
    auto channel = testing::Connect(*coordinator_);
    client_ = hlab::v1::ClientService::NewStub(channel);
    worker_ = hlab::v1::WorkerService::NewStub(channel);
  }

  grpc::StatusCode Submit(const std::string& token) {
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    hlab::v1::SubmitSweepRequest request;
    *request.mutable_spec() = testing::Spec(testing::TinySpecYaml("sec"));
    hlab::v1::SubmitSweepResponse response;
    return client_->SubmitSweep(&ctx, request, &response).error_code();
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<hlab::v1::ClientService::Stub> client_;
  std::unique_ptr<hlab::v1::WorkerService::Stub> worker_;
};

TEST_F(SecureCoordinatorTest, TokensAndRolesGuardEveryRpc) {
  EXPECT_EQ(Submit(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Submit("wrong"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Submit("r-token"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Submit("w-token"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Submit("s-token"), grpc::StatusCode::OK);
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer r-token");
    hlab::v1::ListRunsRequest request;
    hlab::v1::ListRunsResponse response;
    EXPECT_TRUE(client_->ListRuns(&ctx, request, &response).ok());
    EXPECT_EQ(response.runs_size(), 1);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer r-token");
    hlab::v1::RegisterRequest request;
    request.set_worker_id("w");
    hlab::v1::RegisterResponse response;
    EXPECT_EQ(worker_->Register(&ctx, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer w-token");
    hlab::v1::RegisterRequest request;
    request.set_worker_id("w");
    hlab::v1::RegisterResponse response;
    EXPECT_TRUE(worker_->Register(&ctx, request, &response).ok());
  }
  // Draining a worker is the admin's: submit may not, and changes nothing.
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer s-token");
    hlab::v1::DrainWorkerRequest request;
    request.set_worker_id("w");
    hlab::v1::DrainWorkerResponse response;
    EXPECT_EQ(client_->DrainWorker(&ctx, request, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_FALSE(coordinator_->context()->store->WorkerDraining("w"));
  }
  {
    grpc::ClientContext ctx;
    hlab::v1::WatchSweepRequest request;
    auto reader = client_->WatchSweep(&ctx, request);
    hlab::v1::Event event;
    EXPECT_FALSE(reader->Read(&event));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
}

TEST_F(SecureCoordinatorTest, MetricsEndpointServesHlabNames) {
  EXPECT_EQ(Submit("s-token"), grpc::StatusCode::OK);
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  coordinator_->metrics()->SetRunProgress("abc", 100, 3.5, 0.5);
  ASSERT_GT(coordinator_->metrics_port(), 0);
  const std::string body = HttpGet(coordinator_->metrics_port(), "/metrics");
  for (const char* name :
       {"hlab_runs{state=\"PENDING\"} 1", "hlab_tasks{state=\"PENDING\"} 1",
        "hlab_workers_connected", "hlab_workers_draining 0",
        "hlab_lease_expirations_total", "hlab_retries_total",
        "hlab_metric_points_ingested_total",
        "hlab_db_commit_latency_seconds_bucket", "hlab_store_writable 1",
        "hlab_store_write_failures_total 0", "hlab_run_loss{run=\"abc\"} 3.5",
        "hlab_run_tokens_per_second", "hlab_run_progress_ratio"}) {
    EXPECT_NE(body.find(name), std::string::npos) << name << "\n" << body;
  }
  // A run that is no longer active loses its series.
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  EXPECT_EQ(
      HttpGet(coordinator_->metrics_port(), "/metrics").find("run=\"abc\""),
      std::string::npos);
}

TEST_F(SecureCoordinatorTest, MetricsCountCallsSweepsAndTokens) {
  EXPECT_EQ(Submit(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Submit("s-token"), grpc::StatusCode::OK);
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  const std::string body = HttpGet(coordinator_->metrics_port(), "/metrics");
  // Labels come sorted by name.
  for (const char* line :
       {"hlab_grpc_server_handled_total{code=\"OK\",method=\"/"
        "hlab.v1.ClientService/SubmitSweep\"} 1",
        "hlab_grpc_server_handled_total{code=\"UNAUTHENTICATED\",method=\"/"
        "hlab.v1.ClientService/SubmitSweep\"} 1",
        "hlab_sweep_runs{state=\"PENDING\",sweep=\"sec\",sweep_id=\"1\"} 1",
        "hlab_sweep_runs{state=\"SUCCEEDED\",sweep=\"sec\",sweep_id=\"1\"} 0",
        "hlab_sweep_tokens_trained{sweep=\"sec\",sweep_id=\"1\"} 0",
        "hlab_sweep_tokens_budget{sweep=\"sec\",sweep_id=\"1\"} "}) {
    EXPECT_NE(body.find(line), std::string::npos) << line << "\n" << body;
  }

  // Tokens trained: the span of positions each task was seen at, however
  // often it is reported; a retry going over the same tokens adds nothing.
  CoordinatorMetrics* metrics = coordinator_->metrics();
  metrics->ObserveTaskTokens("t1", 10, 100);  // a metric report
  EXPECT_EQ(metrics->tokens_trained(), 90);
  metrics->ObserveTaskTokens("t1", 100, 100);  // a heartbeat
  metrics->ObserveTaskTokens("t1", 60, 60);    // resumed from a checkpoint
  EXPECT_EQ(metrics->tokens_trained(), 90);
  metrics->ObserveTaskTokens("t1", 150, 150);
  EXPECT_EQ(metrics->tokens_trained(), 140);
  // A task that starts at its branch point: only what it trains counts.
  metrics->ObserveTaskTokens("decay", 9000, 9000);
  EXPECT_EQ(metrics->tokens_trained(), 140);
  metrics->ObserveTaskTokens("decay", 8990, 9020);
  EXPECT_EQ(metrics->tokens_trained(), 170);
  metrics->ObserveTaskTokens("empty", 0, 0);  // points without tokens
  EXPECT_EQ(metrics->tokens_trained(), 170);
  EXPECT_NE(HttpGet(coordinator_->metrics_port(), "/metrics")
                .find("hlab_tokens_trained_total 170"),
            std::string::npos);

  // A sweep with no pending or running run left loses its series.
  metrics->SetSweepProgress({});
  EXPECT_EQ(HttpGet(coordinator_->metrics_port(), "/metrics")
                .find("hlab_sweep_runs{"),
            std::string::npos);
}

TEST(CoordinatorStartTest, RefusesNonLoopbackWithoutTokens) {
  TempDir dir;
  FakeClock clock;
  CoordinatorOptions options =
      testing::TestOptions(dir.File("hlab.db"), &clock);
  options.listen = "0.0.0.0:0";
  auto c = Coordinator::Start(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("--tokens-file"), std::string::npos);
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:1"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1:1"));
}

TEST(CoordinatorStartTest, BadTokensAndPemFilesAreNamedAtStartUp) {
  TempDir dir;
  FakeClock clock;
  CoordinatorOptions options =
      testing::TestOptions(dir.File("hlab.db"), &clock);
  options.tokens_file = dir.File("missing-tokens");
  auto missing = Coordinator::Start(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing-tokens"),
            std::string::npos)
      << missing.status();
  std::ofstream(dir.File("empty-tokens")) << "# nothing yet\n";
  options.tokens_file = dir.File("empty-tokens");
  auto empty = Coordinator::Start(options);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);

  std::ofstream(dir.File("tokens")) << "admin t0ken\n";
  options.tokens_file = dir.File("tokens");
  std::ofstream(dir.File("cert.pem")) << "not a certificate\n";
  std::ofstream(dir.File("key.pem")) << "-----BEGIN PRIVATE KEY-----\nx\n"
                                        "-----END PRIVATE KEY-----\n";
  options.tls_cert = dir.File("cert.pem");
  options.tls_key = dir.File("key.pem");
  auto bad_cert = Coordinator::Start(options);
  ASSERT_FALSE(bad_cert.ok());
  EXPECT_EQ(bad_cert.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_cert.status().message().find("--tls-cert"), std::string::npos)
      << bad_cert.status();
  // The key file holds a certificate instead of a key.
  std::ofstream(dir.File("cert.pem")) << "-----BEGIN CERTIFICATE-----\nx\n"
                                         "-----END CERTIFICATE-----\n";
  options.tls_key = dir.File("cert.pem");
  auto bad_key = Coordinator::Start(options);
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find("--tls-key"), std::string::npos)
      << bad_key.status();
  EXPECT_FALSE(std::filesystem::exists(dir.File("hlab.db")))
      << "a failed start must not create the database";
}

TEST(CoordinatorStartTest, PortInUseIsAClearError) {
  TempDir dir;
  FakeClock clock;
  auto first =
      testing::StartOrDie(testing::TestOptions(dir.File("a.db"), &clock));
  ASSERT_NE(first, nullptr);
  CoordinatorOptions options = testing::TestOptions(dir.File("b.db"), &clock);
  options.listen = first->address();
  auto second = Coordinator::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen on"),
            std::string::npos)
      << second.status();
}

TEST(CoordinatorStartTest, SecondCoordinatorOnOneDatabaseIsRefused) {
  TempDir dir;
  FakeClock clock;
  auto first =
      testing::StartOrDie(testing::TestOptions(dir.File("hlab.db"), &clock));
  ASSERT_NE(first, nullptr);
  auto second =
      Coordinator::Start(testing::TestOptions(dir.File("hlab.db"), &clock));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CoordinatorServingTest, HealthCheckingIsServing) {
  TempDir dir;
  FakeClock clock;
  auto c =
      testing::StartOrDie(testing::TestOptions(dir.File("hlab.db"), &clock));
  ASSERT_NE(c, nullptr);
  grpc::GenericStub stub(testing::Connect(*c));
  grpc::ClientContext ctx;
  grpc::ByteBuffer request;  // HealthCheckRequest{service: ""}: no bytes
  grpc::Slice empty;
  request = grpc::ByteBuffer(&empty, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response,
                 [&done](grpc::Status status) { done.set_value(status); });
  grpc::Status status = done.get_future().get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING
}

TEST(CoordinatorServingTest, ServesTlsWithTokens) {
  TempDir dir;
  const std::string cert = dir.File("cert.pem"), key = dir.File("key.pem");
  const std::string make_cert =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost -keyout " +
      key + " -out " + cert + " > /dev/null 2>&1";
  if (system(make_cert.c_str()) != 0) {
    GTEST_SKIP() << "no openssl command to make a test certificate";
  }
  std::ofstream(dir.File("tokens")) << "admin t0ken\n";
  FakeClock clock;
  CoordinatorOptions options =
      testing::TestOptions(dir.File("hlab.db"), &clock);
  options.tls_cert = cert;
  options.tls_key = key;
  options.tokens_file = dir.File("tokens");
  auto c = testing::StartOrDie(options);
  ASSERT_NE(c, nullptr);
  std::ifstream in(cert);
  std::string pem((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem;
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto channel =
      grpc::CreateCustomChannel(c->address(), grpc::SslCredentials(ssl), args);
  auto stub = hlab::v1::ClientService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer t0ken");
  hlab::v1::ListWorkersRequest request;
  hlab::v1::ListWorkersResponse response;
  grpc::Status status = stub->ListWorkers(&ctx, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  // A plaintext client cannot talk to it.
  auto plain = hlab::v1::ClientService::NewStub(testing::Connect(*c));
  grpc::ClientContext plain_ctx;
  plain_ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
  plain_ctx.AddMetadata("authorization", "Bearer t0ken");
  EXPECT_FALSE(plain->ListWorkers(&plain_ctx, request, &response).ok());
}

}  // namespace
}  // namespace hlab::coordinator
