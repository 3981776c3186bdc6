// The table of hlab's commands. Commands with a null `run` are planned and
// answer "not implemented yet" (exit code 2).
#include "cli/cli.h"
#include "cli/client_commands.h"
#include "cli/submit_command.h"

namespace hlab::cli {
namespace {

Command Planned(const char* name, const char* summary, const char* usage) {
  Command c;
  c.name = name;
  c.summary = summary;
  c.usage = usage;
  return c;
}

}  // namespace

void RegisterBuiltinCommands(CommandRegistry* registry) {
  registry->Register(UpCommand());
  registry->Register(SubmitCommand());
  registry->Register(StatusCommand());
  registry->Register(WatchCommand());
  registry->Register(RunsCommand());
  registry->Register(QueryCommand());
  registry->Register(ResumeCommand());
  registry->Register(CancelCommand());
  registry->Register(WorkersCommand());
  registry->Register(FitCommand());
  registry->Register(BackupCommand());
  registry->Register(
      Planned("report", "write a sweep's report", "usage: hlab report SWEEP"));
}

}  // namespace hlab::cli
