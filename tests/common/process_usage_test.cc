// ReadProcessUsage: this process's own figures are read back (threads,
// resident memory, CPU time that grows with work), and a process that does
// not exist gives zeros.
#include "common/process_usage.h"
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

namespace hlab {
namespace {

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
