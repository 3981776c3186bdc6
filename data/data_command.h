// The `data` command: prepare, verify and inspect datasets from the command
// line, and encode or decode JSON lines with any tokenizer. `hlab-data ...`
// and the small `hlab-data` tool call it.
//
//   data prepare --input PATH... --output DIR [--tokenizer SPEC] ...
//   data verify DIR
//   data inspect DIR [--decode N]
//   data encode|decode [--tokenizer SPEC]   JSON lines, stdin -> stdout
//
// `data --help` and `data SUBCOMMAND --help` document every flag
// (docs/data.md too). Exit codes: 0 success; 1 an internal failure (the
// output cannot be written); 2 bad arguments or bad input (unknown flag,
// missing or malformed input file, corrupt or missing shard).
//
// Thread-safety: RunDataCommand may run concurrently on different outputs.
//
//   int main(int argc, char** argv) { return RunDataCommand(argc, argv); }
#ifndef HLAB_DATA_DATA_COMMAND_H_
#define HLAB_DATA_DATA_COMMAND_H_

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace hlab::data {

// argv[0] names the command (ignored), argv[1] is the subcommand: hlab-train
// calls RunDataCommand(argc - 1, argv + 1) for `hlab-data ...`. Results
// go to stdout, progress lines and errors to stderr.
int RunDataCommand(int argc, char** argv);

// The same with explicit arguments (args[0] is the subcommand) and streams
// (encode and decode read std::cin).
int RunDataCommand(const std::vector<std::string>& args, std::ostream& out,
                   std::ostream& err);

// The same with an explicit input stream for encode and decode.
int RunDataCommand(const std::vector<std::string>& args, std::istream& in,
                   std::ostream& out, std::ostream& err);

}  // namespace hlab::data

#endif  // HLAB_DATA_DATA_COMMAND_H_
