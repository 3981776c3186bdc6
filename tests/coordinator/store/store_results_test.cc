// Metrics, checkpoints, evals, fits, events and workers.
#include <future>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using testing::Fixture;
using testing::MakeRun;
using testing::MakeTask;
using testing::T;

const absl::Duration kLease = absl::Seconds(30);

std::vector<MetricPoint> Points(int first_step, int count) {
  std::vector<MetricPoint> points;
  for (int i = 0; i < count; ++i) {
    MetricPoint p;
    p.name = "train_loss";
    p.step = first_step + i;
    p.value = 10.0 - 0.01 * p.step;
    p.tokens = 1000 * p.step;
    p.wall_time = 0.5 * p.step;
    points.push_back(p);
  }
  return points;
}

TEST(StoreMetricsTest, ReplayAddsNoRows) {
  Fixture f;
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w1", T(0), kLease), 1);
  ASSERT_TRUE(f.store->RecordMetrics("r1.train", 1, Points(0, 50), T(1)).ok());
  // Resume after a crash: lease again, replay steps 40..59.
  ASSERT_EQ(f.store->ExpireLeases(T(30))->size(), 1u);
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w2", T(31), kLease), 2);
  std::vector<MetricPoint> replay = Points(40, 20);
  replay[0].value = 123.0;  // a replayed point never overwrites
  ASSERT_TRUE(f.store->RecordMetrics("r1.train", 2, replay, T(1)).ok());
  ASSERT_TRUE(f.store->RecordMetrics("r1.train", 2, replay, T(1)).ok());
  auto points = f.store->ReadMetrics("r1", "train_loss");
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 60u);
  EXPECT_EQ((*points)[40].value, 10.0 - 0.4);
  EXPECT_EQ((*points)[59].tokens, 59000);
}

TEST(StoreMetricsTest, PointsOfAnotherRunAreRefusedWhole) {
  Fixture f;
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2")}, T(0)).ok());
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  std::vector<MetricPoint> points = Points(0, 3);
  points[2].run_id = "r2";
  EXPECT_EQ(f.store->RecordMetrics("r1.train", 1, points, T(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(f.store->ReadMetrics("r1", "train_loss")->empty());
}

TEST(StoreMetricsTest, TrunkPointsNameTheirRun) {
  Fixture f;
  TaskSpec trunk =
      MakeTask("trunk", f.sweep_id, "", {}, 0, 0, TaskKind::kTrunk);
  trunk.max_attempts = 3;
  ASSERT_TRUE(f.store->AddTasks({trunk}, T(0)).ok());
  ASSERT_TRUE(f.store->LeaseTask("trunk", "w1", T(0), kLease).ok());
  EXPECT_EQ(f.store->RecordMetrics("trunk", 1, Points(0, 1), T(1)).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<MetricPoint> points = Points(0, 1);
  points[0].run_id = "r1";
  EXPECT_TRUE(f.store->RecordMetrics("trunk", 1, points, T(1)).ok());
  points[0].run_id = "unknown-run";
  EXPECT_EQ(f.store->RecordMetrics("trunk", 1, points, T(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StoreMetricsTest, AsyncRecordCompletesAfterCommit) {
  Fixture f;
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  std::promise<std::pair<absl::Status, int64_t>> done;
  f.store->RecordMetricsAsync("r1.train", 1, Points(0, 5), "w1", T(1),
                              [&](absl::Status s, int64_t added) {
                                done.set_value({s, added});
                              });
  auto [status, added] = done.get_future().get();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(added, 5);
  // Durable when `done` runs: a read sees every point.
  EXPECT_EQ(f.store->ReadMetrics("r1", "train_loss")->size(), 5u);
}

TEST(StoreMetricsTest, AsyncRecordIsFencedAndCountsOnlyNewPoints) {
  Fixture f;
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  auto record = [&](int attempt, const std::string& worker, int first, int n) {
    std::promise<std::pair<absl::Status, int64_t>> done;
    f.store->RecordMetricsAsync("r1.train", attempt, Points(first, n), worker,
                                T(1), [&](absl::Status s, int64_t added) {
                                  done.set_value({s, added});
                                });
    return done.get_future().get();
  };
  EXPECT_EQ(record(1, "w1", 0, 10).second, 10);
  // A replay overlapping by half: only the new half counts.
  auto [replay_status, replay_added] = record(1, "w1", 5, 10);
  EXPECT_TRUE(replay_status.ok()) << replay_status;
  EXPECT_EQ(replay_added, 5);
  // Another worker, or a stale attempt: refused, nothing stored or counted.
  auto [other_status, other_added] = record(1, "w2", 100, 3);
  EXPECT_EQ(other_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other_added, 0);
  auto [stale_status, stale_added] = record(0, "w1", 200, 3);
  EXPECT_EQ(stale_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stale_added, 0);
  EXPECT_EQ(f.store->ReadMetrics("r1", "train_loss")->size(), 15u);
}

TEST(StoreCheckpointTest, NewestCheckpointIsFenced) {
  Fixture f;
  EXPECT_EQ(f.store->NewestCheckpoint("r1.train").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  Checkpoint c;
  c.task_id = "r1.train";
  c.path = "/ckpt/100";
  c.checksum = "abc";
  c.step = 100;
  c.tokens = 100000;
  ASSERT_TRUE(f.store->RecordCheckpoint(c, 1, T(1)).ok());
  c.step = 200;
  c.path = "/ckpt/200";
  c.kind = CheckpointKind::kBranch;
  ASSERT_TRUE(f.store->RecordCheckpoint(c, 1, T(2)).ok());
  c.step = 300;
  EXPECT_EQ(f.store->RecordCheckpoint(c, 5, T(3)).code(),
            absl::StatusCode::kFailedPrecondition);
  auto newest = f.store->NewestCheckpoint("r1.train");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->step, 200);
  EXPECT_EQ(newest->path, "/ckpt/200");
  EXPECT_EQ(newest->kind, CheckpointKind::kBranch);
  EXPECT_EQ(newest->attempt, 1);
  EXPECT_EQ(newest->run_id, "r1");
  EXPECT_EQ(f.store->NewestRunCheckpoint("r1")->step, 200);
}

TEST(StoreCheckpointTest, DecayResumesFromItsTrunkBranchPoint) {
  Fixture f;
  TaskSpec trunk =
      MakeTask("trunk", f.sweep_id, "", {}, 0, 0, TaskKind::kTrunk);
  trunk.max_attempts = 3;
  TaskSpec decay =
      MakeTask("r1.decay", f.sweep_id, "r1", {"trunk"}, 0, 0, TaskKind::kDecay);
  ASSERT_TRUE(f.store->AddTasks({trunk, decay}, T(0)).ok());
  ASSERT_EQ(*f.store->LeaseTask("trunk", "w1", T(0), kLease), 1);
  Checkpoint latest;
  latest.task_id = "trunk";
  latest.step = 900;
  latest.path = "/ckpt/trunk/900";
  latest.checksum = "l";
  ASSERT_TRUE(f.store->RecordCheckpoint(latest, 1, T(1)).ok());
  Checkpoint branch = latest;
  branch.run_id = "r1";
  branch.step = 450;
  branch.path = "/ckpt/trunk/branch-r1-450";
  branch.kind = CheckpointKind::kBranch;
  ASSERT_TRUE(f.store->RecordCheckpoint(branch, 1, T(2)).ok());
  ASSERT_TRUE(f.store->CompleteTask("trunk", 1, T(3)).ok());
  auto start = f.store->NewestRunCheckpoint("r1");
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->path, "/ckpt/trunk/branch-r1-450");
  EXPECT_EQ(f.store->NewestCheckpoint("trunk")->step, 900);
  ASSERT_EQ(*f.store->LeaseTask("r1.decay", "w2", T(4), kLease), 1);
  Checkpoint own;
  own.task_id = "r1.decay";
  own.step = 480;
  own.path = "/ckpt/r1/480";
  own.checksum = "d";
  ASSERT_TRUE(f.store->RecordCheckpoint(own, 1, T(5)).ok());
  EXPECT_EQ(f.store->NewestRunCheckpoint("r1")->path, "/ckpt/r1/480");
}

TEST(StoreEvalTest, EvalsAndFitsShowInTheViews) {
  Fixture f;
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(0), kLease).ok());
  ASSERT_TRUE(f.store->RecordMetrics("r1.train", 1, Points(0, 10), T(1)).ok());
  EvalResult eval;
  eval.run_id = "r1";
  eval.step = 9;
  eval.metric = "val_loss";
  eval.value = 3.0;
  ASSERT_TRUE(f.store->RecordEval("r1.train", 1, eval).ok());
  eval.value = 2.75;  // re-evaluation replaces
  ASSERT_TRUE(f.store->RecordEval("r1.train", 1, eval).ok());
  EXPECT_EQ(f.store->RecordEval("r1.train", 2, eval).code(),
            absl::StatusCode::kFailedPrecondition);
  FitRecord fit;
  fit.sweep_id = f.sweep_id;
  fit.arch = "swa";
  fit.target = "val_loss";
  fit.e = 1.7;
  fit.r2_fit = 0.99;
  ASSERT_TRUE(f.store->RecordFit(fit, T(5)).ok());
  fit.e = 1.8;  // a refit replaces
  ASSERT_TRUE(f.store->RecordFit(fit, T(6)).ok());
  fit.sweep_id = 999;
  EXPECT_EQ(f.store->RecordFit(fit, T(6)).code(), absl::StatusCode::kNotFound);

  auto engine = QueryEngine::Open(f.store->path());
  ASSERT_TRUE(engine.ok());
  auto runs = (*engine)->Run(
      "SELECT run_id, state, last_step, final_train_loss, final_val_loss,"
      " tokens FROM run_summary",
      QueryOptions());
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->rows.size(), 1u);
  const auto& row = runs->rows[0];
  EXPECT_EQ(std::get<std::string>(row[0]), "r1");
  EXPECT_EQ(std::get<std::string>(row[1]), "RUNNING");
  EXPECT_EQ(std::get<int64_t>(row[2]), 9);
  EXPECT_DOUBLE_EQ(std::get<double>(row[3]), 10.0 - 0.09);
  EXPECT_DOUBLE_EQ(std::get<double>(row[4]), 2.75);
  EXPECT_EQ(std::get<int64_t>(row[5]), 9000);
  auto fits = (*engine)->Run("SELECT sweep, arch, target, e FROM fit_summary",
                             QueryOptions());
  ASSERT_TRUE(fits.ok()) << fits.status();
  ASSERT_EQ(fits->rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(fits->rows[0][0]), "s");
  EXPECT_DOUBLE_EQ(std::get<double>(fits->rows[0][3]), 1.8);
}

TEST(StoreEventTest, EventsSinceSeq) {
  Fixture f;
  // Creating the sweep logged one event already.
  auto initial = f.store->EventsSince(f.sweep_id, 0, 100);
  ASSERT_TRUE(initial.ok());
  ASSERT_FALSE(initial->empty());
  EXPECT_EQ((*initial)[0].kind, "sweep_created");
  int64_t last = initial->back().seq;
  ASSERT_TRUE(f.store->LeaseTask("r1.train", "w1", T(1), kLease).ok());
  Event note;
  note.sweep_id = f.sweep_id;
  note.kind = "note";
  note.message = "hello";
  note.time = T(2);
  auto seq = f.store->AppendEvent(note);
  ASSERT_TRUE(seq.ok());
  EXPECT_GT(*seq, last);
  Event elsewhere = note;
  elsewhere.sweep_id = 0;
  ASSERT_TRUE(f.store->AppendEvent(elsewhere).ok());
  auto since = f.store->EventsSince(f.sweep_id, last, 100);
  ASSERT_TRUE(since.ok());
  // The lease: the run's new state, then its new phase.
  ASSERT_EQ(since->size(), 3u);
  EXPECT_EQ((*since)[0].kind, "run_state");
  EXPECT_EQ((*since)[0].message, "RUNNING");
  EXPECT_EQ((*since)[0].run_id, "r1");
  EXPECT_EQ((*since)[1].kind, "run_progress");
  EXPECT_EQ((*since)[1].phase, RunPhase::kTraining);
  EXPECT_EQ((*since)[1].message, "TRAINING 0/1000000 tokens, step 0");
  EXPECT_EQ((*since)[2].seq, *seq);
  EXPECT_EQ((*since)[2].time, T(2));
  EXPECT_FALSE((*since)[2].phase.has_value());  // not a progress event
  EXPECT_EQ(f.store->EventsSince(f.sweep_id, last, 1)->size(), 1u);
  EXPECT_EQ(f.store->EventsSince(0, last, 100)->size(), 4u);  // all sweeps
  EXPECT_TRUE(f.store->EventsSince(f.sweep_id, *seq, 100)->empty());
}

// The "sweep_finished" events of f's sweep, their messages in order.
std::vector<std::string> SweepFinished(Fixture& f) {
  std::vector<std::string> out;
  absl::StatusOr<std::vector<Event>> events =
      f.store->EventsSince(f.sweep_id, 0, 100000);
  EXPECT_TRUE(events.ok()) << events.status();
  if (!events.ok()) return out;
  for (const Event& e : *events) {
    if (e.kind == "sweep_finished") out.push_back(e.message);
  }
  return out;
}

TEST(StoreEventTest, ASweepFinishesWhenItsLastRunEndsAndAgainAfterAResume) {
  Fixture f(/*max_attempts=*/1);
  ASSERT_TRUE(f.store->AddRuns(f.sweep_id, {MakeRun("r2", 1)}, T(0)).ok());
  ASSERT_TRUE(
      f.store->AddTasks({MakeTask("r2.train", f.sweep_id, "r2")}, T(0)).ok());
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w1", T(1), kLease), 1);
  ASSERT_TRUE(f.store->CompleteTask("r1.train", 1, T(2)).ok());
  EXPECT_TRUE(SweepFinished(f).empty());  // r2 is still pending
  ASSERT_EQ(*f.store->LeaseTask("r2.train", "w1", T(3), kLease), 1);
  ASSERT_EQ(*f.store->FailTask("r2.train", 1, {"boom", FaultClass::kTask, true},
                               T(4), absl::ZeroDuration()),
            TaskState::kFailed);
  EXPECT_EQ(SweepFinished(f),
            std::vector<std::string>{"INCOMPLETE: 1 succeeded, 1 failed, 0 "
                                     "cancelled, 0 predicted"});
  // Resumed, the failed run succeeds: the sweep finishes again.
  ASSERT_EQ(f.store->ResumeRuns({"r2"}, T(5))->size(), 1u);
  ASSERT_EQ(*f.store->LeaseTask("r2.train", "w1", T(6), kLease), 2);
  ASSERT_TRUE(f.store->CompleteTask("r2.train", 2, T(7)).ok());
  EXPECT_EQ(SweepFinished(f),
            (std::vector<std::string>{
                "INCOMPLETE: 1 succeeded, 1 failed, 0 cancelled, 0 predicted",
                "SUCCEEDED: 2 runs"}));
}

TEST(StoreEventTest, ACancelledSweepDoesNotAlsoFinish) {
  Fixture f;
  ASSERT_TRUE(f.store->CancelSweep(f.sweep_id, T(1)).ok());
  EXPECT_TRUE(SweepFinished(f).empty());
  int cancelled = 0;
  absl::StatusOr<std::vector<Event>> events =
      f.store->EventsSince(f.sweep_id, 0, 100000);
  ASSERT_TRUE(events.ok()) << events.status();
  for (const Event& e : *events) cancelled += e.kind == "sweep_cancelled";
  EXPECT_EQ(cancelled, 1);
}

TEST(StoreWorkerTest, RegisterHeartbeatAndLose) {
  Fixture f;
  WorkerInfo w;
  w.id = "w1";
  w.address = "10.0.0.1:7000";
  w.devices = "[\"cuda:0\"]";
  w.capacity = 1;
  ASSERT_TRUE(f.store->RegisterWorker(w, T(0)).ok());
  EXPECT_EQ(f.store->HeartbeatWorker("w2", T(1)).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(f.store->HeartbeatWorker("w1", T(10)).ok());
  EXPECT_TRUE(f.store->MarkLostWorkers(T(20), absl::Seconds(30))->empty());
  EXPECT_THAT(*f.store->MarkLostWorkers(T(41), absl::Seconds(30)),
              ::testing::ElementsAre("w1"));
  auto workers = f.store->ListWorkers();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].state, WorkerState::kLost);
  EXPECT_EQ((*workers)[0].last_heartbeat, T(10));
  ASSERT_TRUE(f.store->RegisterWorker(w, T(50)).ok());
  EXPECT_EQ((*f.store->ListWorkers())[0].state, WorkerState::kUp);
}

// `hlab drain`: a drained worker is leased nothing, keeps that state when
// it registers again and when the coordinator reopens the database, and
// takes tasks again once undrained; each change is one event.
TEST(StoreWorkerTest, DrainingRefusesLeasesUntilUndrained) {
  Fixture f;
  WorkerInfo w;
  w.id = "w1";
  w.address = "node-1";
  w.version = "hlab 0123abc";
  ASSERT_TRUE(f.store->RegisterWorker(w, T(0)).ok());
  EXPECT_EQ(f.store->SetWorkerDraining("nope", true, T(1)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(f.store->WorkerDraining("w1"));

  auto drained = f.store->SetWorkerDraining("w1", true, T(1));
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_TRUE(drained->draining);
  EXPECT_EQ(drained->version, "hlab 0123abc");
  EXPECT_TRUE(f.store->WorkerDraining("w1"));
  EXPECT_EQ(f.store->LeaseTask("r1.train", "w1", T(2), absl::Seconds(30))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.store->GetTask("r1.train")->state, TaskState::kPending);
  // Draining again changes nothing (no second event).
  ASSERT_TRUE(f.store->SetWorkerDraining("w1", true, T(3)).ok());
  // Registering again (a restart of the worker) keeps it drained.
  ASSERT_TRUE(f.store->RegisterWorker(w, T(4)).ok());
  EXPECT_TRUE((*f.store->ListWorkers())[0].draining);

  // The coordinator's restart: the flag comes back from the database.
  f.store.reset();
  auto reopened = Store::Open(f.dir.File("hlab.db"));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  f.store = std::move(reopened).value();
  EXPECT_TRUE(f.store->WorkerDraining("w1"));
  EXPECT_EQ(f.store->LeaseTask("r1.train", "w1", T(5), absl::Seconds(30))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);

  auto undrained = f.store->SetWorkerDraining("w1", false, T(6));
  ASSERT_TRUE(undrained.ok()) << undrained.status();
  EXPECT_FALSE(undrained->draining);
  EXPECT_FALSE(f.store->WorkerDraining("w1"));
  auto attempt = f.store->LeaseTask("r1.train", "w1", T(7), absl::Seconds(30));
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  EXPECT_EQ(*attempt, 1);

  auto events = f.store->EventsSince(0, 0, 1000);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<std::string> kinds;
  for (const Event& e : *events) {
    if (absl::StartsWith(e.kind, "worker_")) {
      kinds.push_back(e.kind + " " + e.message);
    }
  }
  EXPECT_THAT(kinds, ::testing::ElementsAre("worker_draining w1",
                                            "worker_undrained w1"));
}

}  // namespace
}  // namespace hlab::store
