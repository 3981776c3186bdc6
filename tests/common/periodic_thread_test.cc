// PeriodicThread: it calls its function repeatedly, Stop wakes it without
// waiting out the interval, and it can be started again.
#include "common/periodic_thread.h"

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hlab {
namespace {

struct Counter {
  absl::Mutex mu;
  int calls ABSL_GUARDED_BY(mu) = 0;
  void Add() {
    absl::MutexLock lock(&mu);
    ++calls;
  }
  // Waits (at most a minute) for `n` calls; false if they did not come.
  bool AwaitAtLeast(int n) {
    absl::MutexLock lock(&mu);
    auto reached = [&]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return calls >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&reached), absl::Minutes(1));
  }
  int Get() {
    absl::MutexLock lock(&mu);
    return calls;
  }
};

TEST(PeriodicThreadTest, CallsRepeatedlyUntilStopped) {
  Counter counter;
  PeriodicThread thread;
  thread.Start(absl::Milliseconds(1), [&] { counter.Add(); });
  EXPECT_TRUE(counter.AwaitAtLeast(3));
  thread.Stop();
  const int after_stop = counter.Get();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(counter.Get(), after_stop);  // no call after Stop returned
}

// With an hour's interval nothing is called, and Stop returns at once
// (if it waited out the interval, ctest's timeout would end the test).
TEST(PeriodicThreadTest, StopWakesTheThread) {
  Counter counter;
  PeriodicThread thread;
  thread.Start(absl::Hours(1), [&] { counter.Add(); });
  thread.Stop();
  EXPECT_EQ(counter.Get(), 0);
  thread.Stop();  // a second Stop is a no-op
}

TEST(PeriodicThreadTest, StartsAgainAfterStopAndStopsInTheDestructor) {
  Counter counter;
  {
    PeriodicThread thread;
    thread.Start(absl::Hours(1), [&] { counter.Add(); });
    thread.Stop();
    thread.Start(absl::Milliseconds(1), [&] { counter.Add(); });
    EXPECT_TRUE(counter.AwaitAtLeast(2));
  }  // the destructor joins
  const int after = counter.Get();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(counter.Get(), after);
}

}  // namespace
}  // namespace hlab
