// The `fit` command: argument parsing and the run, shared by the standalone
// tool `hlab-fit` and the project CLI's `hlab fit`, which are thin wrappers.
//
//   hlab-fit --points FILE.csv [--verify FILE.csv | --verify-n-above N]
//            [--bootstrap K] [--threads T] [--seed S] [--json]
//   hlab-fit --chinchilla FILE.csv ...   (= --points FILE --preprocess
//                                          chinchilla)
//
// Exit codes: 0 success, 2 bad usage or bad input (unreadable file, bad CSV,
// invalid points), 1 anything else. Errors are one line on `err` saying
// what to do.
//
// Thread-safety: reentrant.
//
//   int main(int argc, char** argv) {
//     std::vector<std::string> args(argv + 1, argv + argc);
//     return hlab::analysis::RunFitCommand(args, std::cout, std::cerr);
//   }
#ifndef HLAB_ANALYSIS_FIT_CSV_COMMAND_H_
#define HLAB_ANALYSIS_FIT_CSV_COMMAND_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hlab::analysis {

struct FitCommandArgs {
  std::string points_path;
  // "none" (the project's N, D, loss CSV) or "chinchilla" (Chinchilla's
  // Figure 4 file read as Epoch's replication reads it).
  std::string preprocess = "none";
  std::string verify_path;
  std::optional<double> verify_n_above;
  int bootstrap = 1000;  // 0: no bootstrap
  int threads = 0;       // 0: one per hardware thread
  uint64_t seed = 42;
  bool json = false;
  bool help = false;
};

// Parses the arguments after the program name; flags take "--flag value" or
// "--flag=value". InvalidArgument names the offending flag.
absl::StatusOr<FitCommandArgs> ParseFitArgs(
    const std::vector<std::string>& args);

// The usage text, with `program` as the command name.
std::string FitUsage(const std::string& program);

// Parses `args`, fits, and prints the report (text, or one JSON object with
// --json) to `out`; returns the exit code.
int RunFitCommand(const std::vector<std::string>& args, std::ostream& out,
                  std::ostream& err, const std::string& program = "hlab-fit");

}  // namespace hlab::analysis

#endif  // HLAB_ANALYSIS_FIT_CSV_COMMAND_H_
