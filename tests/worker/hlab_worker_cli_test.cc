// The hlab-worker binary: one-line errors for bad flags, SIGTERM end to end
// (trainer terminated, task reported retryable, the worker deregisters,
// exit 0) and no trainer left behind by a kill -9 of the worker, against
// the in-process fake coordinator and the fake trainer, and
// TLS to a coordinator that serves it (--tls-ca, --tls-server-name).
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/cli/test_certificate.h"
#include "tests/worker/fake_coordinator.h"
#include "tests/worker/fake_trainer.h"
#include "worker/coordinator_client.h"
#include "worker/trainer_process.h"

namespace hlab::worker {
namespace {

namespace fs = std::filesystem;
using testing::FakeCoordinator;
using testing::FakeServer;
using testing::FakeState;

class HlabWorkerCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hlab_worker_cli_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    trainer_ = testing::WriteFakeTrainer(root_ / "bin");
  }
  void TearDown() override { fs::remove_all(root_); }

  struct Result {
    int code = -1;
    std::string err;
  };
  // Runs hlab-worker with `args` to its end; stderr captured.
  Result Run(std::vector<std::string> args) {
    TrainerLaunch launch;
    launch.argv = {HLAB_WORKER_BIN};
    launch.argv.insert(launch.argv.end(), args.begin(), args.end());
    launch.log_path = (root_ / "stderr.txt").string();
    fs::remove(launch.log_path);
    auto proc = TrainerProcess::Start(launch);
    EXPECT_TRUE(proc.ok()) << proc.status();
    Result r;
    if (!proc.ok()) return r;
    const ExitStatus exit = (*proc)->Wait();
    r.code = exit.signaled ? -exit.signal : exit.code;
    std::ifstream in(launch.log_path);
    r.err.assign(std::istreambuf_iterator<char>(in), {});
    return r;
  }

  fs::path root_;
  std::string trainer_;
};

TEST_F(HlabWorkerCliTest, BadFlagsFailWithOneLine) {
  Result r = Run({"--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "hlab-worker: unknown flag '--bogus' (see --help)\n");

  r = Run({"--token-file", (root_ / "missing").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, absl::StrCat("hlab-worker: cannot read --token-file ",
                                (root_ / "missing").string(), "\n"));

  std::ofstream(root_ / "file") << "x";
  r = Run(
      {"--data-dir", (root_ / "file" / "sub").string(), "--trainer", trainer_});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("hlab-worker: cannot create --data-dir ", 0), 0u)
      << r.err;

  r = Run({"--data-dir", (root_ / "data").string(), "--trainer",
           (root_ / "nope").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not an executable file"), std::string::npos)
      << r.err;

  r = Run({"--data-dir", (root_ / "data").string(), "--trainer", trainer_,
           "--evaluator", (root_ / "no-eval").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, absl::StrCat("hlab-worker: --evaluator ",
                                (root_ / "no-eval").string(),
                                " is not an executable file\n"));

  r = Run({"--tls-ca", (root_ / "file").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            absl::StrCat("hlab-worker: --tls-ca ", (root_ / "file").string(),
                         " holds no PEM CERTIFICATE (expected a "
                         "-----BEGIN ...CERTIFICATE----- block)\n"));
  r = Run({"--tls-cert", (root_ / "file").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "hlab-worker: --tls-cert and --tls-key go together (mutual TLS); "
            "give both or neither\n");
  r = Run({"--tls-server-name", "coordinator.example"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "hlab-worker: --tls-server-name needs --tls-ca (it names the TLS "
            "certificate)\n");

  r = Run({"--capacity", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "hlab-worker: --capacity must be an integer >= 1, got '0'\n");
}

TEST_F(HlabWorkerCliTest, MetricsPortInUseIsAnError) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  Result r =
      Run({"--data-dir", (root_ / "data").string(), "--trainer", trainer_,
           "--metrics-listen", absl::StrCat("127.0.0.1:", port)});
  ::close(fd);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(
      r.err.find(absl::StrCat("cannot serve metrics on 127.0.0.1:", port)),
      std::string::npos)
      << r.err;
}

TEST_F(HlabWorkerCliTest, SigtermStopsTrainersAndReportsThemRetryable) {
  FakeServer server(std::make_unique<FakeCoordinator>());
  hlab::v1::Task task;
  task.set_task_id("t-sig");
  task.set_attempt(3);
  task.add_run_ids("run-sig");
  task.set_task_json(testing::FakeTrainTask("sleep").dump());
  server.fake().AddTask(task);
  std::ofstream(root_ / "token") << "secret-token\n";

  TrainerLaunch launch;
  launch.argv = {HLAB_WORKER_BIN,
                 "--coordinator",
                 server.address(),
                 "--token-file",
                 (root_ / "token").string(),
                 "--data-dir",
                 (root_ / "data").string(),
                 "--trainer",
                 trainer_,
                 "--metrics-listen",
                 "none",
                 "--name",
                 "w-cli"};
  launch.log_path = (root_ / "worker.log").string();
  auto worker = TrainerProcess::Start(launch);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const fs::path running = root_ / "data" / "tasks" / "t-sig" / "running";
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!fs::exists(running) && absl::Now() < deadline) usleep(10000);
  ASSERT_TRUE(fs::exists(running));
  ASSERT_EQ(::kill((*worker)->pid(), SIGTERM), 0);
  const ExitStatus exit = (*worker)->Wait();
  EXPECT_TRUE(exit.success()) << exit.ToString();
  FakeState s = server.fake().Snapshot();
  ASSERT_EQ(s.fails.size(), 1u);
  EXPECT_EQ(s.fails[0].attempt(), 3);
  EXPECT_EQ(s.fails[0].worker_id(), "w-cli");
  EXPECT_TRUE(s.fails[0].retryable());
  EXPECT_EQ(s.fails[0].exit_code(), 75);
  EXPECT_EQ(s.registers[0].worker_id(), "w-cli");
  EXPECT_EQ(s.authorization[0], "Bearer secret-token");
  ASSERT_EQ(s.deregisters.size(), 1u);
  EXPECT_EQ(s.deregisters[0].worker_id(), "w-cli");
  pid_t trainer_pid = 0;
  std::ifstream(root_ / "data" / "tasks" / "t-sig" / "pid") >> trainer_pid;
  ASSERT_GT(trainer_pid, 0);
  EXPECT_NE(::kill(trainer_pid, 0), 0) << "trainer still alive";
}

// The state letter of /proc/<pid>/stat ('T' stopped, 'Z' a zombie); 0 when
// there is no such process.
char ProcessState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return 0;
  return stat[paren + 2];
}

TEST_F(HlabWorkerCliTest, KillNineOfTheWorkerTakesItsSilentTrainerWithIt) {
  // The wait_go trainer writes one step and then waits without writing, so
  // no SIGPIPE would tell it that its worker died; it is running, not
  // stopped, so the kernel's SIGHUP to a newly orphaned process group with a
  // stopped member does not end it either. The parent-death signal
  // (SIGKILL) does.
  FakeServer server(std::make_unique<FakeCoordinator>());
  hlab::v1::Task task;
  task.set_task_id("t-orphan");
  task.set_attempt(1);
  task.add_run_ids("run-orphan");
  task.set_task_json(testing::FakeTrainTask("wait_go").dump());
  server.fake().AddTask(task);
  std::ofstream(root_ / "token") << "secret-token\n";
  TrainerLaunch launch;
  launch.argv = {HLAB_WORKER_BIN,
                 "--coordinator",
                 server.address(),
                 "--token-file",
                 (root_ / "token").string(),
                 "--data-dir",
                 (root_ / "data").string(),
                 "--trainer",
                 trainer_,
                 "--metrics-listen",
                 "none",
                 "--name",
                 "w-kill"};
  launch.log_path = (root_ / "worker.log").string();
  auto worker = TrainerProcess::Start(launch);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const fs::path task_dir = root_ / "data" / "tasks" / "t-orphan";
  pid_t trainer_pid = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    std::ifstream(task_dir / "pid") >> trainer_pid;
    if (trainer_pid > 0 && fs::exists(task_dir / "running")) break;
    usleep(10000);
  }
  ASSERT_GT(trainer_pid, 0);
  ASSERT_TRUE(fs::exists(task_dir / "running")) << "the trainer did not start";
  ASSERT_EQ(::kill((*worker)->pid(), SIGKILL), 0);
  const ExitStatus exit = (*worker)->Wait();
  EXPECT_TRUE(exit.signaled && exit.signal == SIGKILL) << exit.ToString();
  const absl::Time gone_by = absl::Now() + absl::Seconds(10);
  char state = ProcessState(trainer_pid);
  while (state != 0 && state != 'Z' && absl::Now() < gone_by) {
    usleep(10000);
    state = ProcessState(trainer_pid);
  }
  if (state != 0 && state != 'Z') ::kill(trainer_pid, SIGKILL);
  EXPECT_TRUE(state == 0 || state == 'Z')
      << "the trainer outlived its worker, in state " << state;
}

std::shared_ptr<grpc::ServerCredentials> TlsCredentials(
    const cli::testing::TestCertificate& cert) {
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({cert.key_pem, cert.cert_pem});
  return grpc::SslServerCredentials(tls);
}

TEST_F(HlabWorkerCliTest, RunsATaskFromATlsCoordinatorWithTlsCa) {
  const cli::testing::TestCertificate cert =
      cli::testing::MakeTestCertificate();
  ASSERT_FALSE(cert.cert_pem.empty());
  FakeServer server(std::make_unique<FakeCoordinator>(), 0,
                    TlsCredentials(cert));
  hlab::v1::Task task;
  task.set_task_id("t-tls");
  task.set_attempt(1);
  task.add_run_ids("run-tls");
  task.set_task_json(testing::FakeTrainTask("ok").dump());
  server.fake().AddTask(task);
  std::ofstream(root_ / "ca.pem") << cert.cert_pem;

  TrainerLaunch launch;
  launch.argv = {HLAB_WORKER_BIN,
                 "--coordinator",
                 server.address(),
                 "--tls-ca",
                 (root_ / "ca.pem").string(),
                 "--token",
                 "tls-token",
                 "--data-dir",
                 (root_ / "data").string(),
                 "--trainer",
                 trainer_,
                 "--metrics-listen",
                 "none",
                 "--name",
                 "w-tls"};
  launch.log_path = (root_ / "worker.log").string();
  auto worker = TrainerProcess::Start(launch);
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_TRUE(server.fake().WaitFor(
      [](const FakeState& s) { return s.Completed("t-tls"); }))
      << std::string(std::istreambuf_iterator<char>(
                         std::ifstream(root_ / "worker.log").rdbuf()),
                     {});
  ASSERT_EQ(::kill((*worker)->pid(), SIGTERM), 0);
  EXPECT_TRUE((*worker)->Wait().success());
  FakeState s = server.fake().Snapshot();
  EXPECT_EQ(s.registers.at(0).worker_id(), "w-tls");
  EXPECT_EQ(s.authorization.at(0), "Bearer tls-token");
  EXPECT_EQ(s.Points("train_loss").size(), 3u);
  EXPECT_EQ(s.deregisters.size(), 1u);
}

TEST_F(HlabWorkerCliTest, TlsChecksTheCoordinatorsName) {
  const cli::testing::TestCertificate cert =
      cli::testing::MakeTestCertificate();
  FakeServer server(std::make_unique<FakeCoordinator>(), 0,
                    TlsCredentials(cert));
  hlab::v1::RegisterRequest request;
  request.set_worker_id("w-name");
  hlab::v1::RegisterResponse response;
  // The certificate names 127.0.0.1 and localhost.
  CoordinatorTls tls;
  tls.root_certs = cert.cert_pem;
  tls.server_name = "localhost";
  CoordinatorClient named(server.address(), "", absl::Seconds(5), tls);
  const absl::Status registered = named.Register(request, &response);
  EXPECT_TRUE(registered.ok()) << registered;
  tls.server_name = "coordinator.example";
  CoordinatorClient wrong(server.address(), "", absl::Seconds(5), tls);
  EXPECT_EQ(wrong.Register(request, &response).code(),
            absl::StatusCode::kUnavailable);
  CoordinatorClient plaintext(server.address(), "", absl::Seconds(5));
  EXPECT_EQ(plaintext.Register(request, &response).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(server.fake().Snapshot().registers.size(), 1u);
}

}  // namespace
}  // namespace hlab::worker
