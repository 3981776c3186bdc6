// hlab up's supervision of its daemons (LocalCluster::RestartExited) with the
// real binaries: a daemon that exits is restarted, the coordinator on the
// same address, and one that keeps exiting is left down.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "cli/local_cluster.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hlab::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// RestartExited's lines, polled until it finds the daemon gone (the kernel
// makes a killed child waitable within milliseconds; 10 s is a bound).
std::vector<std::string> LinesAfterExit(LocalCluster& cluster) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    std::vector<std::string> lines = cluster.RestartExited();
    if (!lines.empty()) return lines;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

// Whether something accepts TCP connections on "127.0.0.1:PORT".
bool Listening(const std::string& address) {
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) {
    return false;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(HLAB_BIN_DIR) / "hlab-eval")) {
      GTEST_SKIP() << "needs " << HLAB_BIN_DIR << "/hlab-eval (the evaluator)";
    }
    dir_ = fs::temp_directory_path() /
           ("hlab_local_cluster_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(LocalClusterTest, RestartsExitedDaemonsAndLeavesACrashLoopDown) {
  LocalCluster cluster({.dir = dir_.string(),
                        .workers = 1,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR});
  ASSERT_TRUE(cluster.Start().ok());
  const std::string address = cluster.address();
  EXPECT_TRUE(cluster.RestartExited().empty());

  const pid_t worker = cluster.worker_pids()[0];
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  std::vector<std::string> lines = LinesAfterExit(cluster);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("worker local-0 was killed by signal 9"));
  EXPECT_THAT(lines[0], HasSubstr("restarted"));
  EXPECT_GT(cluster.worker_pids()[0], 0);
  EXPECT_NE(cluster.worker_pids()[0], worker);

  // The coordinator: restarted on its address kMaxRestartsPerMinute times,
  // then left down, naming its log.
  for (int exits = 1; exits <= LocalCluster::kMaxRestartsPerMinute + 1;
       ++exits) {
    const pid_t coordinator = cluster.coordinator_pid();
    ASSERT_GT(coordinator, 0) << "exit " << exits;
    ASSERT_EQ(::kill(coordinator, SIGKILL), 0);
    lines = LinesAfterExit(cluster);
    ASSERT_EQ(lines.size(), 1u) << "exit " << exits;
    EXPECT_THAT(lines[0], HasSubstr("the coordinator was killed by signal 9"));
    if (exits <= LocalCluster::kMaxRestartsPerMinute) {
      EXPECT_THAT(lines[0], HasSubstr("restarted on " + address));
      EXPECT_NE(cluster.coordinator_pid(), coordinator);
      EXPECT_TRUE(Listening(address)) << address;
    } else {
      EXPECT_THAT(lines[0], HasSubstr("left down"));
      EXPECT_THAT(lines[0], HasSubstr("logs/coordinator.log"));
      EXPECT_EQ(cluster.coordinator_pid(), -1);
      EXPECT_TRUE(cluster.RestartExited().empty());
    }
  }
  cluster.Stop();  // with the coordinator down: stops the worker only
  EXPECT_TRUE(cluster.worker_pids().empty());
}

}  // namespace
}  // namespace hlab::cli
