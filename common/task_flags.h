// TaskFlags: the command line of the one-task-per-process tools, hlab-train
// and hlab-eval: --task FILE, --record-fd N, --threads N, --check,
// --progress and --help (-h), plus each tool's own flags (an action that
// ends parsing, such as --example-task; a switch; a string or an integer
// value). Errors are one line naming the flag, as the tools print them
// after their name: "--threads must be a positive integer, got 'x'",
// "--task needs a value (see --help)", "unknown option '--x' (see --help)".
//
// Thread-safety: ParseTaskFlags is a pure function; TaskFlags is a plain
// value.
//
//   absl::StatusOr<TaskFlags> flags = ParseTaskFlags(
//       argc, argv, {{"--example-task", TaskFlag::kAction}});
//   if (!flags.ok()) Fail(std::string(flags.status().message()));
//   if (flags->action == "--example-task") { PrintExample(); return 0; }
//   if (flags->task_path.empty()) Fail("no task: give --task FILE");
#ifndef HLAB_COMMON_TASK_FLAGS_H_
#define HLAB_COMMON_TASK_FLAGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hlab {

// A tool's own flag.
struct TaskFlag {
  enum Kind {
    kAction,  // ends parsing: TaskFlags::action is its name
    kSwitch,  // TaskFlags::switches holds its name when given
    kValue,   // takes a value: TaskFlags::values[name] (the last one given)
    kInt,     // takes an integer: TaskFlags::ints[name]
  };
  std::string name;  // with its dashes: "--rank"
  Kind kind = kSwitch;
};

struct TaskFlags {
  // "--help" (for -h too) or the tool's action flag that ended parsing; the
  // flags after it are not read. Empty when there was none.
  std::string action;
  std::string task_path;  // --task; empty when not given
  int record_fd = -1;     // --record-fd; -1: stdout
  int64_t threads = -1;   // --threads; -1: the task's own
  bool check = false;     // --check
  bool progress = false;  // --progress
  std::set<std::string> switches;
  std::map<std::string, std::string> values;
  std::map<std::string, int> ints;
};

// Parses argv[1..argc). InvalidArgument for an unknown option, a missing
// value, a --record-fd that is not a file descriptor number (>= 0), a
// --threads that is not a positive integer, or a kInt flag that is not an
// integer; parsing stops at the first such error, and at --help, -h or a
// kAction flag.
absl::StatusOr<TaskFlags> ParseTaskFlags(int argc, const char* const* argv,
                                         const std::vector<TaskFlag>& own);

}  // namespace hlab

#endif  // HLAB_COMMON_TASK_FLAGS_H_
