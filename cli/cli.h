// The `hlab` command-line interface: a table of subcommands and the
// dispatcher that runs one.
//
// Each subcommand is a Command registered in a CommandRegistry; adding one is
// a new file with a Run function and one Register call in
// RegisterBuiltinCommands (commands.cc). Commands print results to `out` and
// errors as a single line "hlab <cmd>: error: <what>; <what to do>" to `err`,
// and return an exit code (kExit*). No exception or stack trace reaches the
// user.
//
// Thread-compatible: a registry is filled once, then only read.
//
//   std::ostringstream out, err;
//   int code = hlab::cli::RunCli({"submit", "--dry-run", "demo.yaml"}, out,
//   err);
#ifndef HLAB_CLI_CLI_H_
#define HLAB_CLI_CLI_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace hlab::cli {

// Exit codes of `hlab` (docs/cli.md).
inline constexpr int kExitOk = 0;
// The command ran and failed: invalid spec, missing file, server error.
inline constexpr int kExitFailed = 1;
// Usage error: unknown command or flag, missing argument, bad flag value.
inline constexpr int kExitUsage = 2;

struct Command {
  std::string name;     // "submit"
  std::string summary;  // one line for `hlab help`
  std::string usage;    // "hlab submit [--dry-run] SPEC.yaml" plus details
  // Runs with the arguments after the command name. Every registered
  // command has one.
  std::function<int(const std::vector<std::string>& args, std::ostream& out,
                    std::ostream& err)>
      run;
};

class CommandRegistry {
 public:
  // Adds a command; a later command with the same name replaces it.
  void Register(Command command);
  // Null if unknown.
  const Command* Find(const std::string& name) const;
  const std::vector<Command>& commands() const { return commands_; }

 private:
  std::vector<Command> commands_;
};

// Every command of hlab, implemented or not.
void RegisterBuiltinCommands(CommandRegistry* registry);

// `hlab help` / `hlab --help`: usage and the command list.
std::string HelpText(const CommandRegistry& registry);

// Dispatches `args` (argv without the program name) and returns the exit
// code.
int RunCli(const CommandRegistry& registry,
           const std::vector<std::string>& args, std::ostream& out,
           std::ostream& err);
// The same with the builtin commands.
int RunCli(const std::vector<std::string>& args, std::ostream& out,
           std::ostream& err);

}  // namespace hlab::cli

#endif  // HLAB_CLI_CLI_H_
