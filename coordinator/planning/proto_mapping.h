// Mapping between the hlab.v1 protos and the store's plain structs
// (coordinator/store/types.h). The store has no protobuf; the services call
// these at their edges.
//
// Conventions: a sweep id is the store's integer id printed in decimal;
// times are Unix milliseconds; device lists and resource requests are stored
// as JSON; metric names are stored with '/' replaced by '_' ("train/loss"
// and "train_loss" are one metric, the name run_summary reads).
//
// Thread-safe (pure functions).
//
//   store::RunSpec run = ToRunSpec(plan.runs[0], 3);
//   hlab::v1::Event event = ToProtoEvent(stored_event);
#ifndef HLAB_COORDINATOR_PLANNING_PROTO_MAPPING_H_
#define HLAB_COORDINATOR_PLANNING_PROTO_MAPPING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/store/query.h"
#include "coordinator/store/types.h"
#include "hlab/v1/client_service.pb.h"
#include "hlab/v1/event.pb.h"
#include "hlab/v1/run.pb.h"
#include "hlab/v1/task.pb.h"
#include "hlab/v1/worker.pb.h"

namespace hlab::coordinator {

hlab::v1::RunState ToProto(store::RunState state);
hlab::v1::RunPhase ToProto(store::RunPhase phase);
hlab::v1::TaskState ToProto(store::TaskState state);
hlab::v1::TaskKind ToProto(store::TaskKind kind);
store::TaskKind FromProto(hlab::v1::TaskKind kind);
// InvalidArgument for RUN_STATE_UNSPECIFIED or an unknown value.
absl::StatusOr<store::RunState> FromProto(hlab::v1::RunState state);

// "12" <-> 12. InvalidArgument unless a positive decimal integer.
std::string SweepIdString(int64_t id);
absl::StatusOr<int64_t> ParseSweepId(absl::string_view text);

// A run of a plan as the store keeps it.
store::RunSpec ToRunSpec(const hlab::v1::Run& run, int max_attempts);
// A task of a plan as the store keeps it; payload = the plan's draft_json
// plus what the proto carries that the store has no column for (run ids,
// steps, branch points, evals).
store::TaskSpec ToTaskSpec(const hlab::v1::Task& task, int64_t sweep_id,
                           const std::string& trunk_group);
// The stored task as a proto (kind, state, attempt, lease, resources, and
// the fields kept in its payload). task_json is left empty.
hlab::v1::Task ToProtoTask(const store::Task& task);

hlab::v1::Event ToProtoEvent(const store::Event& event);

std::string DevicesToJson(
    const google::protobuf::RepeatedPtrField<hlab::v1::Device>& devices);
void DevicesFromJson(
    const std::string& json,
    google::protobuf::RepeatedPtrField<hlab::v1::Device>* devices);
hlab::v1::Worker ToProtoWorker(const store::WorkerInfo& worker);

// "train/loss" -> "train_loss".
std::string StoredMetricName(absl::string_view name);
store::MetricPoint FromProto(const hlab::v1::MetricPoint& point);

hlab::v1::QueryValue ToProto(const store::Value& value);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_PLANNING_PROTO_MAPPING_H_
