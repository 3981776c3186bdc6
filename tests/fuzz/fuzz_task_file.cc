// libFuzzer target: the task files of hlab-train and hlab-eval
// (train/task.h TrainTaskFromJson, eval/eval_task.h EvalTaskFromJson) and
// the trainer's validation of what parses. Malformed input must give an
// error status, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "eval/eval_task.h"
#include "train/task.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hlab::train::TrainTask> train =
      hlab::train::TrainTaskFromJson(text);
  if (train.ok()) {
    (void)hlab::train::ValidateTrainTask(*train);
    // What parses prints back and parses again.
    if (!hlab::train::TrainTaskFromJson(hlab::train::TrainTaskToJson(*train))
             .ok()) {
      __builtin_trap();
    }
  }
  (void)hlab::eval::EvalTaskFromJson(text);
  return 0;
}
