// `hlab submit`: validate and expand a sweep spec; with --dry-run, print the
// expanded grid (each run's N, D, D/N, FLOPs and id) and the total compute
// with and without WSD trunk sharing, offline. Submitting to a coordinator
// comes with the coordinator.
//
// Thread-safe (no shared state).
//
//   int code = RunSubmit({"--dry-run", "examples/sweeps/demo.yaml"}, out, err);
#ifndef HLAB_CLI_SUBMIT_COMMAND_H_
#define HLAB_CLI_SUBMIT_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace hlab::cli {

Command SubmitCommand();

int RunSubmit(const std::vector<std::string>& args, std::ostream& out,
              std::ostream& err);

}  // namespace hlab::cli

#endif  // HLAB_CLI_SUBMIT_COMMAND_H_
