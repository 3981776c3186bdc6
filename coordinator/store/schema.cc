#include "coordinator/store/schema.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace hlab::store {
namespace {

// v1: the tables and the indices of the hot queries. Times are integer Unix
// milliseconds; JSON documents are TEXT.
constexpr char kV1Tables[] = R"sql(
CREATE TABLE sweeps (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT NOT NULL,
  spec_hash   TEXT NOT NULL UNIQUE,
  request_id  TEXT,
  spec        TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  state       TEXT NOT NULL DEFAULT 'ACTIVE'
              CHECK (state IN ('ACTIVE', 'CANCELLED')),
  max_retries INTEGER NOT NULL,
  retries     INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE runs (
  id             TEXT PRIMARY KEY,
  arch           TEXT NOT NULL,
  scale          TEXT NOT NULL,
  budget_tokens  INTEGER NOT NULL,
  n_params       INTEGER NOT NULL,
  seed           INTEGER NOT NULL,
  config         TEXT NOT NULL,
  state          TEXT NOT NULL DEFAULT 'PENDING' CHECK (state IN
                 ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  failure_reason TEXT,
  retries        INTEGER NOT NULL DEFAULT 0,
  max_attempts   INTEGER NOT NULL,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL
);
CREATE INDEX runs_by_state ON runs (state);
CREATE INDEX runs_by_arch_scale ON runs (arch, scale);

CREATE TABLE sweep_runs (
  sweep_id INTEGER NOT NULL REFERENCES sweeps (id),
  run_id   TEXT NOT NULL REFERENCES runs (id),
  PRIMARY KEY (sweep_id, run_id)
) WITHOUT ROWID;
CREATE INDEX sweep_runs_by_run ON sweep_runs (run_id);

CREATE TABLE tasks (
  id             TEXT PRIMARY KEY,
  sweep_id       INTEGER NOT NULL REFERENCES sweeps (id),
  run_id         TEXT REFERENCES runs (id),
  trunk_group    TEXT,
  kind           TEXT NOT NULL
                 CHECK (kind IN ('TRAIN', 'TRUNK', 'DECAY', 'EVAL')),
  state          TEXT NOT NULL DEFAULT 'PENDING' CHECK (state IN
                 ('PENDING', 'LEASED', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
  priority       INTEGER NOT NULL DEFAULT 0,
  cost_flops     REAL NOT NULL DEFAULT 0,
  attempt        INTEGER NOT NULL DEFAULT 0,
  failures       INTEGER NOT NULL DEFAULT 0,
  max_attempts   INTEGER NOT NULL,
  lease_worker   TEXT,
  lease_expiry   INTEGER,
  not_before     INTEGER NOT NULL DEFAULT 0,
  resources      TEXT NOT NULL DEFAULT '{}',
  payload        TEXT NOT NULL DEFAULT '{}',
  failure_reason TEXT,
  created_at     INTEGER NOT NULL,
  updated_at     INTEGER NOT NULL,
  CHECK (run_id IS NOT NULL OR kind = 'TRUNK')
);
CREATE INDEX tasks_pending ON tasks (priority DESC, cost_flops, id)
  WHERE state = 'PENDING';
CREATE INDEX tasks_leased ON tasks (lease_expiry, id) WHERE state = 'LEASED';
CREATE INDEX tasks_by_run ON tasks (run_id);
CREATE INDEX tasks_by_sweep ON tasks (sweep_id, state);

CREATE TABLE task_deps (
  task_id    TEXT NOT NULL REFERENCES tasks (id),
  depends_on TEXT NOT NULL REFERENCES tasks (id),
  PRIMARY KEY (task_id, depends_on)
) WITHOUT ROWID;
CREATE INDEX task_deps_by_dependency ON task_deps (depends_on);

CREATE TABLE attempts (
  task_id    TEXT NOT NULL REFERENCES tasks (id),
  attempt    INTEGER NOT NULL,
  worker_id  TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at   INTEGER,
  outcome    TEXT NOT NULL DEFAULT 'RUNNING' CHECK (outcome IN
             ('RUNNING', 'SUCCEEDED', 'FAILED', 'EXPIRED', 'CANCELLED')),
  error      TEXT,
  PRIMARY KEY (task_id, attempt)
) WITHOUT ROWID;

CREATE TABLE workers (
  id             TEXT PRIMARY KEY,
  address        TEXT NOT NULL,
  devices        TEXT NOT NULL DEFAULT '[]',
  capacity       INTEGER NOT NULL DEFAULT 1,
  registered_at  INTEGER NOT NULL,
  last_heartbeat INTEGER NOT NULL,
  state          TEXT NOT NULL DEFAULT 'UP' CHECK (state IN ('UP', 'LOST'))
);

CREATE TABLE metrics (
  run_id    TEXT NOT NULL REFERENCES runs (id),
  name      TEXT NOT NULL,
  step      INTEGER NOT NULL,
  value     REAL,
  tokens    INTEGER,
  wall_time REAL,
  PRIMARY KEY (run_id, name, step)
) WITHOUT ROWID;

CREATE TABLE evals (
  run_id  TEXT NOT NULL REFERENCES runs (id),
  step    INTEGER NOT NULL,
  metric  TEXT NOT NULL,
  value   REAL,
  details TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (run_id, step, metric)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id    TEXT NOT NULL REFERENCES tasks (id),
  run_id     TEXT REFERENCES runs (id),
  step       INTEGER NOT NULL,
  tokens     INTEGER NOT NULL,
  path       TEXT NOT NULL,
  checksum   TEXT NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('latest', 'branch')),
  attempt    INTEGER NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX checkpoints_by_task ON checkpoints (task_id, step);
CREATE INDEX checkpoints_by_run ON checkpoints (run_id, step);

CREATE TABLE fits (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep_id   INTEGER NOT NULL REFERENCES sweeps (id),
  arch       TEXT NOT NULL,
  target     TEXT NOT NULL,
  e          REAL, a REAL, alpha REAL, b REAL, beta REAL,
  ci         TEXT NOT NULL DEFAULT '{}',
  r2_fit     REAL,
  r2_verify  REAL,
  n_points   INTEGER NOT NULL DEFAULT 0,
  details    TEXT NOT NULL DEFAULT '{}',
  created_at INTEGER NOT NULL,
  UNIQUE (sweep_id, arch, target)
);

CREATE TABLE events (
  seq      INTEGER PRIMARY KEY AUTOINCREMENT,
  sweep_id INTEGER,
  run_id   TEXT,
  kind     TEXT NOT NULL,
  message  TEXT NOT NULL,
  time     INTEGER NOT NULL
);
CREATE INDEX events_by_sweep ON events (sweep_id, seq);
)sql";

// v2: the views users query (`hlab query`). Figures by convention: training
// loss is the metric 'train_loss' (last step, tokens and final loss come from
// its newest point: one index seek per run), validation loss 'val_loss'
// (evals first, else metrics).
constexpr char kV2Views[] = R"sql(
CREATE VIEW run_summary AS
SELECT
  r.id AS run_id, r.arch, r.scale, r.n_params, r.budget_tokens, r.seed,
  r.state, r.failure_reason, r.retries,
  (SELECT group_concat(sr.sweep_id) FROM sweep_runs sr
     WHERE sr.run_id = r.id) AS sweeps,
  (SELECT m.step FROM metrics m WHERE m.run_id = r.id
     AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1) AS last_step,
  (SELECT m.tokens FROM metrics m WHERE m.run_id = r.id
     AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1) AS tokens,
  (SELECT m.value FROM metrics m WHERE m.run_id = r.id
     AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1) AS final_train_loss,
  coalesce(
    (SELECT e.value FROM evals e WHERE e.run_id = r.id
       AND e.metric = 'val_loss' ORDER BY e.step DESC LIMIT 1),
    (SELECT m.value FROM metrics m WHERE m.run_id = r.id
       AND m.name = 'val_loss' ORDER BY m.step DESC LIMIT 1)) AS final_val_loss,
  (SELECT count(*) FROM tasks t WHERE t.run_id = r.id) AS tasks,
  (SELECT count(*) FROM tasks t WHERE t.run_id = r.id
     AND t.state = 'SUCCEEDED') AS tasks_succeeded,
  datetime(r.created_at / 1000, 'unixepoch') AS created,
  datetime(r.updated_at / 1000, 'unixepoch') AS updated
FROM runs r;

CREATE VIEW fit_summary AS
SELECT
  f.id AS fit_id, f.sweep_id, s.name AS sweep, f.arch, f.target,
  f.e, f.a, f.alpha, f.b, f.beta, f.r2_fit, f.r2_verify, f.n_points, f.ci,
  datetime(f.created_at / 1000, 'unixepoch') AS created
FROM fits f LEFT JOIN sweeps s ON s.id = f.sweep_id;
)sql";

// v3: on-demand tasks (`hlab eval`, EvaluateRun) are marked, so that their
// failure is theirs and not their run's (docs/store.md). Before v3 the only
// EVAL tasks without a dependency were on-demand ones (a sweep's EVAL task
// waits for its run's training), so those are marked; a run FAILED only
// because of one becomes SUCCEEDED again when all its other tasks succeeded.
constexpr char kV3OnDemandTasks[] = R"sql(
ALTER TABLE tasks ADD COLUMN on_demand INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET on_demand = 1 WHERE kind = 'EVAL'
  AND NOT EXISTS (SELECT 1 FROM task_deps d WHERE d.task_id = tasks.id);
UPDATE runs SET state = 'SUCCEEDED', failure_reason = NULL
  WHERE state = 'FAILED'
  AND EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
                AND t.on_demand = 0)
  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
                    AND t.on_demand = 0 AND t.state <> 'SUCCEEDED');
)sql";

// v4: run_summary counts a run's own tasks (an on-demand evaluation is not
// one: `on_demand_tasks` counts those) and gives the newest log(LongPPL).
constexpr char kV4RunSummary[] = R"sql(
DROP VIEW run_summary;
CREATE VIEW run_summary AS
SELECT
  r.id AS run_id, r.arch, r.scale, r.n_params, r.budget_tokens, r.seed,
  r.state, r.failure_reason, r.retries,
  (SELECT group_concat(sr.sweep_id) FROM sweep_runs sr
     WHERE sr.run_id = r.id) AS sweeps,
  (SELECT m.step FROM metrics m WHERE m.run_id = r.id
     AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1) AS last_step,
  (SELECT m.tokens FROM metrics m WHERE m.run_id = r.id
     AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1) AS tokens,
  (SELECT m.value FROM metrics m WHERE m.run_id = r.id
     AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1) AS final_train_loss,
  coalesce(
    (SELECT e.value FROM evals e WHERE e.run_id = r.id
       AND e.metric = 'val_loss' ORDER BY e.step DESC LIMIT 1),
    (SELECT m.value FROM metrics m WHERE m.run_id = r.id
       AND m.name = 'val_loss' ORDER BY m.step DESC LIMIT 1)) AS final_val_loss,
  (SELECT e.value FROM evals e WHERE e.run_id = r.id
     AND e.metric = 'log_longppl' ORDER BY e.step DESC LIMIT 1)
    AS final_log_longppl,
  (SELECT count(*) FROM tasks t WHERE t.run_id = r.id
     AND t.on_demand = 0) AS tasks,
  (SELECT count(*) FROM tasks t WHERE t.run_id = r.id AND t.on_demand = 0
     AND t.state = 'SUCCEEDED') AS tasks_succeeded,
  (SELECT count(*) FROM tasks t WHERE t.run_id = r.id
     AND t.on_demand = 1) AS on_demand_tasks,
  datetime(r.created_at / 1000, 'unixepoch') AS created,
  datetime(r.updated_at / 1000, 'unixepoch') AS updated
FROM runs r;
)sql";

// v5: fault classes (docs/coordinator.md, "Retries"). An attempt's end is
// the task's fault or the infrastructure's; only the task's spends the run's
// max_attempts and the sweep's retry budget. Expired attempts before v5
// were all lease expiries or departed workers: infrastructure.
constexpr char kV5FaultClasses[] = R"sql(
ALTER TABLE attempts ADD COLUMN fault TEXT
  CHECK (fault IS NULL OR fault IN ('TASK', 'INFRASTRUCTURE'));
UPDATE attempts SET fault = 'INFRASTRUCTURE' WHERE outcome = 'EXPIRED';
UPDATE attempts SET fault = 'TASK' WHERE outcome = 'FAILED';
ALTER TABLE tasks ADD COLUMN infra_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN infra_retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sweeps ADD COLUMN infra_retries INTEGER NOT NULL DEFAULT 0;
)sql";

// v6: a task's resources are four integer columns, not a JSON document that
// every reader parsed again with its own defaults. Values stored before v6
// are carried over; what was missing or not a number becomes 0 (not asked
// for), as those readers took it.
constexpr char kV6TypedResources[] = R"sql(
ALTER TABLE tasks ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0
  CHECK (gpus >= 0);
ALTER TABLE tasks ADD COLUMN gpu_memory_bytes INTEGER NOT NULL DEFAULT 0
  CHECK (gpu_memory_bytes >= 0);
ALTER TABLE tasks ADD COLUMN cpu_threads INTEGER NOT NULL DEFAULT 0
  CHECK (cpu_threads >= 0);
ALTER TABLE tasks ADD COLUMN cpu_ranks INTEGER NOT NULL DEFAULT 0
  CHECK (cpu_ranks >= 0);
UPDATE tasks SET
  gpus = max(0, coalesce(CAST(json_extract(resources, '$.gpus') AS INTEGER), 0)),
  gpu_memory_bytes = max(0, coalesce(
    CAST(json_extract(resources, '$.gpu_memory_bytes') AS INTEGER), 0)),
  cpu_threads = max(0, coalesce(
    CAST(json_extract(resources, '$.cpu_threads') AS INTEGER), 0)),
  cpu_ranks = max(0, coalesce(
    CAST(json_extract(resources, '$.cpu_ranks') AS INTEGER), 0))
  WHERE json_valid(resources) AND json_type(resources) = 'object';
ALTER TABLE tasks DROP COLUMN resources;
)sql";

// v7: run phases and progress (docs/store.md, "Run progress"). A run's
// phase says what is happening to it, finer than its state: a run whose
// shared trunk trains was PENDING and showed nothing; one whose decay had
// ended was RUNNING while nothing of it ran. Its progress (newest
// `train_loss` point, tokens at most its budget) is kept on the row, and
// "run_progress" events carry both. Existing runs are filled in from their
// tasks and metrics. The phase rule below is a frozen copy of the one v7
// was released with; the live rule is internal::kRunPhaseSql
// (internal/transitions.h), and a later change to it must not change this
// text.
constexpr char kV7RunProgress[] = R"sql(
ALTER TABLE runs ADD COLUMN phase TEXT NOT NULL DEFAULT 'WAITING'
  CHECK (phase IN ('WAITING', 'TRUNK', 'TRAINING', 'DECAYING', 'EVALUATING',
                   'SUCCEEDED', 'FAILED', 'CANCELLED'));
ALTER TABLE runs ADD COLUMN step_done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN tokens_done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN train_loss REAL;
ALTER TABLE events ADD COLUMN phase TEXT;
ALTER TABLE events ADD COLUMN step INTEGER;
ALTER TABLE events ADD COLUMN tokens INTEGER;
ALTER TABLE events ADD COLUMN loss REAL;
UPDATE runs SET
  step_done = coalesce((SELECT m.step FROM metrics m WHERE m.run_id = runs.id
    AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1), 0),
  tokens_done = min(budget_tokens, coalesce((SELECT m.tokens FROM metrics m
    WHERE m.run_id = runs.id AND m.name = 'train_loss'
    ORDER BY m.step DESC LIMIT 1), 0)),
  train_loss = (SELECT m.value FROM metrics m WHERE m.run_id = runs.id
    AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1);
UPDATE runs SET phase = CASE
  WHEN runs.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN runs.state
  WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
    AND t.on_demand = 0 AND t.state = 'LEASED' AND t.kind = 'DECAY')
    THEN 'DECAYING'
  WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
    AND t.on_demand = 0 AND t.state = 'LEASED' AND t.kind = 'TRAIN')
    THEN 'TRAINING'
  WHEN EXISTS (SELECT 1 FROM tasks d JOIN task_deps x ON x.task_id = d.id
    JOIN tasks u ON u.id = x.depends_on WHERE d.run_id = runs.id
    AND d.kind = 'DECAY' AND u.kind = 'TRUNK' AND u.state = 'LEASED')
    THEN 'TRUNK'
  WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.run_id = runs.id
    AND t.on_demand = 0 AND t.state = 'LEASED' AND t.kind = 'EVAL')
    THEN 'EVALUATING'
  ELSE 'WAITING' END;
)sql";

// v8: live predictions (docs/coordinator.md, "Live predictions"). While a
// sweep runs, the coordinator refits its laws each time a run finishes and
// predicts the final target of every pending and running run; each refit
// is one generation per sweep. A prediction is never a measurement: it
// lives only here, and no fit reads these tables. run_predictions gives
// the newest generation of each (run, sweep, target) with the run's state
// and, once it succeeded, the measured value it predicted (as RunFigures
// reads it: loss = final validation loss, else training loss; train_loss
// = the mean train_loss over its last 1% of steps, at least 32, as the
// curve law predicts it).
constexpr char kV8Predictions[] = R"sql(
CREATE TABLE prediction_generations (
  sweep_id    INTEGER NOT NULL REFERENCES sweeps (id),
  generation  INTEGER NOT NULL CHECK (generation >= 1),
  created_at  INTEGER NOT NULL,
  n_succeeded INTEGER NOT NULL,
  laws        TEXT NOT NULL DEFAULT '[]',
  PRIMARY KEY (sweep_id, generation)
) WITHOUT ROWID;

CREATE TABLE predictions (
  run_id     TEXT NOT NULL REFERENCES runs (id),
  sweep_id   INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  target     TEXT NOT NULL
             CHECK (target IN ('loss', 'longppl', 'train_loss')),
  predicted  REAL NOT NULL,
  lower      REAL,
  upper      REAL,
  method     TEXT NOT NULL
             CHECK (method IN ('profile', 'bootstrap', 'fit', 'curve')),
  n_points   INTEGER NOT NULL,
  PRIMARY KEY (run_id, sweep_id, generation, target),
  FOREIGN KEY (sweep_id, generation)
    REFERENCES prediction_generations (sweep_id, generation)
) WITHOUT ROWID;
CREATE INDEX predictions_by_generation ON predictions (sweep_id, generation);

CREATE VIEW run_predictions AS
SELECT
  p.run_id, p.sweep_id, s.name AS sweep, r.arch, r.scale, r.n_params,
  r.budget_tokens, r.state, p.generation, p.target, p.predicted, p.lower,
  p.upper, p.method, p.n_points,
  CASE WHEN r.state <> 'SUCCEEDED' THEN NULL
    WHEN p.target = 'loss' THEN coalesce(
      (SELECT e.value FROM evals e WHERE e.run_id = r.id
         AND e.metric = 'val_loss' ORDER BY e.step DESC LIMIT 1),
      (SELECT m.value FROM metrics m WHERE m.run_id = r.id
         AND m.name = 'val_loss' ORDER BY m.step DESC LIMIT 1),
      (SELECT m.value FROM metrics m WHERE m.run_id = r.id
         AND m.name = 'train_loss' ORDER BY m.step DESC LIMIT 1))
    WHEN p.target = 'longppl' THEN (SELECT e.value FROM evals e
      WHERE e.run_id = r.id AND e.metric = 'log_longppl'
      ORDER BY e.step DESC LIMIT 1)
    ELSE (SELECT avg(m.value) FROM metrics m WHERE m.run_id = r.id
      AND m.name = 'train_loss'
      AND m.step > r.step_done - max(32, r.step_done / 100))
  END AS actual,
  datetime(g.created_at / 1000, 'unixepoch') AS created
FROM (SELECT run_id, sweep_id, target, max(generation) AS generation
      FROM predictions GROUP BY run_id, sweep_id, target) n
  JOIN predictions p ON p.run_id = n.run_id AND p.sweep_id = n.sweep_id
    AND p.generation = n.generation AND p.target = n.target
  JOIN prediction_generations g
    ON g.sweep_id = p.sweep_id AND g.generation = p.generation
  JOIN runs r ON r.id = p.run_id
  LEFT JOIN sweeps s ON s.id = p.sweep_id;
)sql";

// v9: early stop (docs/sweeps.md, "Early stop"): a run the live
// predictions already know well enough is not trained and ends PREDICTED,
// a state and a phase of its own. SQLite cannot alter a CHECK constraint,
// and rebuilding `runs` would need its foreign keys off outside a
// transaction; the documented way to relax one is to edit the table's
// text in sqlite_schema ("Making Other Kinds Of Table Schema Changes",
// https://sqlite.org/lang_altertable.html): both of its lists of states
// (state, and phase since v7) end in 'FAILED', 'CANCELLED') and gain
// 'PREDICTED'. Only allowed values are added, so every stored row stays
// valid. The empty table made and dropped after it changes the schema
// cookie, so that every connection, this one included, reloads the schema.
constexpr char kV9PredictedState[] = R"sql(
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
  SET sql = replace(sql, '''FAILED'', ''CANCELLED'')',
                    '''FAILED'', ''CANCELLED'', ''PREDICTED'')')
  WHERE type = 'table' AND name = 'runs';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_v9_reload (x);
DROP TABLE schema_v9_reload;
)sql";

// v10: the adaptive order (docs/sweeps.md, "Adaptive order"). A sweep with
// schedule_policy: adaptive ranks its pending training tasks after each
// run (coordinator/server/adaptive_order.h) and stores, per task, the
// place it takes in the lease order (order_key, in the FLOPs units of
// cost_flops: the sweep's own tasks' costs, handed out again in its rank
// order, so that beside other sweeps of its priority it takes the places
// its tasks would have taken by cost), its rank in the sweep (1: next), its
// score (expected variance reduction per PFLOP; NULL while seeding) and
// why. Tasks of other sweeps keep order_key NULL and lease by cost as
// before: the pending index orders by coalesce(order_key, cost_flops).
constexpr char kV10AdaptiveOrder[] = R"sql(
ALTER TABLE tasks ADD COLUMN order_key REAL;
ALTER TABLE tasks ADD COLUMN order_rank INTEGER;
ALTER TABLE tasks ADD COLUMN order_score REAL;
ALTER TABLE tasks ADD COLUMN order_reason TEXT;
DROP INDEX tasks_pending;
CREATE INDEX tasks_pending
  ON tasks (priority DESC, coalesce(order_key, cost_flops), id)
  WHERE state = 'PENDING';
)sql";

// v11: the pending-task index also holds not_before, so that the lease
// queue's NextBackoffEnd (the earliest backoff of a pending task) reads the
// index instead of every task row (payloads of ~1.5 KiB: 9 ms a query in
// hlab-bench-coordinator's churn profile, 0.2 ms with this index), and
// NextLeasableTasks filters backing-off tasks before it reads their rows.
constexpr char kV11PendingIndex[] = R"sql(
DROP INDEX tasks_pending;
CREATE INDEX tasks_pending
  ON tasks (priority DESC, coalesce(order_key, cost_flops), id, not_before)
  WHERE state = 'PENDING';
)sql";

// v12: a worker can be drained (`hlab drain`: leased nothing new while its
// running tasks finish, until undrained), and records the build it runs.
constexpr char kV12WorkerDrain[] = R"sql(
ALTER TABLE workers ADD COLUMN draining INTEGER NOT NULL DEFAULT 0
  CHECK (draining IN (0, 1));
ALTER TABLE workers ADD COLUMN version TEXT NOT NULL DEFAULT '';
)sql";

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, kV1Tables},          {2, kV2Views},          {3, kV3OnDemandTasks},
      {4, kV4RunSummary},      {5, kV5FaultClasses},   {6, kV6TypedResources},
      {7, kV7RunProgress},     {8, kV8Predictions},    {9, kV9PredictedState},
      {10, kV10AdaptiveOrder}, {11, kV11PendingIndex}, {12, kV12WorkerDrain},
  };
  return kMigrations;
}

int SchemaVersion() { return static_cast<int>(Migrations().size()); }

absl::StatusOr<int> CurrentSchemaVersion(Database& db) {
  HLAB_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  return static_cast<int>(version);
}

absl::Status Migrate(Database& db) {
  HLAB_ASSIGN_OR_RETURN(int current, CurrentSchemaVersion(db));
  const int latest = SchemaVersion();
  if (current > latest) {
    return absl::FailedPreconditionError(
        absl::StrCat("database schema v", current,
                     " is newer than this hlab (v", latest, "): upgrade hlab"));
  }
  for (const Migration& migration : Migrations()) {
    if (migration.version <= current) continue;
    HLAB_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
    // Re-read inside the write lock: another process may have migrated.
    absl::StatusOr<int> now_at = CurrentSchemaVersion(db);
    absl::Status status = now_at.status();
    if (status.ok() && *now_at < migration.version) {
      status = db.Exec(migration.sql);
      if (status.ok()) {
        status =
            db.Exec(absl::StrCat("PRAGMA user_version = ", migration.version));
      }
    }
    if (!status.ok()) {
      (void)db.Exec("ROLLBACK");
      return absl::Status(status.code(), absl::StrCat("schema migration to v",
                                                      migration.version, ": ",
                                                      status.message()));
    }
    HLAB_RETURN_IF_ERROR(db.Exec("COMMIT"));
    HLAB_LOG(INFO) << "store: migrated " << db.path() << " to schema v"
                   << migration.version;
  }
  return absl::OkStatus();
}

}  // namespace hlab::store
