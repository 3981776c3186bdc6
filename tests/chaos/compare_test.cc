// The chaos driver's comparison: equal records compare equal; a run not
// succeeded, a missing, extra or changed point or eval, and duplicated keys
// are each counted.
#include "chaos/compare.h"

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "coordinator/store/store.h"

namespace hlab::chaos {
namespace {

SweepRecord Clean() {
  SweepRecord r;
  r.runs = {{"a", "SUCCEEDED"}, {"b", "SUCCEEDED"}};
  r.points = {{"a/train_loss/1", "2.5/64"},
              {"a/train_loss/2", "2.25/128"},
              {"b/lr/1", "0.001/64"}};
  r.evals = {{"a/val_loss/2", "2.125"}};
  return r;
}

TEST(CompareTest, EqualRecordsAreEqual) {
  const Comparison c = CompareRecords(Clean(), Clean());
  EXPECT_TRUE(c.Equal()) << c.Summary();
  EXPECT_EQ(c.Summary(),
            "0 lost runs of 2, 0 duplicated keys, 0 differing points of 3, "
            "0 differing evals of 1");
}

TEST(CompareTest, EachKindOfDifferenceIsCounted) {
  SweepRecord faulty = Clean();
  faulty.runs["b"] = "FAILED";
  faulty.points["a/train_loss/2"] = "2.2500000000000004/128";  // one ulp
  faulty.points.erase("b/lr/1");
  faulty.points["b/lr/2"] = "0.001/128";
  faulty.evals.clear();
  faulty.duplicated_keys = 1;
  const Comparison c = CompareRecords(Clean(), faulty);
  EXPECT_FALSE(c.Equal());
  EXPECT_EQ(c.lost_runs, 1);
  EXPECT_EQ(c.differing_points, 3);  // changed, missing, extra
  EXPECT_EQ(c.differing_evals, 1);
  EXPECT_EQ(c.duplicated_keys, 1);
  ASSERT_FALSE(c.examples.empty());
  EXPECT_EQ(c.examples[0], "run b: FAILED instead of SUCCEEDED");
}

// A database read back: points keep 17 digits, timings are left out.
TEST(CompareTest, ReadsADatabaseExactlyAndWithoutTimings) {
  const std::string dir = ::testing::TempDir() + "/chaos_compare";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    auto store = store::Store::Open(dir + "/hlab.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store::SweepSpec sweep;
    sweep.name = "s";
    sweep.spec_hash = "h";
    sweep.spec = "{}";
    auto created = (*store)->CreateSweep(sweep, absl::FromUnixSeconds(1));
    ASSERT_TRUE(created.ok());
    store::RunSpec run;
    run.id = "r1";
    run.arch = "full";
    run.scale = "S";
    ASSERT_TRUE(
        (*store)
            ->AddRuns(created->sweep_id, {run}, absl::FromUnixSeconds(1))
            .ok());
    store::TaskSpec task;
    task.id = "t1";
    task.sweep_id = created->sweep_id;
    task.run_id = "r1";
    ASSERT_TRUE((*store)->AddTasks({task}, absl::FromUnixSeconds(1)).ok());
    ASSERT_TRUE(
        (*store)
            ->LeaseTask("t1", "w", absl::FromUnixSeconds(2), absl::Seconds(30))
            .ok());
    store::MetricPoint loss;
    loss.name = "train_loss";
    loss.step = 1;
    loss.value = 0.1 + 0.2;  // 0.30000000000000004
    loss.tokens = 64;
    store::MetricPoint speed = loss;
    speed.name = "tokens_per_s";
    speed.value = 1234.5;
    ASSERT_TRUE((*store)
                    ->RecordMetrics("t1", 1, {loss, speed}, absl::UnixEpoch())
                    .ok());
  }
  absl::StatusOr<SweepRecord> r = ReadSweepRecord(dir + "/hlab.db");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 1u);  // no tokens_per_s
  EXPECT_EQ(r->points.begin()->first, "r1/train_loss/1");
  EXPECT_EQ(r->points.begin()->second, "0.30000000000000004/64");
  EXPECT_EQ(r->runs.at("r1"), "RUNNING");
  EXPECT_EQ(r->duplicated_keys, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hlab::chaos
