// ReadProcessUsage: this process's own figures are read back (threads,
// resident memory, CPU time that grows with work), and a process that does
// not exist gives zeros.
#include "common/process_usage.h"
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace hlab {
namespace {

// A /proc file opened while its process ran and read after the process was
// reaped: the read fails with ESRCH, which must come back as "" (the e2e
// tests' reader threw "basic_filebuf::underflow error reading the file: No
// such process" when a worker exited under it).
TEST(ProcessUsageTest, AProcFileReadAfterItsProcessIsGoneIsEmpty) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
  ASSERT_TRUE(stat.is_open());
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  std::string text = "unset";
  EXPECT_NO_THROW(text = ReadRestOfProcFile(stat));
  EXPECT_EQ(text, "");
}

TEST(ProcessUsageTest, ReadsThisProcess) {
  const ProcessUsage before = ReadProcessUsage(::getpid());
  EXPECT_GE(before.threads, 1);
  EXPECT_GT(before.rss_bytes, 0);
  EXPECT_GE(before.peak_rss_bytes, before.rss_bytes);
  // Burn CPU until the kernel's clock-tick accounting moves.
  volatile double sink = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  double after = before.cpu_seconds;
  while (after <= before.cpu_seconds &&
         std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 1000000; ++i) sink = sink + std::sqrt(i);
    after = ReadProcessUsage(::getpid()).cpu_seconds;
  }
  EXPECT_GT(after, before.cpu_seconds);
}

TEST(ProcessUsageTest, NoSuchProcessGivesZeros) {
  // Above the kernel's pid limit (pid_max is at most 2^22).
  const ProcessUsage none = ReadProcessUsage(static_cast<pid_t>(1) << 23);
  EXPECT_EQ(none.threads, 0);
  EXPECT_EQ(none.rss_bytes, 0);
  EXPECT_EQ(none.cpu_seconds, 0);
}

}  // namespace
}  // namespace hlab
