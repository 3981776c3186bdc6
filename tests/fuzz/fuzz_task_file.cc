// libFuzzer target: the task files of hlab-train and hlab-eval
// (task/train_task.h TrainTaskFromJson, task/eval_task.h EvalTaskFromJson)
// and their validation. Malformed input must give an error status, never a
// crash; what reads back must write and read again to the same text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "task/eval_task.h"
#include "task/train_task.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hlab::task::TrainTask> train =
      hlab::task::TrainTaskFromJson(text);
  if (train.ok()) {
    const std::string once = hlab::task::TrainTaskToJson(*train);
    auto again = hlab::task::TrainTaskFromJson(once);
    if (!again.ok() || hlab::task::TrainTaskToJson(*again) != once) {
      __builtin_trap();
    }
  }
  absl::StatusOr<hlab::task::EvalTask> eval =
      hlab::task::EvalTaskFromJson(text);
  if (eval.ok()) {
    const std::string once = hlab::task::EvalTaskToJson(*eval);
    auto again = hlab::task::EvalTaskFromJson(once);
    if (!again.ok() || hlab::task::EvalTaskToJson(*again) != once) {
      __builtin_trap();
    }
  }
  return 0;
}
