// LeaseQueue over a real store: claims follow the store's order and are
// exclusive; the queue follows every transition that makes a task leasable
// or not (lease, complete with dependents, fail and retry backoff, expiry,
// cancel, resume, tasks added, a lease taken outside the queue, a restart);
// and N threads leasing M tasks lease each exactly once.
#include "coordinator/server/lease_queue.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::coordinator {
namespace {

using store::Task;
using store::TaskKind;
using store::TaskState;
using store::testing::Fixture;
using store::testing::MakeRun;
using store::testing::MakeTask;
using store::testing::T;
using ::testing::ElementsAre;

const absl::Duration kLease = absl::Seconds(30);

bool Any(const Task&) { return true; }

// Claims with `accept`; the id claimed or "" for none. Fails the test on a
// store error.
std::string ClaimId(LeaseQueue& queue, absl::Time now,
                    const std::function<bool(const Task&)>& accept = Any) {
  absl::StatusOr<std::optional<Task>> task = queue.Claim(now, accept);
  EXPECT_TRUE(task.ok()) << task.status();
  if (!task.ok() || !task->has_value()) return "";
  return (*task)->spec.id;
}

// Claims and leases to `worker` the way TryLease does; the id leased or "".
std::string LeaseNext(LeaseQueue& queue, store::Store& store, absl::Time now,
                      const std::string& worker = "w1") {
  for (int tries = 0; tries < 8; ++tries) {
    const std::string id = ClaimId(queue, now);
    if (id.empty()) return "";
    absl::StatusOr<int> attempt = store.LeaseTask(id, worker, now, kLease);
    queue.Release(id, attempt.ok());
    if (attempt.ok()) return id;
  }
  return "";
}

// The fixture's run r1 with task r1.train, plus runs r2..rN with one TRAIN
// task each ("rK.train").
void AddRuns(Fixture& f, int n) {
  for (int k = 2; k <= n; ++k) {
    const std::string run = "r" + std::to_string(k);
    ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun(run)}, T(0)).ok());
    ASSERT_TRUE(
        f.store->AddTasks({MakeTask(run + ".train", f.sweep_id, run)}, T(0))
            .ok());
  }
}

TEST(LeaseQueueTest, ClaimsFollowStoreOrderAndAreExclusive) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(
      f.store
          ->AddTasks({MakeTask("cheap-low", f.sweep_id, "r2", {}, 0, 1),
                      MakeTask("dear-high", f.sweep_id, "r2", {}, 5, 9),
                      MakeTask("cheap-high", f.sweep_id, "r2", {}, 5, 2)},
                     T(0))
          .ok());
  LeaseQueue queue(f.store.get());
  // Nothing released: each claim is a different task, in the store's order.
  std::vector<std::string> claimed;
  for (int i = 0; i < 5; ++i) claimed.push_back(ClaimId(queue, T(1)));
  EXPECT_THAT(claimed, ElementsAre("cheap-high", "dear-high", "r1.train",
                                   "cheap-low", ""));
  EXPECT_EQ(queue.stats().claimed, 4);
  EXPECT_EQ(queue.stats().loads, 1);
}

TEST(LeaseQueueTest, LeasedTasksAreGoneWithoutReadingTheStoreAgain) {
  Fixture f;
  AddRuns(f, 3);
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r2.train");
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r3.train");
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "");
  EXPECT_EQ(queue.stats().loads, 1);
  EXPECT_EQ(queue.stats().leased, 3);
  EXPECT_EQ(queue.stats().claimed, 0);
}

TEST(LeaseQueueTest, RejectedCandidatesStayForOtherCallers) {
  Fixture f;
  AddRuns(f, 2);
  LeaseQueue queue(f.store.get());
  auto only_r2 = [](const Task& t) { return t.spec.run_id == "r2"; };
  auto none = [](const Task&) { return false; };
  EXPECT_EQ(ClaimId(queue, T(1), none), "");
  EXPECT_EQ(ClaimId(queue, T(1), only_r2), "r2.train");
  EXPECT_EQ(ClaimId(queue, T(1)), "r1.train");
}

TEST(LeaseQueueTest, DependentsBecomeLeasableWhenTheirDependencySucceeds) {
  Fixture f;
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r1.eval", f.sweep_id, "r1",
                                       {"r1.train"}, 10, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  EXPECT_EQ(ClaimId(queue, T(2)), "");
  ASSERT_TRUE(f.store->CompleteTask("r1.train", 1, T(3)).ok());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(3)), "r1.eval");
}

TEST(LeaseQueueTest, RetryWaitsForItsBackoff) {
  Fixture f;
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  auto state =
      f.store->FailTask("r1.train", 1, {"boom", store::FaultClass::kTask, true},
                        T(2), absl::Seconds(10));
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(*state, TaskState::kPending);
  EXPECT_EQ(ClaimId(queue, T(3)), "");
  EXPECT_EQ(ClaimId(queue, T(11)), "");
  // The backoff ends at T(12): no other change tells the queue.
  const int64_t loads = queue.stats().loads;
  EXPECT_EQ(LeaseNext(queue, *f.store, T(12)), "r1.train");
  EXPECT_EQ(queue.stats().loads, loads + 1);
  EXPECT_EQ(f.store->GetTask("r1.train")->attempt, 2);
}

TEST(LeaseQueueTest, ExpiredLeasesAreRequeued) {
  Fixture f;
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(0)), "r1.train");
  EXPECT_EQ(ClaimId(queue, T(10)), "");
  auto expired = f.store->ExpireLeases(T(31));
  ASSERT_TRUE(expired.ok());
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_EQ(LeaseNext(queue, *f.store, T(31), "w2"), "r1.train");
  EXPECT_EQ(f.store->GetTask("r1.train")->lease_worker, "w2");
}

TEST(LeaseQueueTest, CancelledRunsLeaveAndResumedRunsReturn) {
  Fixture f;
  AddRuns(f, 2);
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(ClaimId(queue, T(1), [](const Task&) { return false; }), "");
  ASSERT_TRUE(f.store->CancelRun("r1", T(2)).ok());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(2)), "r2.train");
  EXPECT_EQ(ClaimId(queue, T(2)), "");
  ASSERT_EQ(f.store->ResumeRuns({"r1"}, T(3))->size(), 1u);
  EXPECT_EQ(LeaseNext(queue, *f.store, T(3)), "r1.train");
}

TEST(LeaseQueueTest, TasksAddedLaterAreSeen) {
  Fixture f;
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  EXPECT_EQ(ClaimId(queue, T(1)), "");
  AddRuns(f, 2);
  EXPECT_EQ(LeaseNext(queue, *f.store, T(2)), "r2.train");
}

TEST(LeaseQueueTest, ACandidateLeasedElsewhereIsDroppedAfterItsClaimFails) {
  Fixture f;
  AddRuns(f, 2);
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(ClaimId(queue, T(1), [](const Task&) { return false; }), "");
  // Leasing does not move the generation: the queue still lists r1.train.
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "other", T(1), kLease).ok());
  const std::string stale = ClaimId(queue, T(1));
  EXPECT_EQ(stale, "r1.train");
  EXPECT_EQ(f.store->LeaseTask(stale, "w1", T(1), kLease).status().code(),
            absl::StatusCode::kFailedPrecondition);
  queue.Release(stale, /*leased=*/false);
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r2.train");
  EXPECT_EQ(ClaimId(queue, T(1)), "");
}

TEST(LeaseQueueTest, AClaimNotLeasedComesBack) {
  Fixture f;
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(ClaimId(queue, T(1)), "r1.train");
  EXPECT_EQ(ClaimId(queue, T(1)), "");  // claimed
  queue.Release("r1.train", /*leased=*/false);
  EXPECT_EQ(ClaimId(queue, T(1)), "r1.train");
}

TEST(LeaseQueueTest, ANewQueueOnAReopenedStoreStartsFromTheDatabase) {
  Fixture f;
  AddRuns(f, 2);
  {
    LeaseQueue queue(f.store.get());
    EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  }
  const std::string path = f.store->path();
  f.store.reset();
  auto reopened = store::Store::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  LeaseQueue queue(reopened->get());
  EXPECT_EQ(LeaseNext(queue, **reopened, T(2)), "r2.train");
  EXPECT_EQ(ClaimId(queue, T(2)), "");
}

TEST(LeaseQueueTest, ASmallWindowStillReachesEveryTask) {
  Fixture f;
  AddRuns(f, 7);
  LeaseQueue queue(f.store.get(), /*window=*/2);
  std::vector<std::string> leased;
  while (true) {
    std::string id = LeaseNext(queue, *f.store, T(1));
    if (id.empty()) break;
    leased.push_back(id);
  }
  EXPECT_EQ(leased.size(), 7u);
  EXPECT_GE(queue.stats().loads, 4);
}

TEST(LeaseQueueTest, AWindowNobodyTakesIsReloadedWithinMaxAge) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(
      f.store
          ->AddTasks(
              {MakeTask("eval-a", f.sweep_id, "r2", {}, 9, 0, TaskKind::kEval),
               MakeTask("eval-b", f.sweep_id, "r2", {}, 9, 0, TaskKind::kEval)},
              T(0))
          .ok());
  // The window holds the two EVAL tasks, which this caller never takes;
  // r1.train lies beyond it.
  LeaseQueue queue(f.store.get(), /*window=*/2);
  auto not_eval = [](const Task& t) { return t.spec.kind != TaskKind::kEval; };
  EXPECT_EQ(ClaimId(queue, T(1), not_eval), "");
  // Leased outside the queue (as the reaper does with EVAL tasks): no
  // generation moves.
  ASSERT_TRUE(f.store->LeaseTask("eval-a", "coordinator", T(1), kLease).ok());
  ASSERT_TRUE(f.store->LeaseTask("eval-b", "coordinator", T(1), kLease).ok());
  EXPECT_EQ(ClaimId(queue, T(1) + absl::Milliseconds(500), not_eval), "");
  EXPECT_EQ(ClaimId(queue, T(1) + LeaseQueue::kMaxAge, not_eval), "r1.train");
}

// ---- After a completion: only its dependents are read

// The candidates the queue holds now, in its order: a claim that takes none
// sees each of them. Twice: a claim that finds nothing in a window that
// did not hold every row reloads it and looks again, so the first may see
// some twice; the second finds the queue up to date.
std::vector<std::string> Offered(LeaseQueue& queue, absl::Time now) {
  std::vector<std::string> offered;
  for (int pass = 0; pass < 2; ++pass) {
    offered.clear();
    EXPECT_EQ(ClaimId(queue, now,
                      [&](const Task& t) {
                        offered.push_back(t.spec.id);
                        return false;
                      }),
              "");
  }
  return offered;
}

// What a reload would hold: the store's whole leasable list.
std::vector<std::string> Leasable(store::Store& store, absl::Time now) {
  auto tasks = store.NextLeasableTasks(now, 100000);
  EXPECT_TRUE(tasks.ok()) << tasks.status();
  return tasks.ok() ? store::testing::Ids(*tasks) : std::vector<std::string>();
}

TEST(LeaseQueueTest, ACompletionAddsItsDependentsWithoutAReload) {
  Fixture f;
  AddRuns(f, 3);
  ASSERT_TRUE(f.store
                  ->AddTasks({MakeTask("r1.eval", f.sweep_id, "r1",
                                       {"r1.train"}, 0, 0, TaskKind::kEval)},
                             T(0))
                  .ok());
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  ASSERT_TRUE(f.store->CompleteTask("r1.train", 1, T(2)).ok());
  // r1.eval costs nothing: it goes before r2.train and r3.train.
  EXPECT_THAT(Offered(queue, T(2)),
              ElementsAre("r1.eval", "r2.train", "r3.train"));
  EXPECT_EQ(LeaseNext(queue, *f.store, T(2)), "r1.eval");
  EXPECT_EQ(queue.stats().loads, 1);
  EXPECT_EQ(queue.stats().additions, 1);
}

TEST(LeaseQueueTest, AFailureForGoodNeedsNoReload) {
  Fixture f;
  AddRuns(f, 2);
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  auto state = f.store->FailTask(
      "r1.train", 1, {"bad config", store::FaultClass::kTask, false}, T(2),
      absl::ZeroDuration());
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(*state, TaskState::kFailed);
  EXPECT_EQ(LeaseNext(queue, *f.store, T(2)), "r2.train");
  EXPECT_EQ(queue.stats().loads, 1);
}

// A task that waits for two others is added by the second completion only,
// and one whose backoff has not ended is added when it ends.
TEST(LeaseQueueTest, AdditionsWaitForEveryDependencyAndForTheBackoff) {
  Fixture f;
  AddRuns(f, 2);
  ASSERT_TRUE(
      f.store
          ->AddTasks(
              {MakeTask("both", f.sweep_id, "r1", {"r1.train", "r2.train"}, 1),
               MakeTask("later", f.sweep_id, "r1", {"r1.train"}, 1)},
              T(0))
          .ok());
  ASSERT_TRUE(store::testing::SetNotBefore(*f.store, "later", T(20)).ok());
  LeaseQueue queue(f.store.get());
  EXPECT_EQ(LeaseNext(queue, *f.store, T(1)), "r1.train");
  ASSERT_TRUE(f.store->CompleteTask("r1.train", 1, T(2)).ok());
  EXPECT_THAT(Offered(queue, T(2)), ElementsAre("r2.train"));
  EXPECT_EQ(Offered(queue, T(2)), Leasable(*f.store, T(2)));
  EXPECT_EQ(LeaseNext(queue, *f.store, T(3)), "r2.train");
  ASSERT_TRUE(f.store->CompleteTask("r2.train", 1, T(4)).ok());
  EXPECT_THAT(Offered(queue, T(4)), ElementsAre("both"));
  EXPECT_EQ(queue.stats().loads, 1);
  // The backoff of "later" ends at T(20): the queue reloads then.
  EXPECT_EQ(Offered(queue, T(19)), Leasable(*f.store, T(19)));
  EXPECT_THAT(Offered(queue, T(20)), ElementsAre("both", "later"));
  EXPECT_EQ(Offered(queue, T(20)), Leasable(*f.store, T(20)));
  EXPECT_EQ(queue.stats().loads, 2);
}

// A sweep of tasks with several dependencies each, priorities, equal costs
// (the id decides), adaptive order keys and backoffs set on waiting tasks,
// leased and completed a few at a time: after every step the queue offers
// exactly what the store's whole list holds, in its order, though it never
// reads that list again except when a backoff ends.
void LeaseAWebOfTasks(int window, bool whole_list) {
  Fixture f;
  std::mt19937 random(7);
  auto pick = [&](int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(random);
  };
  constexpr int kTasks = 60;
  std::vector<store::TaskSpec> tasks;
  std::vector<store::TaskOrder> orders;
  for (int i = 0; i < kTasks; ++i) {
    const std::string id = "t" + std::to_string(100 + i);
    std::vector<std::string> deps;
    const int n_deps = i < 6 ? 0 : pick(4);
    for (int d = 0; d < n_deps; ++d) {
      const std::string dep = "t" + std::to_string(100 + pick(i));
      if (std::find(deps.begin(), deps.end(), dep) == deps.end()) {
        deps.push_back(dep);
      }
    }
    tasks.push_back(
        MakeTask(id, f.sweep_id, "r1", deps, pick(3), 1.0 * pick(4)));
    if (pick(4) == 0) {
      store::TaskOrder order;
      order.task_id = id;
      order.key = 0.5 * pick(8);
      order.rank = i;
      orders.push_back(order);
    }
  }
  ASSERT_TRUE(f.store->AddTasks(tasks, T(0)).ok());
  ASSERT_TRUE(f.store->SetTaskOrder(f.sweep_id, orders).ok());
  // Steps of 100 ms: the whole run stays within the queue's kMaxAge.
  auto at = [](int step) { return T(0) + absl::Milliseconds(100 * step); };
  int backoffs = 0;
  for (int i = 10; i < kTasks; i += 7) {
    ASSERT_TRUE(store::testing::SetNotBefore(*f.store, tasks[i].id,
                                             at(5 + 3 * backoffs++))
                    .ok());
  }
  LeaseQueue queue(f.store.get(), window);
  std::vector<std::pair<std::string, int>> held;
  int completed = 0;  // of kTasks and the fixture's r1.train
  for (int step = 1; step < 250 && completed < kTasks + 1; ++step) {
    const absl::Time now = at(step);
    const std::vector<std::string> leasable = Leasable(*f.store, now);
    const std::vector<std::string> offered = Offered(queue, now);
    if (whole_list) {
      ASSERT_EQ(offered, leasable) << "step " << step;
    } else {
      // A window that did not get every row holds a prefix of them.
      ASSERT_LE(offered.size(), leasable.size()) << "step " << step;
      ASSERT_TRUE(std::equal(offered.begin(), offered.end(), leasable.begin()))
          << "step " << step << ": " << ::testing::PrintToString(offered)
          << " vs " << ::testing::PrintToString(leasable);
    }
    // Lease up to two, in the order a whole read gives.
    for (int k = 0; k < 2 && k < static_cast<int>(leasable.size()); ++k) {
      ASSERT_EQ(LeaseNext(queue, *f.store, now), leasable[k]) << step;
      held.emplace_back(leasable[k], 1);
    }
    // Complete one, not always the oldest.
    if (!held.empty()) {
      const size_t which = static_cast<size_t>(pick(2)) % held.size();
      ASSERT_TRUE(
          f.store->CompleteTask(held[which].first, held[which].second, now)
              .ok());
      held.erase(held.begin() + static_cast<long>(which));
      ++completed;
    }
  }
  EXPECT_EQ(completed, kTasks + 1);
  ASSERT_LT(at(250), T(0) + LeaseQueue::kMaxAge);
  if (whole_list) {
    // One load at the start and one per backoff end; every completion was
    // an addition.
    EXPECT_LE(queue.stats().loads, 1 + backoffs);
    EXPECT_GE(queue.stats().additions, 10);
  }
}

TEST(LeaseQueueTest, AfterEachCompletionItOffersWhatAReloadWould) {
  LeaseAWebOfTasks(LeaseQueue::kDefaultWindow, /*whole_list=*/true);
}

TEST(LeaseQueueTest, ASmallWindowAfterCompletionsIsAPrefixOfAReload) {
  LeaseAWebOfTasks(/*window=*/4, /*whole_list=*/false);
}

// N threads leasing M tasks through one queue: each task is leased exactly
// once (attempt 1), none is left PENDING.
TEST(LeaseQueueTest, ConcurrentLeasersLeaseEachTaskExactlyOnce) {
  constexpr int kThreads = 8;
  constexpr int kTasks = 120;
  Fixture f;
  AddRuns(f, kTasks);
  LeaseQueue queue(f.store.get(), /*window=*/16);
  absl::Mutex mu;
  std::map<std::string, int> times_leased;
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      const std::string worker = "w" + std::to_string(w);
      int idle = 0;
      while (idle < 3) {
        const std::string id = LeaseNext(queue, *f.store, T(1), worker);
        if (id.empty()) {
          ++idle;  // others may still hold claims they could release
          std::this_thread::yield();
          continue;
        }
        idle = 0;
        absl::MutexLock lock(&mu);
        ++times_leased[id];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(times_leased.size(), static_cast<size_t>(kTasks));
  for (const auto& [id, times] : times_leased) {
    EXPECT_EQ(times, 1) << id;
    auto task = f.store->GetTask(id);
    ASSERT_TRUE(task.ok());
    EXPECT_EQ(task->state, TaskState::kLeased) << id;
    EXPECT_EQ(task->attempt, 1) << id;
  }
  store::TaskFilter pending;
  pending.state = TaskState::kPending;
  EXPECT_TRUE(f.store->ListTasks(pending)->empty());
  EXPECT_EQ(queue.stats().claimed, 0);
}

}  // namespace
}  // namespace hlab::coordinator
