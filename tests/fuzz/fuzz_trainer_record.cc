// libFuzzer target: the worker's reader of the trainer's JSON-lines
// records (worker/record_relay.h RecordRelay::Add), the bytes a trainer or
// evaluator writes on its record pipe. Each input is split into lines, as
// the worker reads them; none may crash it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "worker/record_relay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A trunk with two branch points, so records reach the run mapping too.
  hlab::v1::Task task;
  task.set_task_id("trunk-1");
  task.set_kind(hlab::v1::TASK_KIND_TRUNK);
  task.add_run_ids("small");
  task.add_run_ids("large");
  for (const auto& [run, step] :
       {std::pair<const char*, int64_t>{"small", 10}, {"large", 20}}) {
    hlab::v1::BranchPoint* b = task.add_branch_points();
    b->set_run_id(run);
    b->set_step(step);
  }
  hlab::worker::RecordRelay relay(task);
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    (void)relay.Add(line, now);
    now += absl::Milliseconds(10);
  }
  (void)relay.PeekPoints(1000);
  (void)relay.progress();
  return 0;
}
