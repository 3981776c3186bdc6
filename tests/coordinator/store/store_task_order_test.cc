// The adaptive order in the store (Store::SetTaskOrder, schema v10): an
// order_key reorders a sweep's PENDING tasks among the places their costs
// held, within their priority; other sweeps and priorities keep theirs;
// a new order replaces the old; leased tasks, other sweeps' tasks and an
// unknown sweep change nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using ::testing::ElementsAre;
using testing::Fixture;
using testing::Ids;
using testing::MakeRun;
using testing::MakeSweep;
using testing::MakeTask;
using testing::T;

const absl::Duration kLease = absl::Seconds(30);

// Sweep "s" (the fixture's, with r1.train at priority 0, cost 0 leased
// away) gets a1 (cost 1) and a3 (cost 3); sweep "b" gets b2 (cost 2), b4
// (cost 4) and hi (priority 1, cost 9).
struct TwoSweeps {
  TwoSweeps() {
    auto b = f.store->CreateSweep(MakeSweep("b"), T(0));
    EXPECT_TRUE(b.ok()) << b.status();
    other = b->sweep_id;
    EXPECT_TRUE(
        f.store->AddRuns(f.sweep_id, {MakeRun("ra1"), MakeRun("ra3")}, T(0))
            .ok());
    EXPECT_TRUE(f.store
                    ->AddRuns(other,
                              {MakeRun("rb2"), MakeRun("rb4"), MakeRun("rhi")},
                              T(0))
                    .ok());
    EXPECT_TRUE(f.store
                    ->AddTasks({MakeTask("a1", f.sweep_id, "ra1", {}, 0, 1),
                                MakeTask("a3", f.sweep_id, "ra3", {}, 0, 3),
                                MakeTask("b2", other, "rb2", {}, 0, 2),
                                MakeTask("b4", other, "rb4", {}, 0, 4),
                                MakeTask("hi", other, "rhi", {}, 1, 9)},
                               T(0))
                    .ok());
    auto leased = f.store->LeaseTask("r1.train", "w", T(1), kLease);
    EXPECT_TRUE(leased.ok()) << leased.status();
  }
  std::vector<std::string> LeaseOrder() {
    auto next = f.store->NextLeasableTasks(T(2), 100);
    EXPECT_TRUE(next.ok()) << next.status();
    return next.ok() ? Ids(*next) : std::vector<std::string>{};
  }
  Fixture f;
  int64_t other = 0;
};

TEST(StoreTaskOrderTest, AnOrderSwapsASweepsPlacesWithinItsPriority) {
  TwoSweeps t;
  EXPECT_THAT(t.LeaseOrder(), ElementsAre("hi", "a1", "b2", "a3", "b4"));
  // Sweep b wants b4 first: it takes b2's place (key 2), b2 takes b4's.
  TaskOrder b4{"b4", 2, 1, 0.5, "narrows"};
  TaskOrder b2{"b2", 4, 2, std::nullopt, "not fitted"};
  auto set = t.f.store->SetTaskOrder(t.other, {b4, b2});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, 2);
  EXPECT_THAT(t.LeaseOrder(), ElementsAre("hi", "a1", "b4", "a3", "b2"));
  auto read = t.f.store->GetTask("b4");
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->order.has_value());
  EXPECT_EQ(read->order->key, 2);
  EXPECT_EQ(read->order->rank, 1);
  EXPECT_EQ(read->order->score, 0.5);
  EXPECT_EQ(read->order->reason, "narrows");
  read = t.f.store->GetTask("b2");
  ASSERT_TRUE(read.ok() && read->order.has_value());
  EXPECT_FALSE(read->order->score.has_value());
  EXPECT_FALSE(t.f.store->GetTask("a1")->order.has_value());
}

TEST(StoreTaskOrderTest, ANewOrderReplacesTheOld) {
  TwoSweeps t;
  ASSERT_TRUE(t.f.store
                  ->SetTaskOrder(
                      t.other, {{"b4", 2, 1, 1.0, "x"}, {"b2", 4, 2, 0.5, "y"}})
                  .ok());
  // Only b2 is ranked now: b4 falls back to its cost.
  auto set = t.f.store->SetTaskOrder(t.other, {{"b2", 2, 1, 1.0, "z"}});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, 1);
  EXPECT_FALSE(t.f.store->GetTask("b4")->order.has_value());
  EXPECT_THAT(t.LeaseOrder(), ElementsAre("hi", "a1", "b2", "a3", "b4"));
}

TEST(StoreTaskOrderTest, LeasedAndOtherSweepsTasksAreSkipped) {
  TwoSweeps t;
  // r1.train is leased, a1 belongs to the other sweep, "nope" is unknown.
  auto set =
      t.f.store->SetTaskOrder(t.f.sweep_id, {{"r1.train", 0.5, 1, 1.0, "x"},
                                             {"b2", 0.5, 2, 1.0, "x"},
                                             {"nope", 0.5, 3, 1.0, "x"},
                                             {"a3", 0.5, 4, 1.0, "x"}});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*set, 1);
  EXPECT_FALSE(t.f.store->GetTask("r1.train")->order.has_value());
  EXPECT_FALSE(t.f.store->GetTask("b2")->order.has_value());
  EXPECT_THAT(t.LeaseOrder(), ElementsAre("hi", "a3", "a1", "b2", "b4"));
}

TEST(StoreTaskOrderTest, UnknownSweepIsNotFoundAndChangesNothing) {
  TwoSweeps t;
  auto set = t.f.store->SetTaskOrder(t.other + 100, {{"b4", 0, 1, 1.0, "x"}});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(t.f.store->GetTask("b4")->order.has_value());
  EXPECT_THAT(t.LeaseOrder(), ElementsAre("hi", "a1", "b2", "a3", "b4"));
}

}  // namespace
}  // namespace hlab::store
