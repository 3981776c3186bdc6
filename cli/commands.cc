// The table of hlab's commands.
#include "cli/cli.h"
#include "cli/client_commands.h"
#include "cli/submit_command.h"

namespace hlab::cli {
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
  registry->Register(DrainCommand());
  registry->Register(UndrainCommand());
  registry->Register(EvalCommand());
  registry->Register(FitCommand());
  registry->Register(ReplayCommand());
  registry->Register(ReportCommand());
  registry->Register(BackupCommand());
}

}  // namespace hlab::cli
