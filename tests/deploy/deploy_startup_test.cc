// Start-up checks of the shipped binaries, as an operator meets them
// (docs/operations.md, "Start-up errors"): each bad input is one line on
// stderr naming the flag or file and a non-zero exit, never a silent
// default. And a worker that reaches a TLS coordinator with --tls-ca.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/deploy/daemons.h"

namespace hlab::deploy_testing {
namespace {

namespace fs = std::filesystem;

const std::string kBin = HLAB_BIN_DIR;

class StartupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("hlab_startup_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string File(const std::string& name) { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(StartupTest, CoordinatorNamesWhatIsWrong) {
  struct Case {
    std::vector<std::string> flags;
    int exit_code;
    std::string message;
  };
  std::ofstream(File("tokens")) << "admin t0ken\n";
  std::ofstream(File("bad-tokens")) << "admin\n";
  std::ofstream(File("junk.pem")) << "hello\n";
  for (const Case& c : std::vector<Case>{
           {{"--tokens-file", File("nope")}, 1, "cannot read tokens file"},
           {{"--tokens-file", File("bad-tokens")}, 2, "bad-tokens"},
           {{"--tokens-file", File("tokens"), "--tls-cert", File("junk.pem"),
             "--tls-key", File("junk.pem")},
            2,
            "--tls-cert"},
           {{"--tls-cert", File("junk.pem")}, 2, "--tls-key"},
           {{"--lease-seconds", "soon"}, 2, "--lease-seconds"},
           {{"--listen", "0.0.0.0:0"}, 2, "--tokens-file"},
           {{"--no-such-flag", "1"}, 2, "unknown flag"}}) {
    std::vector<std::string> argv = {kBin + "/hlab-coordinator",
                                     "--db",
                                     File("c.db"),
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "none"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    const Finished run = RunToEnd(argv, absl::Seconds(30));
    EXPECT_EQ(run.exit_code, c.exit_code) << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos)
        << c.message << " not in: " << run.output;
    EXPECT_FALSE(fs::exists(File("c.db"))) << run.output;
  }
}

TEST_F(StartupTest, PortsInUseAreNamed) {
  // Hold a port as another program would.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));

  const Finished grpc =
      RunToEnd({kBin + "/hlab-coordinator", "--db", File("c.db"), "--listen",
                taken, "--metrics-listen", "none"});
  EXPECT_EQ(grpc.exit_code, 1) << grpc.output;
  EXPECT_NE(grpc.output.find("address already in use (--listen)"),
            std::string::npos)
      << grpc.output;
  const Finished metrics =
      RunToEnd({kBin + "/hlab-coordinator", "--db", File("c.db"), "--listen",
                "127.0.0.1:0", "--metrics-listen", taken});
  EXPECT_EQ(metrics.exit_code, 1) << metrics.output;
  EXPECT_NE(metrics.output.find("--metrics-listen"), std::string::npos)
      << metrics.output;
  const Finished worker =
      RunToEnd({kBin + "/hlab-worker", "--data-dir", File("w"),
                "--metrics-listen", taken, "--coordinator", "127.0.0.1:1"});
  EXPECT_EQ(worker.exit_code, 2) << worker.output;
  EXPECT_NE(worker.output.find("in use"), std::string::npos) << worker.output;
  ::close(fd);
}

TEST_F(StartupTest, WorkerNamesWhatIsWrong) {
  std::ofstream(File("empty.token")) << "\n";
  std::ofstream(File("junk.pem")) << "hello\n";
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--token-file", File("missing.token")}, "--token-file"},
           {{"--token-file", File("empty.token")}, "is empty"},
           {{"--tls-ca", File("junk.pem")}, "--tls-ca"},
           {{"--tls-ca", File("missing.pem")}, "--tls-ca"},
           {{"--capacity", "0"}, "--capacity"},
           {{"--trainer", File("junk.pem")}, "--trainer"}}) {
    std::vector<std::string> argv = {
        kBin + "/hlab-worker", "--data-dir", File("w"),
        "--metrics-listen",    "none",       "--coordinator",
        "127.0.0.1:1"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    const Finished run = RunToEnd(argv, absl::Seconds(30));
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos)
        << c.message << " not in: " << run.output;
  }
}

TEST_F(StartupTest, WorkerConnectsToATlsCoordinatorWithItsCa) {
  const std::string cert = File("cert.pem"), key = File("key.pem");
  const std::string make_cert =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " > /dev/null 2>&1";
  if (std::system(make_cert.c_str()) != 0) {
    GTEST_SKIP() << "no openssl command to make a test certificate";
  }
  std::ofstream(File("tokens")) << "worker w0rker\nread r3ad\n";
  std::ofstream(File("worker.token")) << "w0rker\n";
  Daemon coordinator = Daemon::Start(
      {kBin + "/hlab-coordinator", "--db", File("hlab.db"), "--listen",
       "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--tokens-file",
       File("tokens"), "--tls-cert", cert, "--tls-key", key},
      File("coordinator.log"));
  const std::string address = coordinator.WaitForLine("listening on ");
  ASSERT_FALSE(address.empty());
  const int metrics = PortOf(coordinator.WaitForLine("metrics on "));
  // The worker dials the address the certificate names as an IP, not
  // "localhost": a machine whose /etc/hosts lacks localhost resolves it
  // through DNS, which took 35 s here and over the test's minute on CI.
  Daemon worker = Daemon::Start(
      {kBin + "/hlab-worker", "--coordinator",
       absl::StrCat("127.0.0.1:", PortOf(address)), "--token-file",
       File("worker.token"), "--tls-ca", cert, "--data-dir", File("w"),
       "--metrics-listen", "none", "--name", "tls-worker"},
      File("worker.log"));
  bool connected = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!connected && std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<std::string> page =
        HttpGet("127.0.0.1", metrics, "/metrics");
    connected = page.ok() &&
                page->find("hlab_workers_connected 1") != std::string::npos;
    if (!connected) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  worker.Stop();
  coordinator.Stop();
  if (!connected) {
    std::ifstream worker_log(File("worker.log")),
        coordinator_log(File("coordinator.log"));
    std::stringstream logs;
    logs << "--- worker.log\n"
         << worker_log.rdbuf() << "--- coordinator.log\n"
         << coordinator_log.rdbuf();
    ADD_FAILURE() << "the worker did not register over TLS\n" << logs.str();
  }
}

}  // namespace
}  // namespace hlab::deploy_testing
