// Plain structs and enums of the coordinator's store: what the typed
// operations of Store (coordinator/store/store.h) take and return. The
// coordinator maps its protobuf messages to and from these.
//
// Thread-safety: plain values.
//
//   RunSpec run;
//   run.id = hash;
//   run.arch = "swa";
//   absl::StatusOr<RunState> s = ParseRunState("SUCCEEDED");
#ifndef HLAB_COORDINATOR_STORE_TYPES_H_
#define HLAB_COORDINATOR_STORE_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hlab::store {

enum class SweepState { kActive, kCancelled };
// kPredicted: stopped early, never trained (the sweep's
// `adaptive.stop_when`, Store::StopPredictedRuns); not a measurement.
enum class RunState {
  kPending,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kPredicted
};
// What a run is doing now, finer than its state (docs/store.md, "Run
// progress"): its shared trunk is training (kTrunk), its own TRAIN task
// (kTraining) or DECAY task (kDecaying) is leased, one of its planned EVAL
// tasks is leased (kEvaluating), nothing of it is leased (kWaiting: for a
// trunk, a dependency or a worker), or it ended (the four end states).
enum class RunPhase {
  kWaiting,
  kTrunk,
  kTraining,
  kDecaying,
  kEvaluating,
  kSucceeded,
  kFailed,
  kCancelled,
  kPredicted
};
enum class TaskState { kPending, kLeased, kSucceeded, kFailed, kCancelled };
enum class TaskKind { kTrain, kTrunk, kDecay, kEval };
enum class WorkerState { kUp, kLost };
enum class CheckpointKind { kLatest, kBranch };
// Whose fault an attempt's end was (docs/coordinator.md, "Retries"):
// kTask, the task's own (its trainer exited non-zero or crashed, its task
// file cannot be built) spends the run's max_attempts and the sweep's retry
// budget; kInfrastructure (the lease expired, the worker left or shut down,
// the trainer was killed from outside or could not be started on that node)
// is retried without limit and spends neither.
enum class FaultClass { kTask, kInfrastructure };

// Names as stored in the database ("PENDING", "TRAIN", "latest", ...).
const char* ToString(SweepState state);
const char* ToString(RunState state);
const char* ToString(RunPhase phase);
const char* ToString(TaskState state);
const char* ToString(TaskKind kind);
const char* ToString(WorkerState state);
const char* ToString(CheckpointKind kind);
const char* ToString(FaultClass fault);

// Inverses of ToString; InvalidArgument for an unknown name.
absl::StatusOr<SweepState> ParseSweepState(absl::string_view name);
absl::StatusOr<RunState> ParseRunState(absl::string_view name);
absl::StatusOr<RunPhase> ParseRunPhase(absl::string_view name);
absl::StatusOr<TaskState> ParseTaskState(absl::string_view name);
absl::StatusOr<TaskKind> ParseTaskKind(absl::string_view name);
absl::StatusOr<WorkerState> ParseWorkerState(absl::string_view name);
absl::StatusOr<CheckpointKind> ParseCheckpointKind(absl::string_view name);
absl::StatusOr<FaultClass> ParseFaultClass(absl::string_view name);

// Stored times are Unix milliseconds.
int64_t ToMillis(absl::Time time);
absl::Time FromMillis(int64_t millis);

struct SweepSpec {
  std::string name;
  std::string spec_hash;   // identity: the same hash is the same sweep
  std::string request_id;  // client's idempotency key (informational)
  std::string spec;        // canonical spec text (JSON or YAML)
  int max_retries = 20;    // retries allowed over all tasks of the sweep
};

struct Sweep {
  int64_t id = 0;
  SweepSpec spec;
  absl::Time created_at;
  SweepState state = SweepState::kActive;
  int retries = 0;        // task-error retries used so far (the budget)
  int infra_retries = 0;  // infrastructure retries (outside the budget)
};

struct CreateSweepResult {
  int64_t sweep_id = 0;
  bool created = false;  // false: a sweep with this spec_hash existed
};

struct RunSpec {
  std::string id;  // hash of the canonical config
  std::string arch;
  std::string scale;
  int64_t budget_tokens = 0;
  int64_t n_params = 0;
  int64_t seed = 0;
  std::string config = "{}";  // JSON
  int max_attempts = 3;       // default attempts for each of its tasks
};

// A run's own training so far: its newest `train_loss` point, which for a
// run on a shared trunk is the trunk's position up to the run's branch point
// (trunk points belong to every run that branches at or after them).
struct RunProgress {
  int64_t step = 0;
  int64_t tokens = 0;  // at most the run's budget
  std::optional<double> loss;
};

struct Run {
  RunSpec spec;
  RunState state = RunState::kPending;
  RunPhase phase = RunPhase::kWaiting;
  RunProgress progress;
  std::string failure_reason;
  int retries = 0;
  absl::Time created_at;
  absl::Time updated_at;
};

struct AddRunsResult {
  int added = 0;     // new runs
  int existing = 0;  // runs already stored (now also members of the sweep)
};

// What a task needs of a worker: its sweep's `resources` for its scale
// (docs/sweeps.md). 0 means not asked for. Four integer columns of `tasks`.
struct TaskResources {
  int gpus = 0;                  // CUDA devices (0: a CPU task)
  int64_t gpu_memory_bytes = 0;  // free memory each of them needs
  int cpu_threads = 0;           // intra-op threads (0: the trainer's default)
  int cpu_ranks = 0;             // CPU data-parallel ranks, on one worker
  // Data-parallel ranks: one per GPU, else the CPU ranks (at least one).
  int Ranks() const;
  friend bool operator==(const TaskResources& a, const TaskResources& b) {
    return a.gpus == b.gpus && a.gpu_memory_bytes == b.gpu_memory_bytes &&
           a.cpu_threads == b.cpu_threads && a.cpu_ranks == b.cpu_ranks;
  }
};

struct TaskSpec {
  std::string id;
  int64_t sweep_id = 0;     // the sweep that created it (retry accounting)
  std::string run_id;       // empty only for a TRUNK task
  std::string trunk_group;  // shared-trunk group (TRUNK and its DECAYs)
  TaskKind kind = TaskKind::kTrain;
  int priority = 0;       // higher first
  double cost_flops = 0;  // cheaper first among equal priorities
  std::vector<std::string> depends_on;
  TaskResources resources;
  std::string payload = "{}";  // JSON task description for the worker
  // Attempts that may end in a task error. 0: the run's max_attempts; a
  // TRUNK task (no run) must give its own (the sweep's
  // retry.max_attempts_per_run).
  int max_attempts = 0;
  // Asked for on its own (`hlab eval`), not part of the run's plan: its
  // state never changes its run's state, and it is limited by its own
  // max_attempts only, not by the sweep's retry budget (store.h).
  bool on_demand = false;
};

// A task's place in its sweep's adaptive order (schema v10; docs/sweeps.md,
// "Adaptive order"; Store::SetTaskOrder). Tasks of default sweeps have none.
struct TaskOrder {
  std::string task_id;
  // Its place in the lease order within its priority, in cost_flops' units
  // (it sorts where a task of that cost would).
  double key = 0;
  int64_t rank = 0;             // 1: the sweep's next run to train
  std::optional<double> score;  // variance reduction per PFLOP; none: seeding
  std::string reason;           // "seed: adds scale S2", ...
};

struct Task {
  TaskSpec spec;
  TaskState state = TaskState::kPending;
  int attempt = 0;         // number of the current (or last) lease; 0 = never
  int failures = 0;        // task-error ends since the last resume
  int infra_failures = 0;  // infrastructure ends since the last resume
  std::string lease_worker;
  absl::Time lease_expiry = absl::InfinitePast();
  absl::Time not_before = absl::InfinitePast();
  std::string failure_reason;
  absl::Time created_at;
  absl::Time updated_at;
  // Its adaptive order, when its sweep has one and it is PENDING (task_id
  // unset here: it is spec.id).
  std::optional<TaskOrder> order;
};

// The lease order (Store::NextLeasableTasks' ORDER BY and the pending
// index): true when `a` is leased before `b`: higher priority first, then
// the lower of order.key where set and spec.cost_flops elsewhere
// (coalesce(order_key, cost_flops)), then the lower id.
bool LeasesBefore(const Task& a, const Task& b);

// How a leased attempt ended without success, as its worker (or the lease
// reaper) saw it.
struct AttemptFailure {
  std::string error;  // one line
  FaultClass fault = FaultClass::kTask;
  // false: a task error that no retry can fix (a bad config). An
  // infrastructure fault is always retried.
  bool retryable = true;
};

struct RunFilter {
  std::optional<int64_t> sweep_id;
  std::optional<RunState> state;
  std::vector<RunPhase> phases;  // empty: any
  std::string arch;              // empty: any
  std::string scale;             // empty: any
};

struct TaskFilter {
  std::optional<int64_t> sweep_id;
  std::string run_id;  // empty: any
  std::optional<TaskState> state;
  std::string lease_worker;  // non-empty: only tasks LEASED to this worker
};

struct MetricPoint {
  std::string run_id;  // empty: the task's run
  std::string name;
  int64_t step = 0;
  double value = 0;
  int64_t tokens = 0;
  double wall_time = 0;  // seconds since the run started
};

struct Checkpoint {
  std::string task_id;
  std::string run_id;  // empty: the task's run (none for a trunk)
  int64_t step = 0;
  int64_t tokens = 0;
  std::string path;
  std::string checksum;
  CheckpointKind kind = CheckpointKind::kLatest;
  int attempt = 0;  // filled in by the store
  absl::Time created_at;
};

struct EvalResult {
  std::string run_id;
  int64_t step = 0;
  std::string metric;
  double value = 0;
  std::string details = "{}";  // JSON
};

struct FitRecord {
  int64_t sweep_id = 0;
  std::string arch;
  std::string target;  // e.g. "val_loss", "long_ppl"
  double e = 0, a = 0, alpha = 0, b = 0, beta = 0;
  std::string ci = "{}";  // JSON confidence intervals
  double r2_fit = 0;
  double r2_verify = 0;  // NaN: no held-out points (stored NULL)
  int n_points = 0;
  std::string details = "{}";  // JSON
};

// A law's prediction of a run's final target (never a measurement: it is
// stored apart, table predictions, and no fit reads it).
struct Prediction {
  std::string run_id;
  // "loss" or "longppl" (log LongPPL), by the sweep's law; "train_loss"
  // (the mean over its last 1% of steps), by the run's own curve.
  std::string target;
  double predicted = 0;
  // The interval's ends; nullopt: the data do not bound that side (or there
  // is no interval: method "fit").
  std::optional<double> lower;
  std::optional<double> upper;
  // "profile" (profile-likelihood prediction interval), "bootstrap"
  // (percentile interval of the resampled laws), "fit" (no interval), or
  // "curve" (the learning-rate-area law of its own curve, analysis/
  // curve_law.h).
  std::string method = "fit";
  // The fit points of the law that predicted it ("curve": the run's newest
  // step it saw).
  int n_points = 0;
};

// One refit of a sweep's laws while it runs, with its predictions.
struct PredictionGeneration {
  int64_t sweep_id = 0;
  int64_t generation = 0;  // 1, 2, ... per sweep
  absl::Time created_at;
  int n_succeeded = 0;      // succeeded runs of the sweep it rests on
  std::string laws = "[]";  // JSON: one object per (arch, target)
  std::vector<Prediction> predictions;
};

struct Event {
  int64_t seq = 0;
  int64_t sweep_id = 0;  // 0: not about one sweep
  std::string run_id;
  std::string kind;  // "sweep_created", "run_state", "run_progress", ...
  std::string message;
  absl::Time time;
  // "run_progress" only: the run's phase and progress when it was written.
  std::optional<RunPhase> phase;
  RunProgress progress;
};

struct WorkerInfo {
  std::string id;
  std::string address;
  std::string devices = "[]";  // JSON
  int capacity = 1;
  absl::Time registered_at;
  absl::Time last_heartbeat;
  WorkerState state = WorkerState::kUp;
  // Leased nothing new until undrained (`hlab drain`); kept across
  // re-registration and coordinator restarts.
  bool draining = false;
  std::string version;  // the worker's build (RegisterRequest.version)
};

struct ExpiredLease {
  std::string task_id;
  int attempt = 0;
  std::string worker_id;
  bool requeued = false;  // false: retries exhausted, the task FAILED
};

// Tasks whose lease was cancelled: the coordinator tells their workers.
struct CancelledLease {
  std::string task_id;
  int attempt = 0;
  std::string worker_id;
};

struct StateCounts {
  std::map<std::string, int64_t> runs;   // "PENDING" -> count, ...
  std::map<std::string, int64_t> tasks;  // every state present, 0 included
};

// What a restarted coordinator needs to rebuild its in-memory scheduler.
struct RecoveredState {
  std::vector<Task> leased;   // with attempts, workers and expiries
  std::vector<Task> pending;  // in NextLeasableTasks order (deps ignored)
  std::vector<WorkerInfo> workers;
  int64_t last_event_seq = 0;
};

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_TYPES_H_
