// The table of hlab's commands. Commands with a null `run` are planned and
// answer "not implemented yet" (exit code 2).
#include "cli/cli.h"
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
  registry->Register(Planned(
      "up", "start a local coordinator and workers and run the demo sweep",
      "usage: hlab up [SPEC.yaml]"));
  registry->Register(SubmitCommand());
  registry->Register(Planned("status", "show a sweep's progress",
                             "usage: hlab status [SWEEP]"));
  registry->Register(Planned("watch", "stream a sweep's progress events",
                             "usage: hlab watch SWEEP"));
  registry->Register(Planned("runs", "list runs (filters: sweep, state, ...)",
                             "usage: hlab runs [--sweep S] [--state S]"));
  registry->Register(Planned("query", "run read-only SQL on the results",
                             "usage: hlab query SQL"));
  registry->Register(Planned("resume",
                             "move failed or cancelled runs back to "
                             "pending",
                             "usage: hlab resume SWEEP|RUN"));
  registry->Register(Planned("cancel", "cancel a sweep or a run",
                             "usage: hlab cancel SWEEP|RUN"));
  registry->Register(Planned("workers", "list workers and their devices",
                             "usage: hlab workers"));
  registry->Register(Planned("fit", "fit power laws to a sweep's runs",
                             "usage: hlab fit SWEEP"));
  registry->Register(
      Planned("report", "write a sweep's report", "usage: hlab report SWEEP"));
}

}  // namespace hlab::cli
