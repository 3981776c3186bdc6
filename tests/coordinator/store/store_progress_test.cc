// Run phases and progress in the store: a run on a shared trunk is TRUNK
// while the trunk trains (its state still PENDING), DECAYING while its
// decay runs, WAITING between tasks, EVALUATING, then its end state; its
// progress is its newest train_loss point, and "run_progress" events carry
// both, thinned to one per 1/1000 of the budget.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using testing::MakeRun;
using testing::MakeSweep;
using testing::MakeTask;
using testing::T;
using testing::TempDir;

constexpr absl::Duration kLease = absl::Seconds(30);

// One point of `run` at `step`, 100 tokens a step.
MetricPoint Loss(const std::string& run, int64_t step) {
  MetricPoint p;
  p.run_id = run;
  p.name = "train_loss";
  p.step = step;
  p.tokens = step * 100;
  p.value = 5.0 - 0.01 * static_cast<double>(step);
  return p;
}

// The shared-trunk group of one architecture and scale: runs a, b, c with
// budgets 1000 < 2000 < 4000 tokens, one TRUNK, a DECAY per run after it
// and an EVAL per run after its decay.
struct TrunkFixture {
  TrunkFixture() {
    auto opened = Store::Open(dir.File("hlab.db"));
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = std::move(opened).value();
    sweep_id = store->CreateSweep(MakeSweep("s"), T(0))->sweep_id;
    std::vector<RunSpec> runs;
    for (const auto& [id, budget] : {std::pair<std::string, int64_t>{"a", 1000},
                                     {"b", 2000},
                                     {"c", 4000}}) {
      RunSpec run = MakeRun(id);
      run.budget_tokens = budget;
      runs.push_back(run);
    }
    EXPECT_TRUE(store->AddRuns(sweep_id, runs, T(0)).ok());
    TaskSpec trunk =
        MakeTask("trunk", sweep_id, "", {}, 0, 0, TaskKind::kTrunk);
    trunk.max_attempts = 3;
    std::vector<TaskSpec> tasks = {trunk};
    for (const char* id : {"a", "b", "c"}) {
      const std::string run = id;
      tasks.push_back(MakeTask(run + ".decay", sweep_id, run, {"trunk"}, 0, 0,
                               TaskKind::kDecay));
      tasks.push_back(MakeTask(run + ".eval", sweep_id, run, {run + ".decay"},
                               0, 0, TaskKind::kEval));
    }
    EXPECT_TRUE(store->AddTasks(tasks, T(0)).ok());
  }

  Run Get(const std::string& id) {
    absl::StatusOr<Run> run = store->GetRun(id);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : Run();
  }

  // The "run_progress" events of `run`, oldest first.
  std::vector<Event> Progress(const std::string& run) {
    std::vector<Event> out;
    absl::StatusOr<std::vector<Event>> events =
        store->EventsSince(sweep_id, 0, 100000);
    EXPECT_TRUE(events.ok()) << events.status();
    for (const Event& e : *events) {
      if (e.kind == "run_progress" && e.run_id == run) out.push_back(e);
    }
    return out;
  }

  TempDir dir;
  std::unique_ptr<Store> store;
  int64_t sweep_id = 0;
};

TEST(StoreProgressTest, ARunOnATrainingTrunkIsOnTheTrunkWithItsOwnTokens) {
  TrunkFixture f;
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(f.Get(id).phase, RunPhase::kWaiting) << id;
  }
  ASSERT_TRUE(f.store->LeaseTask("trunk", "w1", T(1), kLease).ok());
  for (const char* id : {"a", "b", "c"}) {
    const store::Run run = f.Get(id);
    EXPECT_EQ(run.phase, RunPhase::kTrunk) << id;
    EXPECT_EQ(run.state, RunState::kPending) << id;  // no task of its own
    ASSERT_EQ(f.Progress(id).size(), 1u) << id;
    EXPECT_EQ(f.Progress(id)[0].phase, RunPhase::kTrunk);
    EXPECT_EQ(f.Progress(id)[0].time, T(1));
  }
  // The trunk at step 15 (1500 tokens): a's branch point is step 9, so its
  // points stop there (the coordinator hands a trunk point to every run
  // that branches at or after it).
  std::vector<MetricPoint> points;
  for (int64_t step = 1; step <= 15; ++step) {
    for (const char* id : {"a", "b", "c"}) {
      if (std::string(id) == "a" && step > 9) continue;
      points.push_back(Loss(id, step));
    }
  }
  ASSERT_TRUE(f.store->RecordMetrics("trunk", 1, points, T(2)).ok());
  EXPECT_EQ(f.Get("a").progress.tokens, 900);
  EXPECT_EQ(f.Get("a").progress.step, 9);
  EXPECT_DOUBLE_EQ(*f.Get("a").progress.loss, 5.0 - 0.09);
  EXPECT_EQ(f.Get("b").progress.tokens, 1500);
  EXPECT_EQ(f.Get("c").progress.tokens, 1500);
  EXPECT_DOUBLE_EQ(*f.Get("c").progress.loss, 5.0 - 0.15);
  // One event per run for the batch, with the run's own figures.
  for (const auto& [id, tokens] :
       {std::pair<std::string, int64_t>{"a", 900}, {"b", 1500}, {"c", 1500}}) {
    const std::vector<Event> events = f.Progress(id);
    ASSERT_EQ(events.size(), 2u) << id;
    EXPECT_EQ(events[1].phase, RunPhase::kTrunk);
    EXPECT_EQ(events[1].progress.tokens, tokens) << id;
    EXPECT_EQ(events[1].time, T(2));
  }
}

TEST(StoreProgressTest, PhasesFollowTheTrunkTheDecayAndTheEvaluation) {
  TrunkFixture f;
  ASSERT_TRUE(f.store->LeaseTask("trunk", "w1", T(1), kLease).ok());
  std::vector<MetricPoint> points;
  for (int64_t step = 1; step <= 9; ++step) points.push_back(Loss("a", step));
  ASSERT_TRUE(f.store->RecordMetrics("trunk", 1, points, T(2)).ok());
  ASSERT_TRUE(f.store->CompleteTask("trunk", 1, T(3)).ok());
  EXPECT_EQ(f.Get("a").phase, RunPhase::kWaiting);  // for a worker
  EXPECT_EQ(f.Get("a").progress.tokens, 900);       // kept

  ASSERT_TRUE(f.store->LeaseTask("a.decay", "w1", T(4), kLease).ok());
  EXPECT_EQ(f.Get("a").phase, RunPhase::kDecaying);
  EXPECT_EQ(f.Get("a").state, RunState::kRunning);
  EXPECT_EQ(f.Get("b").phase, RunPhase::kWaiting);
  // Its own progress continues from the branch point to the budget.
  ASSERT_TRUE(f.store->RecordMetrics("a.decay", 1, {Loss("", 10)}, T(5)).ok());
  EXPECT_EQ(f.Get("a").progress.tokens, 1000);
  ASSERT_TRUE(f.store->CompleteTask("a.decay", 1, T(6)).ok());
  // Trained, and its evaluation waits: RUNNING by state, waiting by phase.
  EXPECT_EQ(f.Get("a").state, RunState::kRunning);
  EXPECT_EQ(f.Get("a").phase, RunPhase::kWaiting);
  ASSERT_TRUE(f.store->LeaseTask("a.eval", "w1", T(7), kLease).ok());
  EXPECT_EQ(f.Get("a").phase, RunPhase::kEvaluating);
  ASSERT_TRUE(f.store->CompleteTask("a.eval", 1, T(8)).ok());
  EXPECT_EQ(f.Get("a").phase, RunPhase::kSucceeded);

  std::vector<RunPhase> phases;
  std::vector<int64_t> tokens;
  for (const Event& e : f.Progress("a")) {
    phases.push_back(*e.phase);
    tokens.push_back(e.progress.tokens);
  }
  // The end is said by the "run_state" event, not by one more of these.
  EXPECT_EQ(phases, (std::vector<RunPhase>{
                        RunPhase::kTrunk, RunPhase::kTrunk, RunPhase::kWaiting,
                        RunPhase::kDecaying, RunPhase::kDecaying,
                        RunPhase::kWaiting, RunPhase::kEvaluating}));
  EXPECT_EQ(tokens, (std::vector<int64_t>{0, 900, 900, 900, 1000, 1000, 1000}));
}

TEST(StoreProgressTest, AnExpiredTrunkLeaseSendsItsRunsBackToWaiting) {
  TrunkFixture f;
  ASSERT_TRUE(f.store->LeaseTask("trunk", "w1", T(1), kLease).ok());
  ASSERT_EQ(f.Get("c").phase, RunPhase::kTrunk);
  ASSERT_TRUE(f.store->ExpireLeases(T(100)).ok());
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(f.Get(id).phase, RunPhase::kWaiting) << id;
  }
  ASSERT_TRUE(f.store->CancelRun("c", T(101)).ok());
  EXPECT_EQ(f.Get("c").phase, RunPhase::kCancelled);
}

TEST(StoreProgressTest, ProgressEventsComeOncePerThousandthOfTheBudget) {
  testing::Fixture f;  // run r1: a budget of 1,000,000 tokens
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  // 100 batches of one point, 100 tokens apart: 10,000 tokens, 1% of the
  // budget, so the first point and then one per 1000 tokens.
  for (int64_t step = 1; step <= 100; ++step) {
    ASSERT_TRUE(
        f.store->RecordMetrics("r1.train", 1, {Loss("", step)}, T(step)).ok());
  }
  std::vector<int64_t> tokens;
  absl::StatusOr<std::vector<Event>> events =
      f.store->EventsSince(f.sweep_id, 0, 100000);
  ASSERT_TRUE(events.ok());
  for (const Event& e : *events) {
    if (e.kind != "run_progress") continue;
    EXPECT_EQ(e.phase, RunPhase::kTraining);
    tokens.push_back(e.progress.tokens);
  }
  EXPECT_EQ(tokens, (std::vector<int64_t>{0, 100, 1000, 2000, 3000, 4000, 5000,
                                          6000, 7000, 8000, 9000, 10000}));
  EXPECT_EQ(f.store->GetRun("r1")->progress.tokens, 10000);
  // A replay moves nothing and says nothing.
  ASSERT_TRUE(
      f.store->RecordMetrics("r1.train", 1, {Loss("", 100)}, T(200)).ok());
  EXPECT_EQ(f.store->EventsSince(f.sweep_id, 0, 100000)->size(),
            events->size());
}

TEST(StoreProgressTest, ListRunsFiltersByPhase) {
  TrunkFixture f;
  ASSERT_TRUE(f.store->LeaseTask("trunk", "w1", T(1), kLease).ok());
  RunFilter filter;
  filter.phases = {RunPhase::kTrunk, RunPhase::kDecaying};
  EXPECT_EQ(f.store->ListRuns(filter)->size(), 3u);
  filter.phases = {RunPhase::kWaiting};
  EXPECT_EQ(f.store->ListRuns(filter)->size(), 0u);
}

}  // namespace
}  // namespace hlab::store
