// `hlab watch SWEEP`: live progress from the WatchSweep stream, resumed from
// the last sequence number when the stream drops, until the sweep ends or
// the user presses Ctrl-C.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"
#include "cli/progress_view.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "watch";

// Set by SIGINT while `hlab watch` runs.
std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted.store(true); }

bool Interrupted(const WatchOptions& options) {
  return options.interrupted != nullptr && options.interrupted->load();
}

// Sleeps `seconds` in short slices, waking early on an interrupt.
void SleepUnlessInterrupted(double seconds, const WatchOptions& options) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < end && !Interrupted(options)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

grpc::Status LoadSweep(const Client& client, const std::string& sweep,
                       v1::Sweep* out, std::vector<v1::Run>* runs) {
  v1::GetSweepRequest get;
  get.set_sweep(sweep);
  v1::GetSweepResponse got;
  grpc::Status s = client.Call(&v1::ClientService::Stub::GetSweep, get, &got);
  if (!s.ok()) return s;
  *out = got.sweep();
  if (runs == nullptr) return s;
  v1::ListRunsRequest list;
  list.set_sweep(got.sweep().sweep_id());
  return ListAllRuns(client, list, runs);
}

// Draws on a terminal: permanent lines scroll above a block of run lines
// that is redrawn in place.
class Screen {
 public:
  Screen(std::ostream& out, bool terminal, int columns)
      : out_(out), terminal_(terminal), columns_(columns) {}

  void Line(const std::string& line) {
    Clear();
    out_ << line << "\n";
    out_.flush();
  }

  void Block(const std::vector<std::string>& lines, bool force) {
    if (!terminal_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && drawn_ > 0 &&
        now - last_draw_ < std::chrono::milliseconds(100)) {
      return;
    }
    Clear();
    for (const std::string& line : lines) {
      const bool cut =
          columns_ > 1 && line.size() >= static_cast<size_t>(columns_);
      out_ << (cut ? line.substr(0, columns_ - 1) : line) << "\x1b[K\n";
    }
    drawn_ = lines.size();
    last_draw_ = now;
    out_.flush();
  }

 private:
  void Clear() {
    if (!terminal_ || drawn_ == 0) return;
    out_ << "\x1b[" << drawn_ << "F\x1b[J";
    drawn_ = 0;
  }

  std::ostream& out_;
  const bool terminal_;
  const int columns_;
  size_t drawn_ = 0;
  std::chrono::steady_clock::time_point last_draw_;
};

enum class StreamEnd { kFinished, kRetry, kInterrupted, kRefused };

// Reads one WatchSweep stream into the view; `status` gets the stream's end.
StreamEnd ReadStream(const Client& client, const std::string& sweep_id,
                     const WatchOptions& options, ProgressView* view,
                     Screen* screen, int* failures, grpc::Status* status) {
  grpc::ClientContext context;
  client.Prepare(&context, /*with_deadline=*/false);
  v1::WatchSweepRequest request;
  request.set_sweep(sweep_id);
  request.set_after_sequence(view->last_sequence());
  request.set_until_done(true);
  std::atomic<bool> done{false};
  std::thread canceller;
  if (options.interrupted != nullptr) {
    canceller = std::thread([&] {
      while (!done.load()) {
        if (options.interrupted->load()) {
          context.TryCancel();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  std::unique_ptr<grpc::ClientReader<v1::Event>> reader =
      client.stub()->WatchSweep(&context, request);
  v1::Event event;
  while (reader->Read(&event)) {
    if (event.sequence() <= view->last_sequence()) continue;  // replayed
    *failures = 0;
    view->Apply(event);
    if (event.kind() == v1::PREDICTIONS_UPDATED) {
      // A new generation of live predictions: take the runs' new figures.
      std::vector<v1::Run> runs;
      v1::ListRunsRequest list;
      list.set_sweep(sweep_id);
      if (ListAllRuns(client, list, &runs).ok()) view->SetPredictions(runs);
    }
    if (!options.terminal || ProgressView::IsNotable(event)) {
      screen->Line(view->EventLine(event));
    }
    screen->Block(view->Block(), ProgressView::IsNotable(event));
    if (view->finished()) {
      // A SWEEP_FINISHED from before a resume (the stream replays the
      // history) ends nothing: the sweep is running again.
      v1::Sweep now;
      if (LoadSweep(client, sweep_id, &now, nullptr).ok() &&
          now.state() == v1::SWEEP_STATE_RUNNING) {
        view->Reopen();
        continue;
      }
      context.TryCancel();
      break;
    }
  }
  *status = reader->Finish();
  done.store(true);
  if (canceller.joinable()) canceller.join();
  if (view->finished()) return StreamEnd::kFinished;
  if (Interrupted(options)) return StreamEnd::kInterrupted;
  if (!IsRetryableStreamError(*status)) return StreamEnd::kRefused;
  return StreamEnd::kRetry;
}

int Watch(const std::vector<std::string>& argv, std::ostream& out,
          std::ostream& err, const WatchOptions& options) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, WithConnectionFlags({{"from", true}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (args->positional().size() != 1) {
    return UsageError(err, kName, "expected one sweep");
  }
  long long from = 0;
  if (args->Has("from")) {
    absl::StatusOr<long long> n = ParseCount("from", args->Get("from"));
    if (!n.ok()) return UsageError(err, kName, n.status().message());
    from = *n;
  }
  absl::StatusOr<std::unique_ptr<Client>> connected = ClientFromArgs(*args);
  if (!connected.ok()) return ConnectionFailure(err, kName, connected.status());
  const Client& client = **connected;
  v1::Sweep sweep;
  std::vector<v1::Run> runs;
  grpc::Status s = LoadSweep(client, args->positional()[0], &sweep, &runs);
  if (!s.ok())
    return Failure(err, kName, client.ErrorMessage(s, "read sweeps"));
  ProgressView view(sweep, runs);
  if (from > 0) {
    v1::Event skip;
    skip.set_sequence(from);
    view.Apply(skip);
  }
  Screen screen(out, options.terminal, options.columns);
  screen.Block(view.Block(), /*force=*/true);
  int failures = 0;
  double backoff = options.first_backoff_seconds;
  bool finished = false;
  while (!finished) {
    const StreamEnd end = ReadStream(client, sweep.sweep_id(), options, &view,
                                     &screen, &failures, &s);
    if (end == StreamEnd::kFinished) break;
    if (end == StreamEnd::kInterrupted) {
      err << "hlab watch: stopped after event #" << view.last_sequence()
          << "; continue with `hlab watch " << sweep.sweep_id() << " --from "
          << view.last_sequence() << "`\n";
      return kExitOk;
    }
    if (end == StreamEnd::kRefused) {
      return Failure(err, kName, client.ErrorMessage(s, "watch sweeps"));
    }
    if (s.ok()) {
      // The server ended the stream without SWEEP_FINISHED: done if the
      // sweep is no longer running, else reconnect.
      v1::Sweep now;
      grpc::Status g = LoadSweep(client, sweep.sweep_id(), &now, nullptr);
      if (g.ok() && now.state() != v1::SWEEP_STATE_RUNNING) break;
      if (!g.ok()) s = g;
    }
    if (++failures > options.max_reconnects) {
      return Failure(err, kName,
                     absl::StrCat(client.ErrorMessage(s, "watch sweeps"),
                                  " (gave up after ", options.max_reconnects,
                                  " reconnects; continue with `hlab watch ",
                                  sweep.sweep_id(), " --from ",
                                  view.last_sequence(), "`)"));
    }
    err << "hlab watch: the stream dropped ("
        << (s.ok() ? std::string("closed by the server") : s.error_message())
        << "); reconnecting after event #" << view.last_sequence() << "\n";
    SleepUnlessInterrupted(backoff, options);
    backoff = std::min(2 * backoff, 5.0);
    if (Interrupted(options)) {
      err << "hlab watch: stopped after event #" << view.last_sequence()
          << "; continue with `hlab watch " << sweep.sweep_id() << " --from "
          << view.last_sequence() << "`\n";
      return kExitOk;
    }
  }
  screen.Block(view.Block(), /*force=*/true);
  v1::Sweep final_sweep = sweep;
  s = LoadSweep(client, sweep.sweep_id(), &final_sweep, nullptr);
  if (!s.ok()) {
    out << "sweep " << sweep.sweep_id() << " finished\n";
    return kExitOk;
  }
  out << "sweep " << final_sweep.sweep_id()
      << " finished: " << SweepStateName(final_sweep.state()) << " ("
      << final_sweep.runs_succeeded() << "/" << final_sweep.runs_total()
      << " runs succeeded, " << final_sweep.runs_failed() << " failed, "
      << final_sweep.runs_cancelled() << " cancelled"
      << (final_sweep.runs_stopped() > 0
              ? absl::StrCat(", ", final_sweep.runs_stopped(),
                             " predicted (stopped early)")
              : std::string())
      << ")\n";
  if (final_sweep.state() == v1::SWEEP_STATE_SUCCEEDED) return kExitOk;
  err << "hlab watch: sweep " << final_sweep.sweep_id()
      << " did not succeed; see `hlab status " << final_sweep.sweep_id()
      << "`, then `hlab resume " << final_sweep.sweep_id() << "`\n";
  return kExitFailed;
}

int RunFromProcess(const std::vector<std::string>& args, std::ostream& out,
                   std::ostream& err) {
  WatchOptions options;
  const char* term = std::getenv("TERM");
  options.terminal = &out == &std::cout && isatty(STDOUT_FILENO) == 1 &&
                     !(term != nullptr && std::string(term) == "dumb");
  if (options.terminal) {
    winsize size{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0) {
      options.columns = size.ws_col;
    }
  }
  g_interrupted.store(false);
  options.interrupted = &g_interrupted;
  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous);
  const int code = RunWatch(args, out, err, options);
  sigaction(SIGINT, &previous, nullptr);
  return code;
}

}  // namespace

int RunWatch(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err, const WatchOptions& options) {
  return Watch(args, out, err, options);
}

Command WatchCommand() {
  Command c;
  c.name = kName;
  c.summary = "follow a sweep's progress live until it ends";
  c.usage =
      "usage: hlab watch SWEEP [--from SEQ]\n\n"
      "Streams the sweep's events. On a terminal: one line per running run,\n"
      "redrawn in place, with a progress bar of tokens trained over its\n"
      "budget, the loss, the step, an ETA, the final loss its sweep's law\n"
      "predicts and the final train loss its own curve predicts (each with\n"
      "its 95% interval, once the coordinator has one: docs/\n"
      "coordinator.md, \"Live predictions\"); state changes scroll above.\n"
      "Otherwise (a pipe, a log): one line per event, each starting with its\n"
      "time (UTC) and sequence number #N. A dropped stream is resumed after\n"
      "the last event seen; --from SEQ starts after event SEQ. Ends when the\n"
      "sweep ends: exit code 0 if it succeeded, 1 if it ended incomplete or\n"
      "cancelled. Ctrl-C stops watching (exit code 0; the sweep goes on).";
  c.run = RunFromProcess;
  return c;
}

}  // namespace hlab::cli
