// HandlerPool: work runs on the pool's threads, in queue order on one
// thread, all of it on several; the destructor runs what is still queued.
#include "coordinator/server/handler_pool.h"
#include <pthread.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace hlab::coordinator {
namespace {

TEST(HandlerPoolTest, OneThreadRunsWorkInQueueOrderOffTheCaller) {
  absl::Mutex mu;
  std::vector<int> order;
  std::thread::id ran_on;
  {
    HandlerPool pool(1, "test-pool");
    absl::Notification started, hold;
    // The first item waits, so the rest are queued behind it.
    pool.Run([&] {
      started.Notify();
      hold.WaitForNotification();
    });
    started.WaitForNotification();
    for (int i = 0; i < 5; ++i) {
      pool.Run([&, i] {
        absl::MutexLock lock(&mu);
        order.push_back(i);
        ran_on = std::this_thread::get_id();
      });
    }
    EXPECT_EQ(pool.queued(), 5);
    hold.Notify();
  }  // the destructor drains the queue
  EXPECT_THAT(order, ::testing::ElementsAre(0, 1, 2, 3, 4));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(HandlerPoolTest, ManyThreadsRunEverythingAndWaitTogether) {
  // 8 items that each wait for all 8 to have started: they finish only if
  // 8 threads run them at once (a blocked handler does not hold the rest).
  constexpr int kThreads = 8;
  std::atomic<int> started{0};
  absl::Notification all_started;
  std::atomic<int> finished{0};
  {
    HandlerPool pool(kThreads, "test-pool");
    for (int i = 0; i < kThreads; ++i) {
      pool.Run([&] {
        if (started.fetch_add(1) + 1 == kThreads) all_started.Notify();
        all_started.WaitForNotification();
        finished.fetch_add(1);
      });
    }
  }
  EXPECT_EQ(finished.load(), kThreads);
}

TEST(HandlerPoolTest, NamesItsThreads) {
  std::string name(16, '\0');
  {
    HandlerPool pool(2, "worker-api");
    absl::Notification done;
    pool.Run([&] {
      pthread_getname_np(pthread_self(), name.data(), name.size());
      done.Notify();
    });
    done.WaitForNotification();
  }
  EXPECT_THAT(name.c_str(), ::testing::StartsWith("worker-api"));
}

}  // namespace
}  // namespace hlab::coordinator
