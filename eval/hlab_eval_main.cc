// hlab-eval: runs one EVAL task (a trained checkpoint's validation loss,
// log(LongPPL), NIAH) in one process (docs/evaluation.md).
//
//   hlab-eval --task task.json [--record-fd N] [--threads N] [--progress]
//   hlab-eval --task task.json --check
//   hlab-eval --example-task > task.json
//
// Records (JSON lines) go to stdout or --record-fd; human-readable lines go
// to stderr with --progress (or when stderr is a terminal). Exit codes:
// train/exit_codes.h.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/openmp_env.h"
#include "common/task_flags.h"
#include "eval/eval_task.h"
#include "train/exit_codes.h"
#include "train/malloc_reuse.h"
#include "train/records.h"
#include "train/trainer.h"

namespace {

using hlab::train::kExitPermanent;

constexpr char kUsage[] = R"(usage: hlab-eval --task FILE [options]
       hlab-eval --example-task | --help

Evaluates one trained checkpoint: validation loss, log(LongPPL) with key
tokens selected by a reference model (cached), needle-in-a-haystack.

options:
  --task FILE        the EVAL task (JSON; fields below)
  --record-fd N      write the JSON-lines records to file descriptor N
                     instead of stdout
  --threads N        override the task's thread count
  --check            validate the task against its checkpoints' headers and
                     print the resolved plan as JSON; exit 0 or 2, evaluate
                     nothing
  --progress         plain progress lines on stderr (also the default when
                     stderr is a terminal)
  --example-task     print a template task (fill in the checkpoint paths)

exit codes: 0 success; 2 permanent failure (bad task, missing or corrupt
checkpoint, tokenizer mismatch, no document long enough, a context above
the trained length without allow_extrapolation); 75 retryable (out of
memory, I/O).

)";

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "hlab-eval: " << message << "\n";
  std::exit(kExitPermanent);
}

// A line on stderr for a record, for people watching.
void PrintLine(const nlohmann::json& r) {
  const std::string type = r.value("type", "");
  if (type == "start") {
    std::fprintf(stderr, "hlab-eval: run %s step %lld (%s): %s\n",
                 r.value("run_id", "").c_str(),
                 static_cast<long long>(r.value("step", int64_t{0})),
                 r.value("arch", "").c_str(), r["evals"].dump().c_str());
  } else if (type == "progress") {
    std::fprintf(stderr, "%s: %lld/%lld %s\n", r.value("eval", "").c_str(),
                 static_cast<long long>(r.value("done", int64_t{0})),
                 static_cast<long long>(r.value("total", int64_t{0})),
                 r.value("phase", "").c_str());
  } else if (type == "result") {
    std::fprintf(stderr, "%s = %.4f  %s\n", r.value("metric", "").c_str(),
                 r.value("value", 0.0), r["details"].dump().c_str());
  } else if (type == "warning") {
    std::fprintf(stderr, "warning: %s\n", r.value("message", "").c_str());
  } else if (type == "done") {
    std::fprintf(stderr, "done in %.1f s\n", r.value("seconds", 0.0));
  }
}

// RecordWriter that also prints human lines.
class Records final {
 public:
  Records(std::FILE* out, bool lines)
      : writer_(out, hlab::train::RecordWriter::Human::kNone), lines_(lines) {}
  void Emit(const nlohmann::json& r) {
    writer_.Emit(r);
    if (lines_) PrintLine(r);
  }

 private:
  hlab::train::RecordWriter writer_;
  bool lines_;
};

}  // namespace

int main(int argc, char** argv) {
  hlab::EnsurePassiveOpenMpWait(argv);
  hlab::train::KeepFreedMemoryForReuse();
  absl::StatusOr<hlab::TaskFlags> flags = hlab::ParseTaskFlags(
      argc, argv, {{"--example-task", hlab::TaskFlag::kAction}});
  if (!flags.ok()) Fail(std::string(flags.status().message()));
  if (flags->action == "--help") {
    std::cout << kUsage << hlab::task::kEvalTaskFieldsHelp;
    return 0;
  } else if (flags->action == "--example-task") {
    std::cout << hlab::task::ExampleEvalTaskJson();
    return 0;
  }
  const std::string& task_path = flags->task_path;
  const int record_fd = flags->record_fd;
  const int64_t threads = flags->threads;
  const bool progress_lines = flags->progress || ::isatty(STDERR_FILENO) != 0;
  const bool check_only = flags->check;
  if (task_path.empty()) {
    Fail("no task: give --task FILE (try --example-task for a template)");
  }
  std::FILE* out = stdout;
  if (record_fd >= 0) {
    out = ::fdopen(record_fd, "w");
    if (out == nullptr) {
      Fail(absl::StrCat("--record-fd ", record_fd, " is not open for writing"));
    }
  }
  // With --check, stdout is the plan: records go nowhere unless --record-fd.
  Records records(check_only && record_fd < 0 ? nullptr : out, progress_lines);
  auto report = [&](const absl::Status& status) {
    const int code = hlab::train::ExitCodeFor(status);
    records.Emit({{"type", "error"},
                  {"exit_code", code},
                  {"message", std::string(status.message())}});
    std::cerr << "hlab-eval: " << status.message() << "\n";
    return code;
  };

  auto task = hlab::task::LoadEvalTask(task_path);
  if (!task.ok()) return report(task.status());
  if (threads > 0) task->threads = threads;
  if (check_only) {
    auto plan = hlab::eval::CheckEvalTask(*task);
    if (!plan.ok()) return report(plan.status());
    std::cout << *plan << "\n";
    return hlab::train::kExitSuccess;
  }
  const absl::Status done = hlab::eval::RunEvalTask(
      *task, [&](const nlohmann::json& r) { records.Emit(r); });
  if (!done.ok()) return report(done);
  return hlab::train::kExitSuccess;
}
