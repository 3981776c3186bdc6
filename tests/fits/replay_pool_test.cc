// BuildReplayPool and the measured-value readers (fits/replay_pool.h), on
// the demo sweep's plan: costs add up to the planner's shared-trunk FLOPs,
// the lease order ranks each trunk's runs by budget, the target region is
// the named scales, and bad input names what is wrong.
#include "fits/replay_pool.h"
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/sweep/embedded_demo.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_parser.h"

namespace hlab::fits {
namespace {

sweep::SweepPlan DemoPlan(const std::string& policy = "default") {
  absl::StatusOr<v1::SweepSpec> spec =
      sweep::ParseSweepSpec(std::string(sweep::EmbeddedDemoSpec()));
  EXPECT_TRUE(spec.ok()) << spec.status();
  spec->set_schedule_policy(policy);
  absl::StatusOr<sweep::SweepPlan> plan =
      sweep::PlanSweep(sweep::WithDefaults(*spec));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

// A value for every run of the plan: 1 + its index.
MeasuredValues Everything(const sweep::SweepPlan& plan) {
  MeasuredValues m;
  double v = 1;
  for (const v1::Run& r : plan.runs) {
    m[{r.architecture(), r.scale(), r.tokens()}] = v++;
  }
  return m;
}

TEST(ReplayPoolTest, CostsAddUpToThePlannersSharedFlops) {
  const sweep::SweepPlan plan = DemoPlan();
  absl::StatusOr<ReplayPool> pool =
      BuildReplayPool(plan, Everything(plan), {"S4"});
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(pool->planned, static_cast<int>(plan.runs.size()));
  EXPECT_EQ(pool->measured, pool->planned);
  // Each trunk counted once, to its furthest branch point, plus every
  // decay: the planner's flops_shared.
  std::map<std::string, double> trunks;
  double total = 0;
  for (const analysis::ReplayRun& r : pool->runs) {
    total += r.own_flops;
    ASSERT_FALSE(r.trunk.empty()) << r.run_id;  // the demo shares trunks
    trunks[r.trunk] = std::max(trunks[r.trunk], r.trunk_flops);
    EXPECT_GT(r.own_flops, 0);
  }
  for (const auto& [trunk, flops] : trunks) total += flops;
  EXPECT_NEAR(total, plan.flops_shared, 1e-9 * plan.flops_shared);
  // The target region is S4's runs.
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    EXPECT_EQ(pool->runs[i].target, plan.runs[i].scale() == "S4");
  }
}

// schedule_policy: adaptive trains each trunk in segments: one trunk to
// the replay, each run's share the same as of the whole trunk.
TEST(ReplayPoolTest, ATrunkInSegmentsCostsWhatTheWholeTrunkDoes) {
  const sweep::SweepPlan whole = DemoPlan();
  const sweep::SweepPlan segmented = DemoPlan("adaptive");
  absl::StatusOr<ReplayPool> a =
      BuildReplayPool(whole, Everything(whole), {"S4"});
  absl::StatusOr<ReplayPool> b =
      BuildReplayPool(segmented, Everything(segmented), {"S4"});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->runs.size(), b->runs.size());
  std::map<std::string, std::string> trunk_of;  // whole's trunk -> segments'
  for (size_t i = 0; i < a->runs.size(); ++i) {
    const analysis::ReplayRun& x = a->runs[i];
    const analysis::ReplayRun& y = b->runs[i];
    EXPECT_EQ(x.run_id, y.run_id);
    EXPECT_NEAR(y.trunk_flops, x.trunk_flops, 1e-9 * x.trunk_flops) << x.run_id;
    EXPECT_EQ(y.own_flops, x.own_flops);
    ASSERT_FALSE(y.trunk.empty());
    auto [it, added] = trunk_of.insert({x.trunk, y.trunk});
    EXPECT_EQ(it->second, y.trunk) << "one trunk, one name";
  }
  EXPECT_EQ(trunk_of.size(), 16u);
}

TEST(ReplayPoolTest, TheLeaseOrderRanksATrunksRunsByBudget) {
  const sweep::SweepPlan plan = DemoPlan();
  absl::StatusOr<ReplayPool> pool =
      BuildReplayPool(plan, Everything(plan), {"S4"});
  ASSERT_TRUE(pool.ok());
  std::map<std::string, std::vector<const analysis::ReplayRun*>> by_trunk;
  std::set<int64_t> ranks;
  for (const analysis::ReplayRun& r : pool->runs) {
    ranks.insert(r.default_rank);
    // S4 holds the LongPPL reference run, whose tasks are leased first (one
    // priority step up), ahead of the smaller budgets of its trunk.
    if (!r.target) by_trunk[r.trunk].push_back(&r);
  }
  EXPECT_EQ(by_trunk.size(), 12u);             // 4 architectures x S1-S3
  EXPECT_EQ(ranks.size(), pool->runs.size());  // a strict order
  for (const auto& [trunk, runs] : by_trunk) {
    for (const auto* a : runs) {
      for (const auto* b : runs) {
        if (a->d < b->d) {
          EXPECT_LT(a->default_rank, b->default_rank) << trunk;
          EXPECT_LT(a->trunk_flops, b->trunk_flops) << trunk;
        }
      }
    }
  }
}

TEST(ReplayPoolTest, RunsWithoutAValueAreLeftOut) {
  const sweep::SweepPlan plan = DemoPlan();
  MeasuredValues some = Everything(plan);
  some.erase(some.begin());
  absl::StatusOr<ReplayPool> pool = BuildReplayPool(plan, some, {"S4"});
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->measured, pool->planned - 1);
  EXPECT_EQ(pool->runs.size(), plan.runs.size() - 1);
  absl::StatusOr<ReplayPool> none = BuildReplayPool(plan, {}, {"S4"});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("has a measured value"),
            std::string::npos);
}

TEST(ReplayPoolTest, AnUnknownTargetScaleIsNamed) {
  const sweep::SweepPlan plan = DemoPlan();
  absl::StatusOr<ReplayPool> pool =
      BuildReplayPool(plan, Everything(plan), {"S9"});
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pool.status().message().find("'S9'"), std::string::npos)
      << pool.status();
}

std::string WriteTemp(const std::string& text) {
  char name[] = "/tmp/replay_pool_test_XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(name) << text;
  return name;
}

TEST(ReplayPoolTest, ReadsAReportsRunsCsv) {
  const std::string path = WriteTemp(
      "run_id,architecture,scale,N,D,D_over_N,state,final_loss,val_loss,"
      "log_longppl,niah_accuracy\n"
      "a,full,S1,100,262144,1,SUCCEEDED,2.5,2.7,2.6,0.1\n"
      "b,full,S2,200,262144,1,SUCCEEDED,2.4,,,0.1\n"
      "c,full,S3,300,262144,1,FAILED,9,9,9,0\n");
  absl::StatusOr<MeasuredValues> loss = ReadMeasuredCsv(path, "loss");
  ASSERT_TRUE(loss.ok()) << loss.status();
  ASSERT_EQ(loss->size(), 2u);  // the failed run is left out
  EXPECT_DOUBLE_EQ((loss->at({"full", "S1", 262144})), 2.7);  // val_loss
  EXPECT_DOUBLE_EQ((loss->at({"full", "S2", 262144})), 2.4);  // final_loss
  absl::StatusOr<MeasuredValues> longppl = ReadMeasuredCsv(path, "longppl");
  ASSERT_TRUE(longppl.ok());
  EXPECT_EQ(longppl->size(), 1u);
  std::remove(path.c_str());
}

TEST(ReplayPoolTest, BadCsvsNameTheFileLineAndColumn) {
  const std::string no_column =
      WriteTemp("run_id,architecture,N,D,final_loss\na,full,1,2,3\n");
  absl::StatusOr<MeasuredValues> r = ReadMeasuredCsv(no_column, "loss");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(no_column + ":1: no column 'scale'"),
            std::string::npos)
      << r.status();
  const std::string bad_number = WriteTemp(
      "architecture,scale,D,state,final_loss,val_loss\n"
      "full,S1,1000,SUCCEEDED,2.5,2.x\n");
  r = ReadMeasuredCsv(bad_number, "loss");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find(bad_number + ":2: column val_loss: '2.x'"),
      std::string::npos)
      << r.status();
  EXPECT_EQ(ReadMeasuredCsv("/nonexistent/runs.csv", "loss").status().code(),
            absl::StatusCode::kNotFound);
  std::remove(no_column.c_str());
  std::remove(bad_number.c_str());
}

}  // namespace
}  // namespace hlab::fits
