#include "task/run_config.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json_reader.h"
#include "common/status_macros.h"

namespace hlab::task {
namespace {

std::string Path(const std::string& where, absl::string_view key) {
  return where.empty() ? std::string(key) : absl::StrCat(where, ".", key);
}

}  // namespace

absl::StatusOr<RunConfig> ReadRunConfig(const nlohmann::json& json,
                                        const std::string& where) {
  RunConfig run;
  HLAB_RETURN_IF_ERROR(
      JsonFieldReader(json, where, "docs/evaluation.md").Read(&run));
  if (run.format != kRunConfigFormat) {
    return FieldError(
        Path(where, "format"),
        absl::StrCat("must be \"", kRunConfigFormat,
                     "\" (a run's canonical config), got '", run.format, "'"));
  }
  if (run.seq_len < 2) {
    return FieldError(Path(where, "seq_len"), "must be >= 2");
  }
  if (run.data.source == "prepared") {
    if (!run.data.path || run.data.path->empty()) {
      return FieldError(Path(where, "data.path"),
                        "is required for prepared data");
    }
  } else if (run.data.source != "synthetic") {
    return FieldError(Path(where, "data.source"),
                      absl::StrCat("must be \"synthetic\" or \"prepared\", "
                                   "got '",
                                   run.data.source, "'"));
  } else if (run.data.corpus_version.value_or(1) != kSyntheticCorpusVersion) {
    return FieldError(
        Path(where, "data.corpus_version"),
        absl::StrCat("the run was made on synthetic corpus v",
                     run.data.corpus_version.value_or(1),
                     run.data.corpus_version ? "" : " (the field is absent)",
                     ", but this hlab generates only v",
                     kSyntheticCorpusVersion,
                     ": its results cannot be continued or re-evaluated on "
                     "the same data. Submit the sweep again (the new corpus "
                     "gives new run ids), preferably into a new database "
                     "(docs/data.md)"));
  }
  return run;
}

absl::StatusOr<RunConfig> RunConfigFromJson(absl::string_view text) {
  HLAB_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonText(text, "run config"));
  return ReadRunConfig(j, "");
}

std::string RunConfigToJson(const RunConfig& run) {
  return JsonFieldWriter::Write(run).dump();
}

absl::StatusOr<TrainTask> TrainTaskForRun(const RunConfig& run) {
  TrainTask t;
  t.model = run.model;
  const RunDataConfig& d = run.data;
  if (d.source == "synthetic") {
    t.model.vocab_size = std::max<int64_t>(t.model.vocab_size, kByteVocab);
  }
  t.data.source = d.source;
  t.data.long_fraction = d.long_fraction;
  if (d.source == "prepared") {
    const std::string path = d.path.value_or("");
    t.data.long_dir = path + "/long";
    t.data.short_dir = path + "/short";
  } else {
    const int64_t seed = d.seed.value_or(0);
    if (seed < 0) return FieldError("data.seed", "must be >= 0");
    t.data.seed = static_cast<uint64_t>(seed);
  }
  t.seq_len = run.seq_len;
  t.batch_tokens = run.batch_tokens;
  t.budget_tokens = run.tokens;
  const RunScheduleConfig& s = run.schedule;
  t.optimizer.peak_lr = s.peak_lr;
  t.optimizer.weight_decay = s.weight_decay;
  t.optimizer.grad_clip = s.grad_clip;
  t.schedule.warmup_steps = s.warmup_steps;
  t.schedule.decay_fraction = s.decay_fraction;
  HLAB_RETURN_IF_ERROR(FieldCodec<DecayShape>::Read(
      nlohmann::json(s.decay_shape), "schedule.decay_shape",
      &t.schedule.decay_shape));
  t.schedule.min_lr_ratio = s.min_lr_ratio;
  if (run.seed < 0) return FieldError("seed", "must be >= 0");
  t.seed = static_cast<uint64_t>(run.seed);
  return t;
}

absl::Status FieldCodec<TrainTask>::Read(const nlohmann::json& j,
                                         const std::string& path,
                                         TrainTask* out) {
  if (!j.is_object()) return FieldError(path, "must be an object");
  if (j.contains("format")) {
    HLAB_ASSIGN_OR_RETURN(RunConfig run, ReadRunConfig(j, path));
    absl::StatusOr<TrainTask> task = TrainTaskForRun(run);
    if (!task.ok()) {
      return FieldError(path, task.status().message());
    }
    *out = *std::move(task);
    return absl::OkStatus();
  }
  // Otherwise an hlab-train task (what a user trained with), read, not
  // validated: an evaluation uses its seq_len and data (ValidateEvalTask),
  // and a run config's task reads back the same way once written.
  TrainTask task;
  absl::Status read = JsonFieldReader(j, path, "hlab-train --help").Read(&task);
  if (!read.ok()) {
    return absl::Status(read.code(),
                        absl::StrCat(read.message(),
                                     " (an hlab-train task, "
                                     "or a run config with \"format\": \"",
                                     kRunConfigFormat, "\")"));
  }
  *out = std::move(task);
  return absl::OkStatus();
}

nlohmann::json FieldCodec<TrainTask>::Write(const TrainTask& value) {
  return JsonFieldWriter::Write(value);
}

}  // namespace hlab::task
