// Early stop (coordinator/server/early_stop.h, docs/sweeps.md "Early
// stop"): live predictions narrower than the spec's
// adaptive.stop_when.interval_below make pending runs PREDICTED; the
// sweep then ends SUCCEEDED and its final fits read measured runs only.
// Runs are stored directly through an in-process coordinator's store; the
// predictions come from the real hlab-sweep-fit child, or are stored by
// hand where the rule itself is tested.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "coordinator/planning/proto_mapping.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/server/coordinator.h"
#include "coordinator/server/early_stop.h"
#include "coordinator/server/fit_scheduler.h"
#include "coordinator/sweep/expand.h"
#include "tests/coordinator/server/coordinator_test_util.h"

namespace hlab::coordinator {
namespace {

using testing::FakeClock;
using testing::TempDir;

// The loss every run would measure: one law for all architectures.
double TrueLoss(double n, double d) {
  return 1.7 + 400 / std::pow(n, 0.34) + 410 / std::pow(d, 0.28);
}

class EarlyStopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions options =
        testing::TestOptions(dir_.File("hlab.db"), &clock_);
    options.auto_fit = false;
    coordinator_ = testing::StartOrDie(options);
    ASSERT_NE(coordinator_, nullptr);
  }

  store::Store& Store() { return *coordinator_->store(); }

  // Stores `spec` as a sweep with one TRAIN task per run; the runs of
  // scales other than `pending_scale` succeed with a "val_loss" point on
  // TrueLoss.
  int64_t StoreSweep(const hlab::v1::SweepSpec& spec,
                     const std::string& pending_scale) {
    auto plan = sweep::PlanSweep(spec);
    EXPECT_TRUE(plan.ok()) << plan.status();
    store::SweepSpec stored;
    stored.name = plan->spec.name();
    stored.spec_hash = plan->spec_hash;
    stored.spec = sweep::SweepSpecToCanonicalJson(plan->spec);
    const int64_t sweep_id = Store().CreateSweep(stored, Now())->sweep_id;
    for (const hlab::v1::Run& r : plan->runs) runs_.push_back(ToRunSpec(r, 3));
    EXPECT_TRUE(Store().AddRuns(sweep_id, runs_, Now()).ok());
    for (const store::RunSpec& run : runs_) {
      store::TaskSpec task;
      task.id = run.id + ".train";
      task.sweep_id = sweep_id;
      task.run_id = run.id;
      EXPECT_TRUE(Store().AddTasks({task}, Now()).ok());
      if (run.scale == pending_scale) continue;
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

  // An on-demand evaluation of `run_id` that stores val_loss = `value`:
  // a figure a PREDICTED run may carry that was never its training's.
  void RecordOnDemandValLoss(const std::string& run_id, int64_t sweep_id,
                             double value) {
    store::TaskSpec task;
    task.id = run_id + ".ondemand";
    task.sweep_id = sweep_id;
    task.run_id = run_id;
    task.kind = store::TaskKind::kEval;
    task.on_demand = true;
    task.max_attempts = 1;
    ASSERT_TRUE(Store().AddTasks({task}, Now()).ok());
    auto attempt = Store().LeaseTask(task.id, "w1", Now(), kLease);
    ASSERT_TRUE(attempt.ok()) << attempt.status();
    store::EvalResult eval;
    eval.run_id = run_id;
    eval.step = 1;
    eval.metric = "val_loss";
    eval.value = value;
    ASSERT_TRUE(Store().RecordEval(task.id, *attempt, eval).ok());
    ASSERT_TRUE(Store().CompleteTask(task.id, *attempt, Now()).ok());
  }

  hlab::v1::Sweep SweepProto(int64_t sweep_id) {
    auto sweep = Store().GetSweep(sweep_id);
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    auto proto = coordinator_->context()->catalog->SweepProto(*sweep);
    EXPECT_TRUE(proto.ok()) << proto.status();
    return proto.ok() ? *proto : hlab::v1::Sweep();
  }

  absl::Time Now() { return clock_.Now(); }

  static constexpr absl::Duration kLease = absl::Seconds(30);
  FakeClock clock_;
  TempDir dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<store::RunSpec> runs_;
};

// The rule on hand-made predictions: only a run's first-fit-target
// prediction with both ends and a width below X stops it.
TEST_F(EarlyStopTest, OnlyANarrowIntervalOfTheFirstTargetStopsARun) {
  hlab::v1::SweepSpec spec =
      testing::Spec(testing::TinySpecYaml("tiny", "[5, 10, 20, 40, 80]") +
                    "fit: {}\nadaptive: {stop_when: {interval_below: 0.05}}\n");
  const int64_t sweep_id = StoreSweep(spec, "S1");  // all 5 pending
  ASSERT_EQ(runs_.size(), 5u);
  store::PredictionGeneration g;
  g.sweep_id = sweep_id;
  g.n_succeeded = 0;
  auto add = [&](int run, const std::string& target, double lo, double hi,
                 bool bounded) {
    store::Prediction p;
    p.run_id = runs_[run].id;
    p.target = target;
    p.predicted = (lo + hi) / 2;
    if (bounded) {
      p.lower = lo;
      p.upper = hi;
    }
    p.method = target == "train_loss" ? "curve" : "profile";
    p.n_points = 9;
    g.predictions.push_back(p);
  };
  add(0, "loss", 2.30, 2.34, true);        // width 0.04 < 0.05: stopped
  add(1, "loss", 2.30, 2.40, true);        // 0.10: trained
  add(2, "loss", 2.30, 2.31, false);       // no interval: trained
  add(3, "train_loss", 2.30, 2.31, true);  // not the fit target: trained
  add(4, "loss", 2.30, 2.35, true);        // 0.05 is not below 0.05
  ASSERT_TRUE(Store().RecordPredictions(g, Now()).ok());

  auto stopped = StopRunsPredictedWell(*coordinator_->context(), sweep_id);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  ASSERT_EQ(stopped->size(), 1u);
  EXPECT_EQ((*stopped)[0], runs_[0].id);
  EXPECT_EQ(Store().GetRun(runs_[0].id)->state, store::RunState::kPredicted);
  EXPECT_EQ(Store().GetTask(runs_[0].id + ".train")->state,
            store::TaskState::kCancelled);
  for (int i = 1; i < 5; ++i) {
    EXPECT_EQ(Store().GetRun(runs_[i].id)->state, store::RunState::kPending)
        << i;
  }
  const hlab::v1::Sweep proto = SweepProto(sweep_id);
  EXPECT_EQ(proto.runs_stopped(), 1);
  EXPECT_EQ(proto.runs_pending(), 4);
  EXPECT_EQ(proto.state(), hlab::v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(ToProto(store::RunState::kPredicted),
            hlab::v1::RUN_STATE_PREDICTED);

  // Without stop_when nothing is stopped, whatever the intervals.
  hlab::v1::SweepSpec off = spec;
  off.clear_adaptive();
  EXPECT_TRUE(StopCandidates(off, g).empty());
}

// Stopping never leaves a fit scale of an architecture without a run that
// is measured or will be: there the cheapest candidate is trained.
TEST(KeepFitScalesMeasuredTest, EachFitCellKeepsItsCheapestRun) {
  hlab::v1::SweepSpec spec;
  spec.mutable_fit()->add_fit_scales("S1");
  spec.mutable_fit()->add_fit_scales("S2");
  spec.mutable_fit()->add_verify_scales("S3");
  std::vector<store::Run> runs;
  std::vector<StopCandidate> candidates;
  auto add = [&](const std::string& id, const std::string& arch,
                 const std::string& scale, int64_t tokens,
                 store::RunState state, bool candidate) {
    store::Run run;
    run.spec.id = id;
    run.spec.arch = arch;
    run.spec.scale = scale;
    run.spec.budget_tokens = tokens;
    run.state = state;
    runs.push_back(run);
    if (candidate) candidates.push_back({id, "narrow"});
  };
  using S = store::RunState;
  add("a1-done", "a", "S1", 100, S::kSucceeded, false);
  add("a1-big", "a", "S1", 400, S::kPending, true);    // S1 measured: stop
  add("a2-small", "a", "S2", 100, S::kPending, true);  // the cell's cheapest
  add("a2-mid", "a", "S2", 200, S::kPending, true);    // stop
  add("a2-big", "a", "S2", 400, S::kPending, true);    // stop
  add("a3-small", "a", "S3", 100, S::kPending, true);  // verify scale: stop
  add("a3-big", "a", "S3", 400, S::kPending, true);    // stop
  add("b2-run", "b", "S2", 100, S::kRunning, false);
  add("b2-big", "b", "S2", 400, S::kPending, true);  // S2 training: stop
  add("b1-wait", "b", "S1", 100, S::kPending, false);
  add("b1-big", "b", "S1", 400, S::kPending, true);     // b1-wait trains: stop
  add("c1-old", "c", "S1", 100, S::kPredicted, false);  // stopped before
  add("c1-next", "c", "S1", 200, S::kPending, true);    // the last: trained
  std::vector<std::string> stopped;
  for (const StopCandidate& c : KeepFitScalesMeasured(spec, runs, candidates)) {
    stopped.push_back(c.run_id);
  }
  EXPECT_EQ(stopped,
            (std::vector<std::string>{"a1-big", "a2-mid", "a2-big", "a3-small",
                                      "a3-big", "b2-big", "b1-big"}));
}

// A coordinator stopped after storing a generation but before acting on
// it: the fitter of the next start applies the stored generation at once,
// without a refit (no run finished since; its binary is never run).
TEST_F(EarlyStopTest, ARestartedFitterActsOnTheStoredGeneration) {
  const int64_t sweep_id = StoreSweep(
      testing::Spec(testing::TinySpecYaml("tiny", "[5, 10]") +
                    "fit: {}\nadaptive: {stop_when: {interval_below: 0.05}}\n"),
      "S1");
  store::PredictionGeneration g;
  g.sweep_id = sweep_id;
  store::Prediction p;
  p.run_id = runs_[1].id;
  p.target = "loss";
  p.predicted = 2.31;
  p.lower = 2.30;
  p.upper = 2.32;
  p.method = "profile";
  g.predictions = {p};
  ASSERT_TRUE(Store().RecordPredictions(g, Now()).ok());
  FitSchedulerOptions options;
  options.binary = "/nonexistent/hlab-sweep-fit";
  FitScheduler fitter(coordinator_->context(), options);
  auto refits = fitter.PredictRunningSweeps();
  ASSERT_TRUE(refits.ok()) << refits.status();
  EXPECT_EQ(*refits, 0);
  EXPECT_EQ(Store().GetRun(runs_[1].id)->state, store::RunState::kPredicted);
  EXPECT_EQ(Store().GetRun(runs_[0].id)->state, store::RunState::kPending);
}

// End to end: the demo grid with S1-S3 measured and S4 pending. The
// refit's noise-free extrapolations to S4 are far narrower than 0.5 nats,
// so every S4 run is PREDICTED; the sweep is finished and SUCCEEDED, and
// its final fits use the 36 measured runs only, even where a PREDICTED
// run carries a val_loss of an on-demand evaluation.
TEST_F(EarlyStopTest, NarrowLivePredictionsStopPendingRunsAndFitsStayMeasured) {
  hlab::v1::SweepSpec spec = testing::DemoSpec();
  spec.mutable_adaptive()->mutable_stop_when()->set_interval_below(0.5);
  const int64_t sweep_id = StoreSweep(spec, "S4");
  FitSchedulerOptions options;
  options.binary = HLAB_SWEEP_FIT_BINARY;
  options.quick_grid = true;
  options.bootstrap = 0;
  FitScheduler fitter(coordinator_->context(), options);
  auto predicted = fitter.PredictRunningSweeps();
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  ASSERT_EQ(*predicted, 1);

  std::vector<std::string> s4;
  for (const store::RunSpec& run : runs_) {
    if (run.scale != "S4") continue;
    s4.push_back(run.id);
    auto stored = Store().GetRun(run.id);
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(stored->state, store::RunState::kPredicted) << run.arch;
    EXPECT_EQ(stored->phase, store::RunPhase::kPredicted) << run.arch;
  }
  ASSERT_EQ(s4.size(), 12u);
  hlab::v1::Sweep proto = SweepProto(sweep_id);
  EXPECT_EQ(proto.runs_stopped(), 12);
  EXPECT_EQ(proto.state(), hlab::v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_TRUE(*coordinator_->context()->catalog->Finished(sweep_id));

  RecordOnDemandValLoss(s4[0], sweep_id, 100.0);
  EXPECT_EQ(Store().GetRun(s4[0])->state, store::RunState::kPredicted);

  ASSERT_EQ(*fitter.FitFinishedSweeps(), 1);
  auto fits = coordinator_->context()->query->Run(
      "SELECT arch, n_points, e, details, r2_verify FROM fits WHERE target ="
      " 'loss' ORDER BY arch",
      {});
  ASSERT_TRUE(fits.ok()) << fits.status();
  ASSERT_EQ(fits->rows.size(), 4u);
  for (const auto& row : fits->rows) {
    SCOPED_TRACE(std::get<std::string>(row[0]));
    EXPECT_EQ(std::get<int64_t>(row[1]), 9);  // S1-S3 x 3 budgets
    EXPECT_NEAR(std::get<double>(row[2]), 1.7, 0.02);
    const auto details = nlohmann::json::parse(std::get<std::string>(row[3]));
    EXPECT_EQ(details["measured_points"], 9);  // no verify point: S4 stopped
    // No R^2 on held-out points, not a zero.
    EXPECT_TRUE(std::holds_alternative<std::monostate>(row[4]));
    ASSERT_EQ(details["predicted_runs"].size(), 3u);
  }
  auto events = Store().EventsSince(sweep_id, 0, 100000);
  ASSERT_TRUE(events.ok());
  std::string fit_message;
  std::vector<std::string> ended;
  int stopped_events = 0;
  for (const store::Event& e : *events) {
    if (e.kind == "fits") fit_message = e.message;
    if (e.kind == "sweep_finished") ended.push_back(e.message);
    if (e.kind == "run_state" && e.message.rfind("PREDICTED: loss ", 0) == 0) {
      ++stopped_events;
    }
  }
  EXPECT_EQ(stopped_events, 12);
  // The last stopped run ended the sweep.
  EXPECT_EQ(ended,
            std::vector<std::string>{"SUCCEEDED: 48 runs, 12 predicted"});
  EXPECT_NE(fit_message.find("3 runs predicted (stopped early), not fitted"),
            std::string::npos)
      << fit_message;
}

}  // namespace
}  // namespace hlab::coordinator
