#include "common/task_flags.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hlab {

absl::StatusOr<TaskFlags> ParseTaskFlags(int argc, const char* const* argv,
                                         const std::vector<TaskFlag>& own) {
  TaskFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    // Takes the next argument as the value of `arg`.
    auto take_value = [&]() -> absl::Status {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(
            absl::StrCat(arg, " needs a value (see --help)"));
      }
      value = argv[++i];
      return absl::OkStatus();
    };
    if (arg == "--help" || arg == "-h") {
      flags.action = "--help";
      return flags;
    }
    if (arg == "--check") {
      flags.check = true;
      continue;
    }
    if (arg == "--progress") {
      flags.progress = true;
      continue;
    }
    if (arg == "--task") {
      if (absl::Status s = take_value(); !s.ok()) return s;
      flags.task_path = value;
      continue;
    }
    if (arg == "--record-fd") {
      if (absl::Status s = take_value(); !s.ok()) return s;
      if (!absl::SimpleAtoi(value, &flags.record_fd) || flags.record_fd < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--record-fd must be a file descriptor number, got '", value, "'"));
      }
      continue;
    }
    if (arg == "--threads") {
      if (absl::Status s = take_value(); !s.ok()) return s;
      if (!absl::SimpleAtoi(value, &flags.threads) || flags.threads < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--threads must be a positive integer, got '", value, "'"));
      }
      continue;
    }
    const TaskFlag* flag = nullptr;
    for (const TaskFlag& f : own) {
      if (f.name == arg) flag = &f;
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '", arg, "' (see --help)"));
    }
    switch (flag->kind) {
      case TaskFlag::kAction:
        flags.action = arg;
        return flags;
      case TaskFlag::kSwitch:
        flags.switches.insert(arg);
        break;
      case TaskFlag::kValue:
        if (absl::Status s = take_value(); !s.ok()) return s;
        flags.values[arg] = value;
        break;
      case TaskFlag::kInt: {
        if (absl::Status s = take_value(); !s.ok()) return s;
        int n = 0;
        if (!absl::SimpleAtoi(value, &n)) {
          return absl::InvalidArgumentError(
              absl::StrCat(arg, " must be an integer, got '", value, "'"));
        }
        flags.ints[arg] = n;
        break;
      }
    }
  }
  return flags;
}

}  // namespace hlab
