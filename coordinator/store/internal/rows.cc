#include "coordinator/store/internal/rows.h"

#include <functional>
#include <utility>

#include "common/status_macros.h"

namespace hlab::store::internal {

const char kSweepColumns[] =
    "id, name, spec_hash, request_id, spec, created_at, state, max_retries, "
    "retries, infra_retries";
const char kRunColumns[] =
    "id, arch, scale, budget_tokens, n_params, seed, config, max_attempts, "
    "state, failure_reason, retries, created_at, updated_at, phase, "
    "step_done, tokens_done, train_loss";
const char kTaskColumns[] =
    "id, sweep_id, run_id, trunk_group, kind, priority, cost_flops, "
    "payload, max_attempts, state, attempt, failures, "
    "lease_worker, lease_expiry, not_before, failure_reason, created_at, "
    "updated_at, on_demand, infra_failures, "
    "gpus, gpu_memory_bytes, cpu_threads, cpu_ranks, "
    "order_key, order_rank, order_score, order_reason";
const char kWorkerColumns[] =
    "id, address, devices, capacity, registered_at, last_heartbeat, state, "
    "draining, version";
const char kCheckpointColumns[] =
    "task_id, run_id, step, tokens, path, checksum, kind, attempt, created_at";
const char kEventColumns[] =
    "seq, sweep_id, run_id, kind, message, time, phase, step, tokens, loss";

absl::Time TimeColumn(const Statement& st, int column) {
  if (st.IsNull(column)) return absl::InfinitePast();
  return FromMillis(st.ColumnInt(column));
}

absl::StatusOr<Sweep> ReadSweep(const Statement& st) {
  Sweep sweep;
  sweep.id = st.ColumnInt(0);
  sweep.spec.name = st.ColumnText(1);
  sweep.spec.spec_hash = st.ColumnText(2);
  sweep.spec.request_id = st.ColumnText(3);
  sweep.spec.spec = st.ColumnText(4);
  sweep.created_at = TimeColumn(st, 5);
  HLAB_ASSIGN_OR_RETURN(sweep.state, ParseSweepState(st.ColumnText(6)));
  sweep.spec.max_retries = static_cast<int>(st.ColumnInt(7));
  sweep.retries = static_cast<int>(st.ColumnInt(8));
  sweep.infra_retries = static_cast<int>(st.ColumnInt(9));
  return sweep;
}

absl::StatusOr<Run> ReadRun(const Statement& st) {
  Run run;
  run.spec.id = st.ColumnText(0);
  run.spec.arch = st.ColumnText(1);
  run.spec.scale = st.ColumnText(2);
  run.spec.budget_tokens = st.ColumnInt(3);
  run.spec.n_params = st.ColumnInt(4);
  run.spec.seed = st.ColumnInt(5);
  run.spec.config = st.ColumnText(6);
  run.spec.max_attempts = static_cast<int>(st.ColumnInt(7));
  HLAB_ASSIGN_OR_RETURN(run.state, ParseRunState(st.ColumnText(8)));
  run.failure_reason = st.ColumnText(9);
  run.retries = static_cast<int>(st.ColumnInt(10));
  run.created_at = TimeColumn(st, 11);
  run.updated_at = TimeColumn(st, 12);
  HLAB_ASSIGN_OR_RETURN(run.phase, ParseRunPhase(st.ColumnText(13)));
  run.progress.step = st.ColumnInt(14);
  run.progress.tokens = st.ColumnInt(15);
  if (!st.IsNull(16)) run.progress.loss = st.ColumnDouble(16);
  return run;
}

absl::StatusOr<Task> ReadTask(const Statement& st) {
  Task task;
  task.spec.id = st.ColumnText(0);
  task.spec.sweep_id = st.ColumnInt(1);
  task.spec.run_id = st.ColumnText(2);
  task.spec.trunk_group = st.ColumnText(3);
  HLAB_ASSIGN_OR_RETURN(task.spec.kind, ParseTaskKind(st.ColumnText(4)));
  task.spec.priority = static_cast<int>(st.ColumnInt(5));
  task.spec.cost_flops = st.ColumnDouble(6);
  task.spec.payload = st.ColumnText(7);
  task.spec.max_attempts = static_cast<int>(st.ColumnInt(8));
  HLAB_ASSIGN_OR_RETURN(task.state, ParseTaskState(st.ColumnText(9)));
  task.attempt = static_cast<int>(st.ColumnInt(10));
  task.failures = static_cast<int>(st.ColumnInt(11));
  task.lease_worker = st.ColumnText(12);
  task.lease_expiry = TimeColumn(st, 13);
  task.not_before = TimeColumn(st, 14);
  task.failure_reason = st.ColumnText(15);
  task.created_at = TimeColumn(st, 16);
  task.updated_at = TimeColumn(st, 17);
  task.spec.on_demand = st.ColumnInt(18) != 0;
  task.infra_failures = static_cast<int>(st.ColumnInt(19));
  task.spec.resources.gpus = static_cast<int>(st.ColumnInt(20));
  task.spec.resources.gpu_memory_bytes = st.ColumnInt(21);
  task.spec.resources.cpu_threads = static_cast<int>(st.ColumnInt(22));
  task.spec.resources.cpu_ranks = static_cast<int>(st.ColumnInt(23));
  if (!st.IsNull(24)) {
    TaskOrder order;
    order.key = st.ColumnDouble(24);
    order.rank = st.ColumnInt(25);
    if (!st.IsNull(26)) order.score = st.ColumnDouble(26);
    order.reason = st.ColumnText(27);
    task.order = std::move(order);
  }
  return task;
}

absl::StatusOr<WorkerInfo> ReadWorker(const Statement& st) {
  WorkerInfo worker;
  worker.id = st.ColumnText(0);
  worker.address = st.ColumnText(1);
  worker.devices = st.ColumnText(2);
  worker.capacity = static_cast<int>(st.ColumnInt(3));
  worker.registered_at = TimeColumn(st, 4);
  worker.last_heartbeat = TimeColumn(st, 5);
  HLAB_ASSIGN_OR_RETURN(worker.state, ParseWorkerState(st.ColumnText(6)));
  worker.draining = st.ColumnInt(7) != 0;
  worker.version = st.ColumnText(8);
  return worker;
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const Statement& st) {
  Checkpoint checkpoint;
  checkpoint.task_id = st.ColumnText(0);
  checkpoint.run_id = st.ColumnText(1);
  checkpoint.step = st.ColumnInt(2);
  checkpoint.tokens = st.ColumnInt(3);
  checkpoint.path = st.ColumnText(4);
  checkpoint.checksum = st.ColumnText(5);
  HLAB_ASSIGN_OR_RETURN(checkpoint.kind, ParseCheckpointKind(st.ColumnText(6)));
  checkpoint.attempt = static_cast<int>(st.ColumnInt(7));
  checkpoint.created_at = TimeColumn(st, 8);
  return checkpoint;
}

Event ReadEvent(const Statement& st) {
  Event event;
  event.seq = st.ColumnInt(0);
  event.sweep_id = st.IsNull(1) ? 0 : st.ColumnInt(1);
  event.run_id = st.ColumnText(2);
  event.kind = st.ColumnText(3);
  event.message = st.ColumnText(4);
  event.time = TimeColumn(st, 5);
  if (!st.IsNull(6)) {
    absl::StatusOr<RunPhase> phase = ParseRunPhase(st.ColumnText(6));
    if (phase.ok()) event.phase = *phase;
  }
  event.progress.step = st.ColumnInt(7);
  event.progress.tokens = st.ColumnInt(8);
  if (!st.IsNull(9)) event.progress.loss = st.ColumnDouble(9);
  return event;
}

absl::StatusOr<std::vector<Task>> QueryTasks(
    Database& db, const std::string& sql,
    const std::function<void(Statement&)>& bind) {
  std::vector<Task> tasks;
  {
    HLAB_ASSIGN_OR_RETURN(Statement st, db.Prepare(sql));
    bind(st);
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, st.Step());
      if (!has_row) break;
      HLAB_ASSIGN_OR_RETURN(Task task, ReadTask(st));
      tasks.push_back(std::move(task));
    }
  }
  HLAB_ASSIGN_OR_RETURN(
      Statement deps,
      db.Prepare("SELECT depends_on FROM task_deps WHERE task_id = ? "
                 "ORDER BY depends_on"));
  for (Task& task : tasks) {
    deps.Bind(1, task.spec.id);
    while (true) {
      HLAB_ASSIGN_OR_RETURN(bool has_row, deps.Step());
      if (!has_row) break;
      task.spec.depends_on.push_back(deps.ColumnText(0));
    }
    deps.Reset();
  }
  return tasks;
}

}  // namespace hlab::store::internal
