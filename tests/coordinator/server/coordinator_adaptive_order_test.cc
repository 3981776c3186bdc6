// The adaptive order through an in-process coordinator
// (coordinator/server/adaptive_order.h, docs/sweeps.md "Adaptive order"):
// the demo grid with schedule_policy: adaptive, part of it measured on a
// known law, refitted by the real hlab-sweep-fit; the fit thread's round
// ranks the pending runs by variance reduction per FLOP, leases follow the
// ranks, and a restarted fitter ranks them the same.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/planning/proto_mapping.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/server/adaptive_order.h"
#include "coordinator/server/coordinator.h"
#include "coordinator/server/fit_scheduler.h"
#include "coordinator/sweep/expand.h"
#include "tests/coordinator/server/coordinator_test_util.h"

namespace hlab::coordinator {
namespace {

using testing::FakeClock;
using testing::TempDir;

double TrueLoss(double n, double d) {
  return 1.7 + 400 / std::pow(n, 0.34) + 410 / std::pow(d, 0.28);
}

class AdaptiveOrderSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions options =
        testing::TestOptions(dir_.File("hlab.db"), &clock_);
    options.auto_fit = false;
    coordinator_ = testing::StartOrDie(options);
    ASSERT_NE(coordinator_, nullptr);
  }

  store::Store& Store() { return *coordinator_->store(); }

  // Stores `spec` as a sweep with one TRAIN task per run (cost 6 N D);
  // the runs at S1-S3 with one of the two smallest budgets succeed with a
  // "val_loss" point on TrueLoss, the others stay pending.
  int64_t StoreSweep(const hlab::v1::SweepSpec& spec) {
    auto plan = sweep::PlanSweep(spec);
    EXPECT_TRUE(plan.ok()) << plan.status();
    store::SweepSpec stored;
    stored.name = plan->spec.name();
    stored.spec_hash = plan->spec_hash;
    stored.spec = sweep::SweepSpecToCanonicalJson(plan->spec);
    const int64_t sweep_id = Store().CreateSweep(stored, Now())->sweep_id;
    for (const hlab::v1::Run& r : plan->runs) runs_.push_back(ToRunSpec(r, 3));
    EXPECT_TRUE(Store().AddRuns(sweep_id, runs_, Now()).ok());
    std::map<std::string, int64_t> largest;
    for (const store::RunSpec& run : runs_) {
      largest[run.scale] = std::max(largest[run.scale], run.budget_tokens);
    }
    for (const store::RunSpec& run : runs_) {
      store::TaskSpec task;
      task.id = run.id + ".train";
      task.sweep_id = sweep_id;
      task.run_id = run.id;
      task.cost_flops = 6.0 * static_cast<double>(run.n_params) *
                        static_cast<double>(run.budget_tokens);
      EXPECT_TRUE(Store().AddTasks({task}, Now()).ok());
      if (run.scale == "S4" || run.budget_tokens == largest[run.scale]) {
        continue;
      }
      auto attempt = Store().LeaseTask(task.id, "w1", Now(), kLease);
      EXPECT_TRUE(attempt.ok()) << attempt.status();
      store::MetricPoint loss;
      loss.name = "val_loss";
      loss.step = 10;
      loss.tokens = run.budget_tokens;
      loss.value = TrueLoss(static_cast<double>(run.n_params),
                            static_cast<double>(run.budget_tokens));
      EXPECT_TRUE(Store().RecordMetrics(task.id, *attempt, {loss}, Now()).ok());
      EXPECT_TRUE(Store().CompleteTask(task.id, *attempt, Now()).ok());
    }
    return sweep_id;
  }

  // The sweep's pending runs by rank, as ListRuns shows them.
  std::vector<hlab::v1::Run> Ranked(int64_t sweep_id) {
    store::RunFilter filter;
    filter.sweep_id = sweep_id;
    filter.state = store::RunState::kPending;
    auto runs = Store().ListRuns(filter);
    EXPECT_TRUE(runs.ok()) << runs.status();
    auto protos = coordinator_->context()->catalog->RunProtos(*runs);
    EXPECT_TRUE(protos.ok()) << protos.status();
    std::vector<hlab::v1::Run> out = *protos;
    std::sort(out.begin(), out.end(),
              [](const hlab::v1::Run& a, const hlab::v1::Run& b) {
                return a.order_rank() < b.order_rank();
              });
    return out;
  }

  absl::Time Now() { return clock_.Now(); }

  static constexpr absl::Duration kLease = absl::Seconds(30);
  FakeClock clock_;
  TempDir dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<store::RunSpec> runs_;
};

TEST_F(AdaptiveOrderSweepTest, LiveLawsRankThePendingRunsAndLeasesFollow) {
  hlab::v1::SweepSpec spec = testing::DemoSpec();
  spec.set_schedule_policy("adaptive");
  const int64_t sweep_id = StoreSweep(spec);
  FitSchedulerOptions options;
  options.binary = HLAB_SWEEP_FIT_BINARY;
  options.quick_grid = true;
  options.bootstrap = 0;
  FitScheduler fitter(coordinator_->context(), options);
  auto predicted = fitter.PredictRunningSweeps();
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  ASSERT_EQ(*predicted, 1);
  auto ordered = fitter.OrderAdaptiveSweeps();
  ASSERT_TRUE(ordered.ok()) << ordered.status();
  EXPECT_EQ(*ordered, 1);

  // 4 architectures x (3 fit scales at the largest budget + 3 at S4).
  const std::vector<hlab::v1::Run> ranked = Ranked(sweep_id);
  ASSERT_EQ(ranked.size(), 24u);
  for (size_t i = 0; i < ranked.size(); ++i) {
    const hlab::v1::Run& r = ranked[i];
    SCOPED_TRACE(r.architecture() + " " + r.scale());
    EXPECT_EQ(r.order_rank(), static_cast<int64_t>(i) + 1);
    if (i < 12) {
      // The fit scales' runs narrow each law at S4: scored, in the order
      // of the greedy choice.
      EXPECT_NE(r.scale(), "S4");
      ASSERT_TRUE(r.has_order_score());
      EXPECT_GT(r.order_score(), 0);
      EXPECT_EQ(r.order_reason().rfind("narrows " + r.architecture(), 0), 0u)
          << r.order_reason();
    } else {
      // S4 is the target, never fitted: last, cheapest first.
      EXPECT_EQ(r.scale(), "S4");
      EXPECT_FALSE(r.has_order_score());
      EXPECT_EQ(r.order_reason(), "scale S4 is not fitted: after the fit runs");
    }
  }
  // Leases follow the ranks (one priority, no dependencies).
  auto next = Store().NextLeasableTasks(Now(), 100);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->size(), 24u);
  for (size_t i = 0; i < next->size(); ++i) {
    EXPECT_EQ((*next)[i].spec.id, ranked[i].run_id() + ".train") << i;
  }

  // Nothing changed: no new ranking. A restarted fitter ranks once, the
  // same way.
  EXPECT_EQ(*fitter.OrderAdaptiveSweeps(), 0);
  FitScheduler restarted(coordinator_->context(), options);
  EXPECT_EQ(*restarted.OrderAdaptiveSweeps(), 1);
  const std::vector<hlab::v1::Run> again = Ranked(sweep_id);
  ASSERT_EQ(again.size(), ranked.size());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].run_id(), ranked[i].run_id()) << i;
  }
}

// A task that lost its place (ranked while it was leased, then requeued)
// is ranked again in the next round, though no run finished.
TEST_F(AdaptiveOrderSweepTest, ARequeuedTaskIsRankedAgain) {
  hlab::v1::SweepSpec spec = testing::DemoSpec();
  spec.set_schedule_policy("adaptive");
  const int64_t sweep_id = StoreSweep(spec);
  FitSchedulerOptions options;
  options.binary = "/nonexistent/hlab-sweep-fit";
  FitScheduler fitter(coordinator_->context(), options);
  ASSERT_EQ(*fitter.OrderAdaptiveSweeps(), 1);
  EXPECT_EQ(*fitter.OrderAdaptiveSweeps(), 0);  // nothing changed
  auto next = Store().NextLeasableTasks(Now(), 1);
  ASSERT_TRUE(next.ok() && next->size() == 1u);
  const std::string task = (*next)[0].spec.id;
  auto attempt = Store().LeaseTask(task, "w1", Now(), kLease);
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  ASSERT_TRUE(OrderAdaptiveSweep(*coordinator_->context(), sweep_id).ok());
  EXPECT_FALSE(Store().GetTask(task)->order.has_value());  // leased: none
  EXPECT_EQ(*fitter.OrderAdaptiveSweeps(), 0);
  store::AttemptFailure failure;
  failure.error = "worker lost";
  failure.fault = store::FaultClass::kInfrastructure;
  ASSERT_TRUE(
      Store()
          .FailTask(task, *attempt, failure, Now(), absl::ZeroDuration())
          .ok());
  EXPECT_FALSE(Store().GetTask(task)->order.has_value());
  EXPECT_EQ(*fitter.OrderAdaptiveSweeps(), 1);
  auto again = Store().GetTask(task);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->order.has_value());
  EXPECT_EQ(again->order->rank, 1);  // no law: the cheapest, first again
}

// A sweep in the default order is never ranked, by the fit thread either.
TEST_F(AdaptiveOrderSweepTest, DefaultSweepsAreNotRanked) {
  const int64_t sweep_id = StoreSweep(testing::DemoSpec());
  FitSchedulerOptions options;
  options.binary = "/nonexistent/hlab-sweep-fit";
  FitScheduler fitter(coordinator_->context(), options);
  EXPECT_EQ(*fitter.OrderAdaptiveSweeps(), 0);
  EXPECT_EQ(*OrderAdaptiveSweep(*coordinator_->context(), sweep_id), 0);
  for (const hlab::v1::Run& r : Ranked(sweep_id)) {
    EXPECT_EQ(r.order_rank(), 0);
    EXPECT_FALSE(r.has_order_score());
  }
}

}  // namespace
}  // namespace hlab::coordinator
