#include "coordinator/store/types.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hlab::store {
namespace {

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseName(
    const std::array<std::pair<Enum, const char*>, N>& names,
    absl::string_view name, absl::string_view what) {
  for (const auto& [value, text] : names) {
    if (name == text) return value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " '", name, "'"));
}

template <typename Enum, size_t N>
const char* NameOf(const std::array<std::pair<Enum, const char*>, N>& names,
                   Enum value) {
  for (const auto& [v, text] : names) {
    if (v == value) return text;
  }
  return "UNKNOWN";
}

constexpr std::array<std::pair<SweepState, const char*>, 2> kSweepStates = {{
    {SweepState::kActive, "ACTIVE"},
    {SweepState::kCancelled, "CANCELLED"},
}};
constexpr std::array<std::pair<RunState, const char*>, 6> kRunStates = {{
    {RunState::kPending, "PENDING"},
    {RunState::kRunning, "RUNNING"},
    {RunState::kSucceeded, "SUCCEEDED"},
    {RunState::kFailed, "FAILED"},
    {RunState::kCancelled, "CANCELLED"},
    {RunState::kPredicted, "PREDICTED"},
}};
constexpr std::array<std::pair<RunPhase, const char*>, 9> kRunPhases = {{
    {RunPhase::kWaiting, "WAITING"},
    {RunPhase::kTrunk, "TRUNK"},
    {RunPhase::kTraining, "TRAINING"},
    {RunPhase::kDecaying, "DECAYING"},
    {RunPhase::kEvaluating, "EVALUATING"},
    {RunPhase::kSucceeded, "SUCCEEDED"},
    {RunPhase::kFailed, "FAILED"},
    {RunPhase::kCancelled, "CANCELLED"},
    {RunPhase::kPredicted, "PREDICTED"},
}};
constexpr std::array<std::pair<TaskState, const char*>, 5> kTaskStates = {{
    {TaskState::kPending, "PENDING"},
    {TaskState::kLeased, "LEASED"},
    {TaskState::kSucceeded, "SUCCEEDED"},
    {TaskState::kFailed, "FAILED"},
    {TaskState::kCancelled, "CANCELLED"},
}};
constexpr std::array<std::pair<TaskKind, const char*>, 4> kTaskKinds = {{
    {TaskKind::kTrain, "TRAIN"},
    {TaskKind::kTrunk, "TRUNK"},
    {TaskKind::kDecay, "DECAY"},
    {TaskKind::kEval, "EVAL"},
}};
constexpr std::array<std::pair<WorkerState, const char*>, 2> kWorkerStates = {{
    {WorkerState::kUp, "UP"},
    {WorkerState::kLost, "LOST"},
}};
constexpr std::array<std::pair<CheckpointKind, const char*>, 2>
    kCheckpointKinds = {{
        {CheckpointKind::kLatest, "latest"},
        {CheckpointKind::kBranch, "branch"},
    }};

constexpr std::array<std::pair<FaultClass, const char*>, 2> kFaultClasses = {{
    {FaultClass::kTask, "TASK"},
    {FaultClass::kInfrastructure, "INFRASTRUCTURE"},
}};

}  // namespace

const char* ToString(SweepState state) { return NameOf(kSweepStates, state); }
const char* ToString(RunState state) { return NameOf(kRunStates, state); }
const char* ToString(RunPhase phase) { return NameOf(kRunPhases, phase); }
const char* ToString(TaskState state) { return NameOf(kTaskStates, state); }
const char* ToString(TaskKind kind) { return NameOf(kTaskKinds, kind); }
const char* ToString(WorkerState state) { return NameOf(kWorkerStates, state); }
const char* ToString(CheckpointKind kind) {
  return NameOf(kCheckpointKinds, kind);
}

const char* ToString(FaultClass fault) { return NameOf(kFaultClasses, fault); }

absl::StatusOr<SweepState> ParseSweepState(absl::string_view name) {
  return ParseName(kSweepStates, name, "sweep state");
}
absl::StatusOr<RunState> ParseRunState(absl::string_view name) {
  return ParseName(kRunStates, name, "run state");
}
absl::StatusOr<RunPhase> ParseRunPhase(absl::string_view name) {
  return ParseName(kRunPhases, name, "run phase");
}
absl::StatusOr<TaskState> ParseTaskState(absl::string_view name) {
  return ParseName(kTaskStates, name, "task state");
}
absl::StatusOr<TaskKind> ParseTaskKind(absl::string_view name) {
  return ParseName(kTaskKinds, name, "task kind");
}
absl::StatusOr<WorkerState> ParseWorkerState(absl::string_view name) {
  return ParseName(kWorkerStates, name, "worker state");
}
absl::StatusOr<CheckpointKind> ParseCheckpointKind(absl::string_view name) {
  return ParseName(kCheckpointKinds, name, "checkpoint kind");
}

absl::StatusOr<FaultClass> ParseFaultClass(absl::string_view name) {
  return ParseName(kFaultClasses, name, "fault class");
}

int TaskResources::Ranks() const {
  return gpus > 0 ? gpus : std::max(1, cpu_ranks);
}

int64_t ToMillis(absl::Time time) { return absl::ToUnixMillis(time); }
absl::Time FromMillis(int64_t millis) { return absl::FromUnixMillis(millis); }

bool LeasesBefore(const Task& a, const Task& b) {
  if (a.spec.priority != b.spec.priority) {
    return a.spec.priority > b.spec.priority;
  }
  const double a_key = a.order ? a.order->key : a.spec.cost_flops;
  const double b_key = b.order ? b.order->key : b.spec.cost_flops;
  if (a_key != b_key) return a_key < b_key;
  return a.spec.id < b.spec.id;  // SQLite's BINARY collation: bytewise
}

}  // namespace hlab::store
