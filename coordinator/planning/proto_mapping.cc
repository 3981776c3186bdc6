#include "coordinator/planning/proto_mapping.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hlab::coordinator {

using nlohmann::json;

hlab::v1::RunState ToProto(store::RunState state) {
  switch (state) {
    case store::RunState::kPending:
      return hlab::v1::RUN_STATE_PENDING;
    case store::RunState::kRunning:
      return hlab::v1::RUN_STATE_RUNNING;
    case store::RunState::kSucceeded:
      return hlab::v1::RUN_STATE_SUCCEEDED;
    case store::RunState::kFailed:
      return hlab::v1::RUN_STATE_FAILED;
    case store::RunState::kCancelled:
      return hlab::v1::RUN_STATE_CANCELLED;
    case store::RunState::kPredicted:
      return hlab::v1::RUN_STATE_PREDICTED;
  }
  return hlab::v1::RUN_STATE_UNSPECIFIED;
}

hlab::v1::RunPhase ToProto(store::RunPhase phase) {
  switch (phase) {
    case store::RunPhase::kWaiting:
      return hlab::v1::RUN_PHASE_WAITING;
    case store::RunPhase::kTrunk:
      return hlab::v1::RUN_PHASE_TRUNK;
    case store::RunPhase::kTraining:
      return hlab::v1::RUN_PHASE_TRAINING;
    case store::RunPhase::kDecaying:
      return hlab::v1::RUN_PHASE_DECAYING;
    case store::RunPhase::kEvaluating:
      return hlab::v1::RUN_PHASE_EVALUATING;
    case store::RunPhase::kSucceeded:
      return hlab::v1::RUN_PHASE_SUCCEEDED;
    case store::RunPhase::kFailed:
      return hlab::v1::RUN_PHASE_FAILED;
    case store::RunPhase::kCancelled:
      return hlab::v1::RUN_PHASE_CANCELLED;
    case store::RunPhase::kPredicted:
      return hlab::v1::RUN_PHASE_PREDICTED;
  }
  return hlab::v1::RUN_PHASE_UNSPECIFIED;
}

absl::StatusOr<store::RunState> FromProto(hlab::v1::RunState state) {
  switch (state) {
    case hlab::v1::RUN_STATE_PENDING:
      return store::RunState::kPending;
    case hlab::v1::RUN_STATE_RUNNING:
      return store::RunState::kRunning;
    case hlab::v1::RUN_STATE_SUCCEEDED:
      return store::RunState::kSucceeded;
    case hlab::v1::RUN_STATE_FAILED:
      return store::RunState::kFailed;
    case hlab::v1::RUN_STATE_CANCELLED:
      return store::RunState::kCancelled;
    case hlab::v1::RUN_STATE_PREDICTED:
      return store::RunState::kPredicted;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("states: unknown run state ", static_cast<int>(state)));
  }
}

hlab::v1::TaskState ToProto(store::TaskState state) {
  switch (state) {
    case store::TaskState::kPending:
      return hlab::v1::TASK_STATE_PENDING;
    case store::TaskState::kLeased:
      return hlab::v1::TASK_STATE_LEASED;
    case store::TaskState::kSucceeded:
      return hlab::v1::TASK_STATE_SUCCEEDED;
    case store::TaskState::kFailed:
      return hlab::v1::TASK_STATE_FAILED;
    case store::TaskState::kCancelled:
      return hlab::v1::TASK_STATE_CANCELLED;
  }
  return hlab::v1::TASK_STATE_UNSPECIFIED;
}

hlab::v1::TaskKind ToProto(store::TaskKind kind) {
  switch (kind) {
    case store::TaskKind::kTrain:
      return hlab::v1::TASK_KIND_TRAIN;
    case store::TaskKind::kTrunk:
      return hlab::v1::TASK_KIND_TRUNK;
    case store::TaskKind::kDecay:
      return hlab::v1::TASK_KIND_DECAY;
    case store::TaskKind::kEval:
      return hlab::v1::TASK_KIND_EVAL;
  }
  return hlab::v1::TASK_KIND_UNSPECIFIED;
}

store::TaskKind FromProto(hlab::v1::TaskKind kind) {
  switch (kind) {
    case hlab::v1::TASK_KIND_TRUNK:
      return store::TaskKind::kTrunk;
    case hlab::v1::TASK_KIND_DECAY:
      return store::TaskKind::kDecay;
    case hlab::v1::TASK_KIND_EVAL:
      return store::TaskKind::kEval;
    default:
      return store::TaskKind::kTrain;
  }
}

std::string SweepIdString(int64_t id) { return absl::StrCat(id); }

absl::StatusOr<int64_t> ParseSweepId(absl::string_view text) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(text, &id) || id <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep: '", text, "' is not a sweep id"));
  }
  return id;
}

store::RunSpec ToRunSpec(const hlab::v1::Run& run, int max_attempts) {
  store::RunSpec spec;
  spec.id = run.run_id();
  spec.arch = run.architecture();
  spec.scale = run.scale();
  spec.budget_tokens = run.tokens();
  spec.n_params = run.non_embedding_params();
  spec.seed = run.seed();
  spec.config = run.config_json();
  spec.max_attempts = max_attempts;
  return spec;
}

store::TaskSpec ToTaskSpec(const hlab::v1::Task& task, int64_t sweep_id,
                           const std::string& trunk_group) {
  store::TaskSpec spec;
  spec.id = task.task_id();
  spec.sweep_id = sweep_id;
  if (task.kind() != hlab::v1::TASK_KIND_TRUNK && task.run_ids_size() > 0) {
    spec.run_id = task.run_ids(0);
  }
  spec.trunk_group = trunk_group;
  spec.kind = FromProto(task.kind());
  spec.priority = task.priority();
  spec.cost_flops = task.flops();
  spec.depends_on.assign(task.depends_on().begin(), task.depends_on().end());
  spec.resources.gpus = task.resources().gpus();
  spec.resources.gpu_memory_bytes = task.resources().gpu_memory_bytes();
  spec.resources.cpu_threads = task.resources().cpu_threads();
  spec.resources.cpu_ranks = task.resources().cpu_ranks();
  json draft = json::parse(task.draft_json(), nullptr, false);
  if (draft.is_discarded() || !draft.is_object()) draft = json::object();
  json payload = {{"draft", draft},
                  {"run_ids", std::vector<std::string>(task.run_ids().begin(),
                                                       task.run_ids().end())},
                  {"start_step", task.start_step()},
                  {"end_step", task.end_step()},
                  {"eval_step", task.eval_step()},
                  {"evals", std::vector<std::string>(task.evals().begin(),
                                                     task.evals().end())}};
  json branches = json::array();
  for (const auto& b : task.branch_points()) {
    branches.push_back(
        {{"run_id", b.run_id()}, {"step", b.step()}, {"tokens", b.tokens()}});
  }
  payload["branch_points"] = branches;
  spec.payload = payload.dump();
  return spec;
}

hlab::v1::Task ToProtoTask(const store::Task& task) {
  hlab::v1::Task out;
  out.set_task_id(task.spec.id);
  out.set_kind(ToProto(task.spec.kind));
  for (const auto& d : task.spec.depends_on) out.add_depends_on(d);
  out.set_flops(task.spec.cost_flops);
  out.set_priority(task.spec.priority);
  out.set_state(ToProto(task.state));
  out.set_attempt(task.attempt);
  out.set_worker_id(task.lease_worker);
  if (task.state == store::TaskState::kLeased) {
    out.set_lease_expires_unix_ms(store::ToMillis(task.lease_expiry));
  }
  out.set_error(task.failure_reason);
  const store::TaskResources& r = task.spec.resources;
  out.mutable_resources()->set_gpus(r.gpus);
  out.mutable_resources()->set_gpu_memory_bytes(r.gpu_memory_bytes);
  out.mutable_resources()->set_cpu_threads(r.cpu_threads);
  out.mutable_resources()->set_cpu_ranks(r.cpu_ranks);
  json payload = json::parse(task.spec.payload, nullptr, false);
  if (payload.is_object()) {
    for (const auto& id : payload.value("run_ids", json::array())) {
      if (id.is_string()) out.add_run_ids(id.get<std::string>());
    }
    out.set_start_step(payload.value("start_step", int64_t{0}));
    out.set_end_step(payload.value("end_step", int64_t{0}));
    out.set_eval_step(payload.value("eval_step", int64_t{0}));
    for (const auto& e : payload.value("evals", json::array())) {
      if (e.is_string()) out.add_evals(e.get<std::string>());
    }
    for (const auto& b : payload.value("branch_points", json::array())) {
      auto* bp = out.add_branch_points();
      bp->set_run_id(b.value("run_id", ""));
      bp->set_step(b.value("step", int64_t{0}));
      bp->set_tokens(b.value("tokens", int64_t{0}));
    }
  }
  if (out.run_ids_size() == 0 && !task.spec.run_id.empty()) {
    out.add_run_ids(task.spec.run_id);
  }
  return out;
}

hlab::v1::Event ToProtoEvent(const store::Event& event) {
  hlab::v1::Event out;
  out.set_sequence(event.seq);
  out.set_time_unix_ms(store::ToMillis(event.time));
  if (event.sweep_id != 0) out.set_sweep_id(SweepIdString(event.sweep_id));
  out.set_run_id(event.run_id);
  out.set_message(event.kind + ": " + event.message);
  const std::string& k = event.kind;
  if (k == "sweep_created") {
    out.set_kind(hlab::v1::SWEEP_SUBMITTED);
  } else if (k == "run_state") {
    out.set_kind(hlab::v1::RUN_STATE_CHANGED);
    // The message starts with the new state ("FAILED: reason").
    const std::string state = event.message.substr(0, event.message.find(':'));
    absl::StatusOr<store::RunState> parsed = store::ParseRunState(state);
    if (parsed.ok()) out.set_run_state(ToProto(*parsed));
  } else if (k == "task_retry" || k == "task_failed") {
    out.set_kind(hlab::v1::TASK_STATE_CHANGED);
    out.set_task_state(k == "task_failed" ? hlab::v1::TASK_STATE_FAILED
                                          : hlab::v1::TASK_STATE_RETRYING);
  } else if (k == "task_reopened") {
    out.set_kind(hlab::v1::TASK_STATE_CHANGED);
    out.set_task_state(hlab::v1::TASK_STATE_PENDING);
  } else if (k == "run_progress") {
    out.set_kind(hlab::v1::RUN_PROGRESS);
    if (event.phase) out.set_run_phase(ToProto(*event.phase));
    out.set_step(event.progress.step);
    out.set_tokens(event.progress.tokens);
    if (event.progress.loss) out.set_loss(*event.progress.loss);
  } else if (k == "predictions") {
    out.set_kind(hlab::v1::PREDICTIONS_UPDATED);
  } else if (k == "sweep_cancelled" || k == "sweep_finished") {
    out.set_kind(hlab::v1::SWEEP_FINISHED);
  } else if (k == "fits") {
    out.set_kind(hlab::v1::FIT_FINISHED);
  } else if (k == "checkpoint") {
    out.set_kind(hlab::v1::CHECKPOINT_SAVED);
  } else if (k == "worker_joined") {
    out.set_kind(hlab::v1::WORKER_JOINED);
  } else if (k == "worker_lost" || k == "worker_left") {
    out.set_kind(hlab::v1::WORKER_LOST);
  } else {
    out.set_kind(hlab::v1::EVENT_KIND_UNSPECIFIED);
  }
  return out;
}

std::string DevicesToJson(
    const google::protobuf::RepeatedPtrField<hlab::v1::Device>& devices) {
  json out = json::array();
  for (const auto& d : devices) {
    out.push_back({{"kind", d.kind()},
                   {"index", d.index()},
                   {"name", d.name()},
                   {"memory_bytes", d.memory_bytes()},
                   {"cores", d.cores()}});
  }
  return out.dump();
}

void DevicesFromJson(
    const std::string& text,
    google::protobuf::RepeatedPtrField<hlab::v1::Device>* devices) {
  json parsed = json::parse(text, nullptr, false);
  if (!parsed.is_array()) return;
  for (const auto& d : parsed) {
    if (!d.is_object()) continue;
    hlab::v1::Device* device = devices->Add();
    device->set_kind(d.value("kind", ""));
    device->set_index(d.value("index", 0));
    device->set_name(d.value("name", ""));
    device->set_memory_bytes(d.value("memory_bytes", int64_t{0}));
    device->set_cores(d.value("cores", 0));
  }
}

hlab::v1::Worker ToProtoWorker(const store::WorkerInfo& worker) {
  hlab::v1::Worker out;
  out.set_worker_id(worker.id);
  out.set_hostname(worker.address);
  DevicesFromJson(worker.devices, out.mutable_devices());
  out.set_state(worker.state != store::WorkerState::kUp
                    ? hlab::v1::WORKER_STATE_LOST
                : worker.draining ? hlab::v1::WORKER_STATE_DRAINING
                                  : hlab::v1::WORKER_STATE_ALIVE);
  out.set_version(worker.version);
  out.set_registered_unix_ms(store::ToMillis(worker.registered_at));
  out.set_last_heartbeat_unix_ms(store::ToMillis(worker.last_heartbeat));
  return out;
}

std::string StoredMetricName(absl::string_view name) {
  // Called per metric point: a copy and a character swap, no substitution
  // table.
  std::string stored(name.data(), name.size());
  std::replace(stored.begin(), stored.end(), '/', '_');
  return stored;
}

store::MetricPoint FromProto(const hlab::v1::MetricPoint& point) {
  store::MetricPoint out;
  out.run_id = point.run_id();
  out.name = StoredMetricName(point.name());
  out.step = point.step();
  out.value = point.value();
  out.tokens = point.tokens();
  out.wall_time = static_cast<double>(point.wall_unix_ms()) / 1000.0;
  return out;
}

hlab::v1::QueryValue ToProto(const store::Value& value) {
  hlab::v1::QueryValue out;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    out.set_int_value(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    out.set_double_value(*d);
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    out.set_text_value(*s);
  } else if (const auto* b = std::get_if<store::Blob>(&value)) {
    out.set_blob_value(b->bytes);
  }
  return out;
}

}  // namespace hlab::coordinator
