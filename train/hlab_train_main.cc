// hlab-train: runs one training task in one process (docs/training.md).
//
//   hlab-train --task task.json [--record-fd N] [--threads N]
//   hlab-train --example-task > task.json
//   hlab-train --probe-devices
//   hlab-train --build-info
//
// Records (JSON lines) go to stdout or --record-fd; a progress bar goes to
// stderr when it is a terminal. Exit codes: train/exit_codes.h.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "common/openmp_env.h"
#include "common/task_flags.h"
#include "task/train_plan.h"
#include "train/devices.h"
#include "train/exit_codes.h"
#include "train/malloc_reuse.h"
#include "train/records.h"
#include "train/trainer.h"

namespace {

using hlab::train::kExitPermanent;

constexpr char kUsage[] = R"(usage: hlab-train --task FILE [options]
       hlab-train --example-task | --probe-devices | --build-info | --help

Runs one training task: trains a hybrid LM to its budget (or stop point),
writing checkpoints, held-out validation and progress records.

options:
  --task FILE        the task (JSON; fields below)
  --record-fd N      write the JSON-lines records to file descriptor N
                     instead of stdout
  --threads N        override the task's thread count
  --check            validate the task and print its plan as JSON (steps,
                     branch points, parameters); exit 0 or 2, train nothing
  --progress         plain progress lines on stderr (for log files); by
                     default a progress bar when stderr is a terminal
  --rank R, --world-size W, --master-addr A, --master-port P
                     data-parallel rank R of W (c10d; rank 0 hosts the
                     rendezvous at A:P, default 127.0.0.1:29500). Every
                     rank gets the same task; rank 0 writes the records and
                     checkpoints
  --example-task     print a small valid task (synthetic data, < 1 minute)
  --probe-devices    print the devices this build can train on, as JSON
  --build-info       print LibTorch's configuration and the BLAS loaded

exit codes: 0 success; 2 permanent failure (bad task, data or checkpoint:
fix the task); 3 loss not finite at the same step twice (lower the LR);
75 retryable (out of memory, I/O, preempted by SIGTERM after a checkpoint).

)";

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "hlab-train: " << message << "\n";
  std::exit(kExitPermanent);
}

// LibTorch's configuration and the BLAS/LAPACK libraries mapped into this
// process (Debian's libtorch uses whatever libblas.so.3 alternative is
// selected; OpenBLAS is ~2x faster than the reference BLAS or ATLAS).
void PrintBuildInfo() {
  std::cout << at::show_config() << "\n" << at::get_parallel_info() << "\n";
  torch::mm(torch::ones({64, 64}), torch::ones({64, 64}));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::set<std::string> libs;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    for (const char* name :
         {"blas", "lapack", "dnnl", "jemalloc", "tcmalloc"}) {
      if (path.find(name) != std::string::npos) libs.insert(path);
    }
  }
  std::cout << "libraries loaded:\n";
  for (const std::string& lib : libs) std::cout << "  " << lib << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  hlab::EnsurePassiveOpenMpWait(argv);
  hlab::train::KeepFreedMemoryForReuse();
  absl::StatusOr<hlab::TaskFlags> flags =
      hlab::ParseTaskFlags(argc, argv,
                           {{"--example-task", hlab::TaskFlag::kAction},
                            {"--probe-devices", hlab::TaskFlag::kAction},
                            {"--build-info", hlab::TaskFlag::kAction},
                            {"--rank", hlab::TaskFlag::kInt},
                            {"--world-size", hlab::TaskFlag::kInt},
                            {"--master-port", hlab::TaskFlag::kInt},
                            {"--master-addr", hlab::TaskFlag::kValue}});
  if (!flags.ok()) Fail(std::string(flags.status().message()));
  if (flags->action == "--help") {
    std::cout << kUsage << hlab::task::kTaskFieldsHelp;
    return 0;
  } else if (flags->action == "--example-task") {
    std::cout << hlab::task::ExampleTaskJson();
    return 0;
  } else if (flags->action == "--probe-devices") {
    std::cout << hlab::train::ProbeDevicesJson() << "\n";
    return 0;
  } else if (flags->action == "--build-info") {
    PrintBuildInfo();
    return 0;
  }
  hlab::train::DistributedConfig distributed;
  for (const auto& [name, target] :
       {std::pair<const char*, int*>{"--rank", &distributed.rank},
        {"--world-size", &distributed.world_size},
        {"--master-port", &distributed.master_port}}) {
    if (auto it = flags->ints.find(name); it != flags->ints.end()) {
      *target = it->second;
    }
  }
  if (auto it = flags->values.find("--master-addr");
      it != flags->values.end()) {
    distributed.master_addr = it->second;
  }
  const std::string& task_path = flags->task_path;
  const int record_fd = flags->record_fd;
  const int64_t threads = flags->threads;
  const bool progress_lines = flags->progress;
  const bool check_only = flags->check;
  if (task_path.empty()) {
    Fail("no task: give --task FILE (try --example-task for one)");
  }

  std::FILE* out = stdout;
  if (record_fd >= 0) {
    out = ::fdopen(record_fd, "w");
    if (out == nullptr) {
      Fail(absl::StrCat("--record-fd ", record_fd, " is not open for writing"));
    }
  }
  using Human = hlab::train::RecordWriter::Human;
  hlab::train::RecordWriter records(out, progress_lines ? Human::kLines
                                         : ::isatty(STDERR_FILENO) != 0
                                             ? Human::kBar
                                             : Human::kNone);
  auto report = [&](const absl::Status& status) {
    const int code = hlab::train::ExitCodeFor(status);
    records.Emit({{"type", "error"},
                  {"exit_code", code},
                  {"message", std::string(status.message())}});
    records.FinishProgress();
    std::cerr << "hlab-train: " << status.message() << "\n";
    return code;
  };

  auto task = hlab::task::LoadTrainTask(task_path);
  if (!task.ok()) return report(task.status());
  if (threads > 0) task->threads = threads;
  if (check_only) {
    auto plan = hlab::task::CheckTrainTask(*task);
    if (!plan.ok()) return report(plan.status());
    std::cout << *plan << "\n";
    return hlab::train::kExitSuccess;
  }

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  auto trainer = hlab::train::Trainer::Create(*task, &records, distributed);
  if (!trainer.ok()) return report(trainer.status());
  const absl::Status done = (*trainer)->Run(&g_stop);
  if (!done.ok()) return report(done);
  return hlab::train::kExitSuccess;
}
