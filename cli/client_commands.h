// The commands of `hlab` declared here: those that talk to a coordinator
// (status, watch, runs, query, resume, cancel, workers, drain, undrain,
// eval), `hlab fit` and `hlab report` (a coordinator or a database file),
// `hlab backup` (a database file) and `hlab up` (a local coordinator and
// workers, then a sweep), `hlab replay` (a database file or a report's
// runs.csv). `hlab submit` is submit_command.h. Each is one file,
// cli/<name>_command.cc (resume and cancel: cancel_resume_commands.cc;
// drain and undrain: drain_commands.cc);
// RegisterBuiltinCommands (commands.cc) lists them.
// Every client command takes the connection flags of cli/client.h, prints
// its result to `out`, and a failure as one line on `err` (exit code 1).
//
// Thread-safe (no shared state), except that `hlab watch` installs a SIGINT
// handler while it runs.
//
//   registry->Register(RunsCommand());
//   int code = RunCli({"runs", "--sweep", "demo", "--format", "csv"}, out,
//                     err);
#ifndef HLAB_CLI_CLIENT_COMMANDS_H_
#define HLAB_CLI_CLIENT_COMMANDS_H_

#include <atomic>
#include <ostream>
#include <string>
#include <vector>

#include "cli/cli.h"

namespace hlab::cli {

Command StatusCommand();
Command WatchCommand();
Command RunsCommand();
Command QueryCommand();
Command ResumeCommand();
Command CancelCommand();
Command WorkersCommand();
Command DrainCommand();
Command UndrainCommand();
Command FitCommand();
Command ReplayCommand();
Command ReportCommand();
Command EvalCommand();
Command UpCommand();
Command BackupCommand();

// How `hlab watch` draws and reconnects; the command fills it from the
// process (is stdout a terminal, SIGINT), tests set it directly.
struct WatchOptions {
  // Redraw one line per active run in place (ANSI escapes) instead of
  // printing one line per event.
  bool terminal = false;
  // Terminal width: redrawn lines are cut to it so none wraps (a wrapped
  // line would break the redraw). 0: no limit.
  int columns = 0;
  // Set (by a signal handler) to stop watching.
  const std::atomic<bool>* interrupted = nullptr;
  // Reconnect attempts in a row without a new event before giving up, and
  // the first wait between them (doubling up to 5 s).
  int max_reconnects = 10;
  double first_backoff_seconds = 0.2;
};

int RunWatch(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err, const WatchOptions& options);

}  // namespace hlab::cli

#endif  // HLAB_CLI_CLIENT_COMMANDS_H_
