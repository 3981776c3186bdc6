// RunEvalTask: runs one EVAL task (task/eval_task.h, the file format) on
// its checkpoint and emits the result records; CheckEvalTask checks it
// against the checkpoints' headers without running a model.
//
// Records (train/records.h, one JSON object per line): start, progress,
// result (metric val_loss / log_longppl / niah_acc...), warning, done,
// error. Errors map to exit codes with train::ExitCodeFor: a bad task, a
// missing or corrupt checkpoint, a tokenizer mismatch, no document long
// enough, or a context above the trained length without
// allow_extrapolation are permanent (2).
//
// Thread-safety: plain data; RunEvalTask runs on the calling thread (and
// LibTorch's intra-op pool).
//
//   HLAB_ASSIGN_OR_RETURN(task::EvalTask task,
//   task::LoadEvalTask("task.json")); train::RecordWriter records(stdout,
//   train::RecordWriter::Human::kNone); absl::Status done = RunEvalTask(
//       task, [&](const nlohmann::json& r) { records.Emit(r); });
#ifndef HLAB_EVAL_EVAL_TASK_H_
#define HLAB_EVAL_EVAL_TASK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "task/eval_task.h"

namespace hlab::eval {

// Validates the task against its checkpoints' headers without running a
// model: the checkpoints exist and have valid headers, the context lengths
// fit the model (or allow_extrapolation), the reference's vocabulary and
// tokenizer match. Returns the plan as one line of JSON (`hlab-eval
// --check`). Errors as RunEvalTask's.
absl::StatusOr<std::string> CheckEvalTask(const task::EvalTask& task);

// Receives each record (a train::RecordWriter's Emit, usually).
using RecordSink = std::function<void(const nlohmann::json&)>;

// Runs the task's evaluations in order, emitting records. The first error
// ends the task (its "error" record is the caller's to write).
absl::Status RunEvalTask(const task::EvalTask& task, const RecordSink& emit);

}  // namespace hlab::eval

#endif  // HLAB_EVAL_EVAL_TASK_H_
