// Schema, migrations, pragmas and durability across reopen.
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/store/database.h"
#include "coordinator/store/schema.h"
#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using testing::MakeRun;
using testing::MakeSweep;
using testing::MakeTask;
using testing::RawInt;
using testing::T;
using testing::TempDir;

TEST(StoreSchemaTest, MigratesEmptyDatabaseToLatestVersion) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  EXPECT_GE(SchemaVersion(), 2);
  for (const char* table :
       {"sweeps", "runs", "sweep_runs", "tasks", "task_deps", "attempts",
        "workers", "metrics", "evals", "checkpoints", "fits", "events"}) {
    EXPECT_EQ(RawInt(path, std::string("SELECT count(*) FROM sqlite_schema "
                                       "WHERE type = 'table' AND name = '") +
                               table + "'"),
              1)
        << table;
  }
  for (const char* view : {"run_summary", "fit_summary"}) {
    EXPECT_EQ(RawInt(path, std::string("SELECT count(*) FROM sqlite_schema "
                                       "WHERE type = 'view' AND name = '") +
                               view + "'"),
              1)
        << view;
  }
}

TEST(StoreSchemaTest, ReopenIsIdempotent) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  for (int i = 0; i < 3; ++i) {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok());
  EXPECT_TRUE(Migrate(**db).ok());
}

TEST(StoreSchemaTest, RefusesNewerSchema) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
  }
  const int newer = SchemaVersion() + 1;
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE(
        (*db)->Exec("PRAGMA user_version = " + std::to_string(newer)).ok());
  }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.status().message(),
            "database schema v" + std::to_string(newer) +
                " is newer than this hlab (v" +
                std::to_string(SchemaVersion()) + "): upgrade hlab");
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), newer);  // left alone
}

// A v2 database (before on-demand tasks were marked) with a finished run
// whose on-demand EVAL (no dependency) failed and failed the run, and a
// run whose planned EVAL (after its training) failed: opening it migrates,
// marks the on-demand task, and gives the first run back its SUCCEEDED.
TEST(StoreSchemaTest, V3MarksOldOnDemandEvalsAndRepairsTheirRuns) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 2; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 2").ok());
    const absl::Status rows = (*db)->Exec(R"sql(
INSERT INTO sweeps (name, spec_hash, spec, created_at, max_retries)
  VALUES ('s', 'h', '{}', 0, 3);
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  state, failure_reason, max_attempts, created_at, updated_at)
  VALUES ('aa', 'full', 'xs', 1, 1, 0, '{}', 'FAILED', 'eval failed', 2, 0, 0),
         ('bb', 'full', 'xs', 1, 1, 0, '{}', 'FAILED', 'eval failed', 2, 0, 0);
INSERT INTO tasks (id, sweep_id, run_id, kind, state, max_attempts,
                   created_at, updated_at)
  VALUES ('train-aa', 1, 'aa', 'TRAIN', 'SUCCEEDED', 2, 0, 0),
         ('ondemand-aa', 1, 'aa', 'EVAL', 'FAILED', 2, 0, 0),
         ('train-bb', 1, 'bb', 'TRAIN', 'SUCCEEDED', 2, 0, 0),
         ('planned-bb', 1, 'bb', 'EVAL', 'FAILED', 2, 0, 0);
INSERT INTO task_deps (task_id, depends_on) VALUES ('planned-bb', 'train-bb');
)sql");
    ASSERT_TRUE(rows.ok()) << rows;
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  auto on_demand = (*store)->GetTask("ondemand-aa");
  ASSERT_TRUE(on_demand.ok());
  EXPECT_TRUE(on_demand->spec.on_demand);
  EXPECT_EQ(on_demand->state, TaskState::kFailed);  // still says it failed
  EXPECT_FALSE((*store)->GetTask("planned-bb")->spec.on_demand);
  EXPECT_FALSE((*store)->GetTask("train-aa")->spec.on_demand);
  auto repaired = (*store)->GetRun("aa");
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(repaired->state, RunState::kSucceeded);
  EXPECT_EQ(repaired->failure_reason, "");
  EXPECT_EQ((*store)->GetRun("bb")->state, RunState::kFailed);
}

// A v5 database kept a task's resources as a JSON string. v6 carries every
// value into its integer column, takes a missing key, a non-number, a
// negative number or a document that is not an object as 0 (not asked for,
// as the JSON readers did), and drops the JSON column.
TEST(StoreSchemaTest, V6MovesResourcesIntoTypedColumns) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 5; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 5").ok());
    const absl::Status rows = (*db)->Exec(R"sql(
INSERT INTO sweeps (name, spec_hash, spec, created_at, max_retries)
  VALUES ('s', 'h', '{}', 0, 3);
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  max_attempts, created_at, updated_at)
  VALUES ('aa', 'full', 'xs', 1, 1, 0, '{}', 2, 0, 0);
INSERT INTO tasks (id, sweep_id, run_id, kind, max_attempts, resources,
                   created_at, updated_at)
  VALUES ('gpu', 1, 'aa', 'TRAIN', 2,
          '{"gpus": 2, "gpu_memory_bytes": 80000000000, "cpu_threads": 0,
            "cpu_ranks": 0}', 0, 0),
         ('cpu', 1, 'aa', 'EVAL', 2, '{"cpu_threads": 4, "cpu_ranks": 3}',
          0, 0),
         ('odd', 1, 'aa', 'EVAL', 2, '{"gpus": "two", "cpu_ranks": -1}', 0, 0),
         ('array', 1, 'aa', 'EVAL', 2, '[1, 2]', 0, 0),
         ('text', 1, 'aa', 'EVAL', 2, 'not json', 0, 0);
)sql");
    ASSERT_TRUE(rows.ok()) << rows;
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM pragma_table_info('tasks')"
                   " WHERE name = 'resources'"),
            0);
  auto resources = [&](const std::string& id) {
    auto task = (*store)->GetTask(id);
    EXPECT_TRUE(task.ok()) << id << ": " << task.status();
    return task.ok() ? task->spec.resources : TaskResources{};
  };
  TaskResources gpu;
  gpu.gpus = 2;
  gpu.gpu_memory_bytes = 80000000000;
  EXPECT_EQ(resources("gpu"), gpu);
  TaskResources cpu;
  cpu.cpu_threads = 4;
  cpu.cpu_ranks = 3;
  EXPECT_EQ(resources("cpu"), cpu);
  EXPECT_EQ(resources("odd"), TaskResources{});
  EXPECT_EQ(resources("array"), TaskResources{});
  EXPECT_EQ(resources("text"), TaskResources{});
}

// A v6 database had no run phases or progress. v7 derives each run's phase
// from its tasks (its end state; its own leased DECAY or TRAIN; the leased
// TRUNK its DECAY depends on; a leased planned EVAL; else WAITING, an
// on-demand EVAL not counting) and its progress from its newest
// `train_loss` point, tokens capped at its budget, and changes nothing else.
TEST(StoreSchemaTest, V7FillsInRunPhasesAndProgress) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  const std::vector<std::string> tables = {
      "sweeps",    "runs",        "sweep_runs", "tasks",
      "task_deps", "attempts",    "workers",    "metrics",
      "evals",     "checkpoints", "fits",       "events"};
  std::map<std::string, int64_t> rows_before;
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 6; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 6").ok());
    // trunk: its decay waits for a leased trunk, whose points it was given.
    // decay: its decay is leased, newest point past its budget.
    // train: its TRAIN is leased; val_loss at a later step does not count.
    // evaluating: trained, its planned EVAL leased.
    // queued: TRAIN pending, only an on-demand EVAL leased; NULL tokens.
    // done: succeeded. bare: no tasks, no metrics.
    const absl::Status rows = (*db)->Exec(R"sql(
INSERT INTO sweeps (name, spec_hash, spec, created_at, max_retries)
  VALUES ('s', 'h', '{}', 0, 3);
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  state, max_attempts, created_at, updated_at)
  VALUES ('trunk', 'full', 'xs', 1000, 1, 0, '{}', 'PENDING', 2, 0, 0),
         ('decay', 'full', 'xs', 1000, 1, 0, '{}', 'RUNNING', 2, 0, 0),
         ('train', 'full', 'xs', 1000, 1, 0, '{}', 'RUNNING', 2, 0, 0),
         ('evaluating', 'full', 'xs', 1000, 1, 0, '{}', 'RUNNING', 2, 0, 0),
         ('queued', 'full', 'xs', 1000, 1, 0, '{}', 'PENDING', 2, 0, 0),
         ('done', 'full', 'xs', 5000, 1, 0, '{}', 'SUCCEEDED', 2, 0, 0),
         ('bare', 'full', 'xs', 1000, 1, 0, '{}', 'PENDING', 2, 0, 0);
INSERT INTO sweep_runs (sweep_id, run_id)
  SELECT 1, id FROM runs;
INSERT INTO tasks (id, sweep_id, run_id, kind, state, attempt, max_attempts,
                   lease_worker, lease_expiry, on_demand, created_at,
                   updated_at)
  VALUES ('trunk-a', 1, NULL, 'TRUNK', 'LEASED', 1, 2, 'w1', 9, 0, 0, 0),
         ('trunk-b', 1, NULL, 'TRUNK', 'SUCCEEDED', 1, 2, NULL, NULL, 0, 0, 0),
         ('trunk.decay', 1, 'trunk', 'DECAY', 'PENDING', 0, 2, NULL, NULL,
          0, 0, 0),
         ('decay.decay', 1, 'decay', 'DECAY', 'LEASED', 1, 2, 'w2', 9, 0, 0,
          0),
         ('train.train', 1, 'train', 'TRAIN', 'LEASED', 1, 2, 'w3', 9, 0, 0,
          0),
         ('evaluating.train', 1, 'evaluating', 'TRAIN', 'SUCCEEDED', 1, 2,
          NULL, NULL, 0, 0, 0),
         ('evaluating.eval', 1, 'evaluating', 'EVAL', 'LEASED', 1, 2, 'w4', 9,
          0, 0, 0),
         ('queued.train', 1, 'queued', 'TRAIN', 'PENDING', 0, 2, NULL, NULL,
          0, 0, 0),
         ('queued.ondemand', 1, 'queued', 'EVAL', 'LEASED', 1, 2, 'w5', 9, 1,
          0, 0),
         ('done.train', 1, 'done', 'TRAIN', 'SUCCEEDED', 1, 2, NULL, NULL, 0,
          0, 0),
         ('done.eval', 1, 'done', 'EVAL', 'SUCCEEDED', 1, 2, NULL, NULL, 0,
          0, 0);
INSERT INTO task_deps (task_id, depends_on)
  VALUES ('trunk.decay', 'trunk-a'), ('decay.decay', 'trunk-b'),
         ('evaluating.eval', 'evaluating.train'),
         ('done.eval', 'done.train');
INSERT INTO metrics (run_id, name, step, value, tokens)
  VALUES ('trunk', 'train_loss', 10, 3.5, 300),
         ('decay', 'train_loss', 10, 3.0, 400),
         ('decay', 'train_loss', 20, 2.75, 800),
         ('decay', 'train_loss', 30, 2.5, 1200),
         ('train', 'train_loss', 5, 3.0, 50),
         ('train', 'train_loss', 15, 2.5, 150),
         ('train', 'train_loss', 25, 2.25, 250),
         ('train', 'val_loss', 40, 9.0, 400),
         ('evaluating', 'train_loss', 100, 2.0, 1000),
         ('queued', 'train_loss', 3, 4.0, NULL),
         ('done', 'train_loss', 50, 1.75, 2500),
         ('done', 'train_loss', 100, 1.5, 5000);
INSERT INTO events (sweep_id, run_id, kind, message, time)
  VALUES (1, 'done', 'run_state', 'SUCCEEDED', 0);
)sql");
    ASSERT_TRUE(rows.ok()) << rows;
    for (const std::string& table : tables) {
      auto count = (*db)->QueryInt("SELECT count(*) FROM " + table);
      ASSERT_TRUE(count.ok()) << table << ": " << count.status();
      rows_before[table] = *count;
    }
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  for (const std::string& table : tables) {
    EXPECT_EQ(RawInt(path, "SELECT count(*) FROM " + table), rows_before[table])
        << table;
  }
  struct Want {
    std::string run;
    RunState state;
    RunPhase phase;
    int64_t step;
    int64_t tokens;
    std::optional<double> loss;
  };
  const std::vector<Want> wants = {
      {"trunk", RunState::kPending, RunPhase::kTrunk, 10, 300, 3.5},
      {"decay", RunState::kRunning, RunPhase::kDecaying, 30, 1000, 2.5},
      {"train", RunState::kRunning, RunPhase::kTraining, 25, 250, 2.25},
      {"evaluating", RunState::kRunning, RunPhase::kEvaluating, 100, 1000, 2.0},
      {"queued", RunState::kPending, RunPhase::kWaiting, 3, 0, 4.0},
      {"done", RunState::kSucceeded, RunPhase::kSucceeded, 100, 5000, 1.5},
      {"bare", RunState::kPending, RunPhase::kWaiting, 0, 0, std::nullopt},
  };
  for (const Want& want : wants) {
    auto run = (*store)->GetRun(want.run);
    ASSERT_TRUE(run.ok()) << want.run << ": " << run.status();
    EXPECT_EQ(run->state, want.state) << want.run;
    EXPECT_EQ(run->phase, want.phase) << want.run;
    EXPECT_EQ(run->progress.step, want.step) << want.run;
    EXPECT_EQ(run->progress.tokens, want.tokens) << want.run;
    EXPECT_EQ(run->progress.loss, want.loss) << want.run;
  }
  // The migration writes no events; the old one has no progress columns.
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM events WHERE phase IS NOT NULL"
                   " OR step IS NOT NULL OR tokens IS NOT NULL"
                   " OR loss IS NOT NULL"),
            0);
}

// v8 adds the prediction tables and the run_predictions view to a v7
// database and changes nothing that was there; predictions can be stored
// at once.
TEST(StoreSchemaTest, V8AddsPredictionsAndKeepsEverything) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 7; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 7").ok());
    ASSERT_TRUE((*db)
                    ->Exec(R"sql(
INSERT INTO sweeps (name, spec_hash, spec, created_at, max_retries)
  VALUES ('s', 'h', '{}', 0, 3);
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  state, max_attempts, created_at, updated_at)
  VALUES ('a', 'full', 'xs', 1000, 1, 0, '{}', 'PENDING', 2, 0, 0),
         ('b', 'full', 'xs', 2000, 1, 0, '{}', 'SUCCEEDED', 2, 0, 0);
INSERT INTO sweep_runs (sweep_id, run_id) SELECT 1, id FROM runs;
INSERT INTO metrics (run_id, name, step, value, tokens)
  VALUES ('b', 'train_loss', 10, 2.5, 2000);
)sql")
                    .ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM metrics"), 1);
  EXPECT_EQ(RawInt(path, "SELECT phase = 'WAITING' FROM runs WHERE id = 'a'"),
            1);
  for (const char* table : {"prediction_generations", "predictions"}) {
    EXPECT_EQ(RawInt(path, std::string("SELECT count(*) FROM ") + table), 0)
        << table;
  }
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM run_predictions"), 0);
  PredictionGeneration g;
  g.sweep_id = 1;
  Prediction p;
  p.run_id = "a";
  p.target = "loss";
  p.predicted = 2.75;
  g.predictions = {p};
  auto stored = (*store)->RecordPredictions(g, T(1));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, 1);
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM run_predictions"), 1);
}

// v9 lets a v8 database's runs be PREDICTED (state and phase) and keeps
// every row; other values are still refused, on a fresh connection too.
TEST(StoreSchemaTest, V9AllowsPredictedRunsAndKeepsEverything) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 8; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 8").ok());
    ASSERT_TRUE((*db)
                    ->Exec(R"sql(
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  state, max_attempts, created_at, updated_at)
  VALUES ('a', 'full', 'xs', 1000, 1, 0, '{}', 'PENDING', 2, 0, 0),
         ('b', 'full', 'xs', 2000, 1, 0, '{}', 'SUCCEEDED', 2, 0, 0);
)sql")
                    .ok());
    EXPECT_FALSE((*db)->Exec("UPDATE runs SET state = 'PREDICTED'").ok());
  }
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM runs"), 2);
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_TRUE((*db)
                  ->Exec("UPDATE runs SET state = 'PREDICTED',"
                         " phase = 'PREDICTED' WHERE id = 'a'")
                  .ok());
  EXPECT_FALSE((*db)->Exec("UPDATE runs SET state = 'STOPPED'").ok());
  EXPECT_FALSE((*db)->Exec("UPDATE runs SET phase = 'STOPPED'").ok());
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM runs WHERE state = 'PREDICTED'"
                   " AND phase = 'PREDICTED'"),
            1);
}

// v10 gives a v9 database's tasks an adaptive order (none set: every task
// leases by cost as before), keeps every row, and rebuilds the pending
// index on the order's key.
TEST(StoreSchemaTest, V10AddsTheAdaptiveOrderAndKeepsEverything) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 9; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 9").ok());
    ASSERT_TRUE((*db)
                    ->Exec(R"sql(
INSERT INTO sweeps (name, spec_hash, spec, created_at, max_retries)
  VALUES ('s', 'h', '{}', 0, 3);
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  state, max_attempts, created_at, updated_at)
  VALUES ('a', 'full', 'xs', 1000, 1, 0, '{}', 'PENDING', 2, 0, 0),
         ('b', 'full', 'xs', 2000, 1, 0, '{}', 'PENDING', 2, 0, 0);
INSERT INTO tasks (id, sweep_id, run_id, kind, state, cost_flops,
                   max_attempts, created_at, updated_at)
  VALUES ('ta', 1, 'a', 'TRAIN', 'PENDING', 5, 2, 0, 0),
         ('tb', 1, 'b', 'TRAIN', 'PENDING', 3, 2, 0, 0);
)sql")
                    .ok());
  }
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto next = (*store)->NextLeasableTasks(T(0), 10);
    ASSERT_TRUE(next.ok()) << next.status();
    ASSERT_EQ(next->size(), 2u);
    EXPECT_EQ((*next)[0].spec.id, "tb");  // by cost: no order yet
    EXPECT_FALSE((*next)[0].order.has_value());
    ASSERT_TRUE(
        (*store)
            ->SetTaskOrder(1, {{"ta", 3, 1, 2.0, "x"}, {"tb", 5, 2, 1.0, "y"}})
            .ok());
    next = (*store)->NextLeasableTasks(T(0), 10);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_EQ((*next)[0].spec.id, "ta");
  }
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM tasks"), 2);
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM tasks WHERE order_rank = 1"), 1);
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM sqlite_schema WHERE type = 'index'"
                   " AND name = 'tasks_pending' AND sql LIKE '%order_key%'"),
            1);
}

// A task's resources are stored and read back as they were given.
TEST(StoreSchemaTest, TaskResourcesRoundTrip) {
  testing::Fixture f;
  TaskSpec task = MakeTask("t1", f.sweep_id, "r1");
  task.resources.gpus = 4;
  task.resources.gpu_memory_bytes = int64_t{1} << 40;
  task.resources.cpu_threads = 7;
  ASSERT_TRUE(f.store->AddTasks({task}, T(0)).ok());
  auto read = f.store->GetTask("t1");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->spec.resources, task.resources);
  EXPECT_EQ(read->spec.resources.Ranks(), 4);
  EXPECT_EQ(f.store->GetTask("r1.train")->spec.resources, TaskResources{});
}

// v4: run_summary counts a run's own tasks apart from its on-demand
// evaluations, and gives the newest log(LongPPL).
TEST(StoreSchemaTest, RunSummaryCountsOnDemandTasksApart) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    const absl::Status rows = (*db)->Exec(R"sql(
INSERT INTO sweeps (name, spec_hash, spec, created_at, max_retries)
  VALUES ('s', 'h', '{}', 0, 3);
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  state, max_attempts, created_at, updated_at)
  VALUES ('aa', 'full', 'xs', 1, 1, 0, '{}', 'SUCCEEDED', 2, 0, 0);
INSERT INTO tasks (id, sweep_id, run_id, kind, state, max_attempts,
                   created_at, updated_at, on_demand)
  VALUES ('train-aa', 1, 'aa', 'TRAIN', 'SUCCEEDED', 2, 0, 0, 0),
         ('eval-aa', 1, 'aa', 'EVAL', 'SUCCEEDED', 2, 0, 0, 0),
         ('ondemand-aa', 1, 'aa', 'EVAL', 'FAILED', 2, 0, 0, 1);
INSERT INTO evals (run_id, step, metric, value)
  VALUES ('aa', 10, 'log_longppl', 1.5), ('aa', 20, 'log_longppl', 1.25);
)sql");
    ASSERT_TRUE(rows.ok()) << rows;
  }
  EXPECT_EQ(RawInt(path, "SELECT tasks FROM run_summary"), 2);
  EXPECT_EQ(RawInt(path, "SELECT tasks_succeeded FROM run_summary"), 2);
  EXPECT_EQ(RawInt(path, "SELECT on_demand_tasks FROM run_summary"), 1);
  EXPECT_EQ(RawInt(path, "SELECT final_log_longppl * 100 FROM run_summary"),
            125);
}

TEST(StoreSchemaTest, WalAndPragmasAreOn) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok()) << db.status();
  auto journal = (*db)->Prepare("PRAGMA journal_mode");
  ASSERT_TRUE(journal.ok());
  ASSERT_TRUE(*journal->Step());
  EXPECT_EQ(journal->ColumnText(0), "wal");
  EXPECT_EQ(*(*db)->QueryInt("PRAGMA foreign_keys"), 1);
  EXPECT_EQ(*(*db)->QueryInt("PRAGMA synchronous"), 1);  // NORMAL
  EXPECT_GT(*(*db)->QueryInt("PRAGMA busy_timeout"), 0);
}

TEST(StoreDatabaseTest, NestedPrepareOfTheSameSqlGetsItsOwnCursor) {
  TempDir dir;
  auto db = Database::Open(dir.File("d.db"), Database::Mode::kReadWrite);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(
      (*db)->Exec("CREATE TABLE t (x); INSERT INTO t VALUES (1), (2);").ok());
  const char* sql = "SELECT x FROM t ORDER BY x";
  auto outer = (*db)->Prepare(sql);
  ASSERT_TRUE(outer.ok());
  ASSERT_TRUE(*outer->Step());
  EXPECT_EQ(outer->ColumnInt(0), 1);
  {
    auto inner = (*db)->Prepare(sql);  // same text while outer is in use
    ASSERT_TRUE(inner.ok());
    ASSERT_TRUE(*inner->Step());
    EXPECT_EQ(inner->ColumnInt(0), 1);
  }
  ASSERT_TRUE(*outer->Step());  // outer's cursor was not reset
  EXPECT_EQ(outer->ColumnInt(0), 2);
  EXPECT_FALSE(*outer->Step());
}

TEST(StoreSchemaTest, UnopenablePathIsNamedInTheError) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/hlab.db");
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(store.status().message(), path))
      << store.status();
}

TEST(StoreSchemaTest, NotADatabaseIsDataLoss) {
  TempDir dir;
  const std::string path = dir.File("junk.db");
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(
      "this is not an SQLite database, just some text long enough........"
      "..............................................................",
      f);
  fclose(f);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss)
      << store.status();
  EXPECT_TRUE(absl::StrContains(store.status().message(), path));
}

TEST(StoreSchemaTest, SecondStoreOnTheSameFileIsRefused) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto first = Store::Open(path);
    ASSERT_TRUE(first.ok());
    auto second = Store::Open(path);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(second.status().message(), path))
        << second.status();
  }
  EXPECT_TRUE(Store::Open(path).ok());  // released on close
}

TEST(StoreMaintenanceTest, BackupCopiesASnapshotAndNeverOverwrites) {
  TempDir dir;
  auto store = Store::Open(dir.File("hlab.db"));
  ASSERT_TRUE(store.ok());
  auto sweep = (*store)->CreateSweep(MakeSweep("b"), T(0));
  ASSERT_TRUE(sweep.ok());
  ASSERT_TRUE((*store)->AddRuns(sweep->sweep_id, {MakeRun("r1")}, T(0)).ok());
  const std::string copy = dir.File("copy.db");
  ASSERT_TRUE((*store)->Backup(copy).ok());
  EXPECT_EQ((*store)->Backup(copy).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RawInt(copy, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(RawInt(copy, "PRAGMA user_version"), SchemaVersion());
  auto reopened = Store::Open(copy);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->GetRun("r1")->spec.arch, "swa");
  EXPECT_EQ((*store)->Backup(dir.File("no/dir/copy.db")).code(),
            absl::StatusCode::kUnavailable);
}

// v11: the pending-task index holds not_before (NextBackoffEnd reads the
// index, not the task rows), on a v10 database too, with every row kept.
TEST(StoreSchemaTest, V11PendingIndexHoldsNotBefore) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 10; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 10").ok());
    ASSERT_TRUE((*db)
                    ->Exec(absl::StrCat(R"sql(
INSERT INTO sweeps (name, spec_hash, spec, created_at, max_retries)
  VALUES ('s', 'h', '{}', 0, 3);
INSERT INTO runs (id, arch, scale, budget_tokens, n_params, seed, config,
                  state, max_attempts, created_at, updated_at)
  VALUES ('a', 'full', 'xs', 1000, 1, 0, '{}', 'PENDING', 2, 0, 0);
INSERT INTO tasks (id, sweep_id, run_id, kind, state, max_attempts,
                   not_before, created_at, updated_at)
  VALUES ('a.train', 1, 'a', 'TRAIN', 'PENDING', 2, )sql",
                                        ToMillis(T(5)), ", 0, 0);"))
                    .ok());
    EXPECT_EQ(RawInt(path,
                     "SELECT count(*) FROM pragma_index_info('tasks_pending')"
                     " WHERE name = 'not_before'"),
              0);
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM pragma_index_info('tasks_pending')"
                   " WHERE name = 'not_before'"),
            1);
  auto backoff = (*store)->NextBackoffEnd(T(0));
  ASSERT_TRUE(backoff.ok()) << backoff.status();
  ASSERT_TRUE(backoff->has_value());
  EXPECT_EQ(**backoff, T(5));
  auto early = (*store)->NextLeasableTasks(T(4), 10);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_TRUE(early->empty());
  auto leasable = (*store)->NextLeasableTasks(T(5), 10);
  ASSERT_TRUE(leasable.ok()) << leasable.status();
  ASSERT_EQ(leasable->size(), 1u);
  EXPECT_EQ(leasable->front().spec.id, "a.train");
}

// The WAL is checkpointed on the store's checkpointer thread once it holds
// wal_checkpoint_pages, while the writer goes on; every row stays.
TEST(StoreMaintenanceTest, CheckpointsRunOnTheirOwnThreadAndKeepEverything) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  StoreOptions options;
  options.wal_checkpoint_pages = 64;
  auto store = Store::Open(path, options);
  ASSERT_TRUE(store.ok()) << store.status();
  auto sweep = (*store)->CreateSweep(MakeSweep("w"), T(0));
  ASSERT_TRUE(sweep.ok());
  ASSERT_TRUE((*store)->AddRuns(sweep->sweep_id, {MakeRun("r1")}, T(0)).ok());
  ASSERT_TRUE(
      (*store)
          ->AddTasks({MakeTask("r1.train", sweep->sweep_id, "r1")}, T(0))
          .ok());
  auto attempt = (*store)->LeaseTask("r1.train", "w1", T(0), absl::Hours(1));
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  // ~2,000 pages of points, in 200 commits.
  for (int batch = 0; batch < 200; ++batch) {
    std::vector<MetricPoint> points;
    for (int i = 0; i < 200; ++i) {
      MetricPoint p;
      p.name = "train_loss";
      p.step = batch * 200 + i;
      p.value = 1.0 / (1 + p.step);
      points.push_back(p);
    }
    ASSERT_TRUE(
        (*store)->RecordMetrics("r1.train", *attempt, points, T(1)).ok());
  }
  // The thread runs on its own time: wait for it (not a timing assertion;
  // it fails only if no checkpoint runs within a minute, ample on a loaded
  // 2-core machine).
  for (int i = 0; i < 3000 && (*store)->checkpointer_stats().checkpoints == 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const CheckpointerStats stats = (*store)->checkpointer_stats();
  EXPECT_GT(stats.checkpoints, 0);
  EXPECT_EQ(stats.failures, 0);
  EXPECT_GE(stats.largest_wal_pages, 64);
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM metrics"), 40000);
  store->reset();
  auto reopened = Store::Open(path);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM metrics"), 40000);
}

TEST(StoreMaintenanceTest, TruncatingCheckpointEmptiesTheWal) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  auto sweep = (*store)->CreateSweep(MakeSweep("w"), T(0));
  ASSERT_TRUE(sweep.ok());
  std::vector<RunSpec> runs;
  for (int i = 0; i < 200; ++i)
    runs.push_back(MakeRun("r" + std::to_string(i)));
  ASSERT_TRUE((*store)->AddRuns(sweep->sweep_id, runs, T(0)).ok());
  EXPECT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  auto passive = (*store)->CheckpointWal(/*truncate=*/false);
  ASSERT_TRUE(passive.ok()) << passive.status();
  EXPECT_EQ(passive->checkpointed_pages, passive->wal_pages);
  auto truncated = (*store)->CheckpointWal(/*truncate=*/true);
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  EXPECT_EQ(std::filesystem::file_size(path + "-wal"), 0u);
  // Writes go on afterwards.
  EXPECT_TRUE((*store)->AddRuns(sweep->sweep_id, {MakeRun("late")}, T(1)).ok());
  EXPECT_EQ((*store)->ListRuns(RunFilter())->size(), 201u);
}

TEST(StoreSchemaTest, ReopenAfterCloseKeepsEverything) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  int64_t sweep_id = 0;
  int attempt = 0;
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok());
    auto sweep = (*store)->CreateSweep(MakeSweep("keep"), T(0));
    ASSERT_TRUE(sweep.ok());
    sweep_id = sweep->sweep_id;
    ASSERT_TRUE((*store)->AddRuns(sweep_id, {MakeRun("r1")}, T(0)).ok());
    ASSERT_TRUE(
        (*store)->AddTasks({MakeTask("r1.train", sweep_id, "r1")}, T(0)).ok());
    auto leased =
        (*store)->LeaseTask("r1.train", "w1", T(1), absl::Seconds(30));
    ASSERT_TRUE(leased.ok());
    attempt = *leased;
    MetricPoint point;
    point.name = "train_loss";
    point.step = 10;
    point.value = 2.5;
    ASSERT_TRUE(
        (*store)->RecordMetrics("r1.train", attempt, {point}, T(1)).ok());
  }  // closed: the writer drains and the connections close
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok());
  auto sweep = (*store)->GetSweep(sweep_id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->spec.name, "keep");
  auto task = (*store)->GetTask("r1.train");
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->state, TaskState::kLeased);
  EXPECT_EQ(task->attempt, attempt);
  EXPECT_EQ(task->lease_expiry, T(31));
  auto points = (*store)->ReadMetrics("r1", "train_loss");
  ASSERT_TRUE(points.ok());
  ASSERT_EQ(points->size(), 1u);
  EXPECT_EQ((*points)[0].value, 2.5);
  auto run = (*store)->GetRun("r1");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->state, RunState::kRunning);
}

// v12: workers carry a draining flag and their build's version; a v11
// database's workers are kept, undrained, with no version.
TEST(StoreSchemaTest, V12WorkersKeepTheirRowsUndrained) {
  TempDir dir;
  const std::string path = dir.File("hlab.db");
  {
    auto db = Database::Open(path, Database::Mode::kReadWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    for (int v = 1; v <= 11; ++v) {
      ASSERT_TRUE((*db)->Exec(Migrations()[v - 1].sql).ok()) << v;
    }
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 11").ok());
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO workers (id, address, registered_at,"
                           " last_heartbeat) VALUES ('w1', 'node-1', 0, 0)")
                    .ok());
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(RawInt(path, "PRAGMA user_version"), SchemaVersion());
  auto workers = (*store)->ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].address, "node-1");
  EXPECT_FALSE((*workers)[0].draining);
  EXPECT_EQ((*workers)[0].version, "");
  EXPECT_FALSE((*store)->WorkerDraining("w1"));
}

}  // namespace
}  // namespace hlab::store
