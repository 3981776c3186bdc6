// `hlab status [SWEEP]`: one sweep's state, runs by phase and progress; or,
// without SWEEP, one line per sweep that has runs.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "status";
// How many of an adaptive sweep's next runs the status lists.
constexpr size_t kNextShown = 3;

grpc::Status ListSweepRuns(const Client& client, const std::string& sweep,
                           std::vector<v1::Run>* runs) {
  v1::ListRunsRequest request;
  request.set_sweep(sweep);
  return ListAllRuns(client, request, runs);
}

double Percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

bool IsActive(v1::RunPhase phase) {
  return phase == v1::RUN_PHASE_TRUNK || phase == v1::RUN_PHASE_TRAINING ||
         phase == v1::RUN_PHASE_DECAYING || phase == v1::RUN_PHASE_EVALUATING;
}

void PrintSweep(const v1::Sweep& sweep, const std::vector<v1::Run>& runs,
                std::ostream& out) {
  out << "sweep " << sweep.sweep_id() << " \"" << sweep.name()
      << "\": " << SweepStateName(sweep.state()) << "\n";
  out << "runs: " << sweep.runs_total() << " total, " << sweep.runs_succeeded()
      << " succeeded, " << sweep.runs_on_trunk() << " on trunk, "
      << sweep.runs_training() << " training, " << sweep.runs_decaying()
      << " decaying, " << sweep.runs_evaluating() << " evaluating, "
      << sweep.runs_waiting() << " waiting, " << sweep.runs_failed()
      << " failed, " << sweep.runs_cancelled() << " cancelled";
  // Early stop: runs not trained, their final figures only predicted.
  if (sweep.runs_stopped() > 0) {
    out << ", " << sweep.runs_stopped() << " predicted (stopped early)";
  }
  out << "\n";
  double tokens = 0;
  double done = 0;
  for (const v1::Run& run : runs) {
    tokens += static_cast<double>(run.tokens());
    done += static_cast<double>(std::min(run.tokens_done(), run.tokens()));
  }
  out << absl::StrFormat(
      "progress: %.1f%% of tokens (%s of %s), %.1f%% of FLOPs (%s of %s)\n",
      Percent(done, tokens), HumanCount(done), HumanCount(tokens),
      Percent(sweep.flops_done(), sweep.flops_planned()),
      HumanCount(sweep.flops_done()), HumanCount(sweep.flops_planned()));
  // Live predictions: the generation, and how many unfinished runs it
  // predicts.
  if (sweep.prediction_generation() > 0) {
    const int64_t unfinished = sweep.runs_pending() + sweep.runs_running();
    if (unfinished > 0) {
      out << "predictions: generation " << sweep.prediction_generation() << ", "
          << sweep.runs_predicted() << " of " << unfinished
          << " unfinished runs predicted (hlab runs --sweep "
          << sweep.sweep_id() << ")\n";
    } else {
      // Nothing left to predict: each finished run keeps the last
      // prediction made before it finished.
      out << "predictions: generation " << sweep.prediction_generation()
          << ", no unfinished run; each finished run's last, beside what it "
             "measured: hlab runs --sweep "
          << sweep.sweep_id() << "\n";
    }
  }
  // The adaptive order: the policy and the runs it trains next, with why.
  if (sweep.spec().schedule_policy() == "adaptive") {
    std::vector<const v1::Run*> ranked;
    for (const v1::Run& run : runs) {
      if (run.order_rank() > 0) ranked.push_back(&run);
    }
    std::sort(ranked.begin(), ranked.end(),
              [](const v1::Run* a, const v1::Run* b) {
                return a->order_rank() < b->order_rank();
              });
    out << "order: adaptive, " << ranked.size()
        << " pending runs ranked (hlab runs --sweep " << sweep.sweep_id()
        << ": order_rank)" << (ranked.empty() ? "" : "; next:") << "\n";
    for (size_t i = 0; i < ranked.size() && i < kNextShown; ++i) {
      const v1::Run& run = *ranked[i];
      out << absl::StrFormat(
          "  #%d  %s  %s  %s  %s tokens  %s%s\n", run.order_rank(),
          run.run_id(), run.architecture(), run.scale(),
          HumanCount(static_cast<double>(run.tokens())),
          run.has_order_score()
              ? absl::StrFormat("score %.3g/PFLOP  ", run.order_score())
              : "",
          run.order_reason());
    }
  }
  // The runs with a phase of their own; the tokens of their own budgets (on
  // a shared trunk: the trunk's position up to the run's branch point).
  bool header = false;
  for (const v1::Run& run : runs) {
    if (!IsActive(run.phase())) continue;
    if (!header) out << "active:\n";
    header = true;
    const v1::RunPrediction* predicted = FindPrediction(run, "loss");
    const v1::RunPrediction* curve = FindPrediction(run, "train_loss");
    out << absl::StrFormat(
        "  %s  %s  %s  %-10s  %3.0f%%  %s/%s tokens  step %d%s%s%s\n",
        run.run_id(), run.architecture(), run.scale(),
        RunPhaseName(run.phase()),
        Percent(static_cast<double>(run.tokens_done()),
                static_cast<double>(run.tokens())),
        HumanCount(static_cast<double>(run.tokens_done())),
        HumanCount(static_cast<double>(run.tokens())), run.steps_done(),
        run.has_final_loss() ? absl::StrFormat("  loss %.4f", run.final_loss())
                             : "",
        predicted != nullptr
            ? absl::StrCat("  predicted final ", PredictionText(*predicted))
            : "",
        curve != nullptr ? absl::StrCat("  its curve: final train loss ",
                                        PredictionText(*curve))
                         : "");
  }
  header = false;
  for (const v1::Run& run : runs) {
    if (run.state() != v1::RUN_STATE_FAILED) continue;
    if (!header) out << "failed:\n";
    header = true;
    out << "  " << run.run_id() << "  " << run.architecture() << "  "
        << run.scale() << "  " << run.error() << "\n";
  }
  if (sweep.state() == v1::SWEEP_STATE_RUNNING) {
    out << "next: hlab watch " << sweep.sweep_id() << "\n";
  } else if (sweep.runs_failed() + sweep.runs_cancelled() > 0) {
    out << "next: hlab resume " << sweep.sweep_id() << "\n";
  } else if (sweep.state() == v1::SWEEP_STATE_SUCCEEDED) {
    out << "next: hlab runs --sweep " << sweep.sweep_id() << "\n";
  }
}

int Run(const std::vector<std::string>& argv, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, WithConnectionFlags({{"json", false}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (args->positional().size() > 1) {
    return UsageError(err, kName, "expected at most one sweep");
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, kName, client.status());
  const Client& c = **client;
  if (args->positional().size() == 1) {
    v1::GetSweepRequest request;
    request.set_sweep(args->positional()[0]);
    v1::GetSweepResponse response;
    grpc::Status s =
        c.Call(&v1::ClientService::Stub::GetSweep, request, &response);
    if (!s.ok()) return Failure(err, kName, c.ErrorMessage(s, "read sweeps"));
    std::vector<v1::Run> runs;
    s = ListSweepRuns(c, response.sweep().sweep_id(), &runs);
    if (!s.ok()) return Failure(err, kName, c.ErrorMessage(s, "read runs"));
    if (args->Has("json")) {
      if (!WriteProtoJson(response, out)) {
        return Failure(err, kName, "cannot print the sweep as JSON");
      }
      return kExitOk;
    }
    PrintSweep(response.sweep(), runs, out);
    return kExitOk;
  }
  // Every sweep that has runs, in the order the server lists them.
  std::vector<v1::Run> runs;
  grpc::Status s = ListSweepRuns(c, "", &runs);
  if (!s.ok()) return Failure(err, kName, c.ErrorMessage(s, "read runs"));
  std::vector<std::string> sweep_ids;
  for (const v1::Run& run : runs) {
    for (const std::string& id : run.sweep_ids()) {
      if (std::find(sweep_ids.begin(), sweep_ids.end(), id) ==
          sweep_ids.end()) {
        sweep_ids.push_back(id);
      }
    }
  }
  if (sweep_ids.empty()) {
    out << "no sweeps yet; submit one with `hlab submit SPEC.yaml`\n";
    return kExitOk;
  }
  Rows rows;
  rows.columns = {"sweep_id",   "name",      "state",     "runs",
                  "succeeded",  "on_trunk",  "training",  "decaying",
                  "evaluating", "waiting",   "failed",    "cancelled",
                  "stopped",    "predicted", "generation"};
  for (const std::string& id : sweep_ids) {
    v1::GetSweepRequest request;
    request.set_sweep(id);
    v1::GetSweepResponse response;
    s = c.Call(&v1::ClientService::Stub::GetSweep, request, &response);
    if (!s.ok()) return Failure(err, kName, c.ErrorMessage(s, "read sweeps"));
    const v1::Sweep& w = response.sweep();
    rows.rows.push_back(
        {Cell::Text(w.sweep_id()), Cell::Text(w.name()),
         Cell::Text(SweepStateName(w.state())), Cell::Int(w.runs_total()),
         Cell::Int(w.runs_succeeded()), Cell::Int(w.runs_on_trunk()),
         Cell::Int(w.runs_training()), Cell::Int(w.runs_decaying()),
         Cell::Int(w.runs_evaluating()), Cell::Int(w.runs_waiting()),
         Cell::Int(w.runs_failed()), Cell::Int(w.runs_cancelled()),
         Cell::Int(w.runs_stopped()), Cell::Int(w.runs_predicted()),
         w.prediction_generation() > 0 ? Cell::Int(w.prediction_generation())
                                       : Cell::Null()});
  }
  WriteRows(rows, OutputFormat::kTable, out);
  return kExitOk;
}

}  // namespace

Command StatusCommand() {
  Command c;
  c.name = kName;
  c.summary = "show a sweep's progress (or every sweep's state)";
  c.usage =
      "usage: hlab status [SWEEP [--json]]\n\n"
      "With SWEEP (an id, a unique id prefix, or a name: the newest sweep of\n"
      "that name): its state, runs by phase (on a shared trunk, training,\n"
      "decaying, evaluating, waiting) and end state, progress in tokens and\n"
      "FLOPs, the live predictions (their generation and how many\n"
      "unfinished runs they cover), the active runs with the tokens of their\n"
      "own budget, their predicted final loss (the sweep's law) and final\n"
      "train loss (their own curve), the failed runs with their\n"
      "errors, and what to do next; --json prints GetSweepResponse (the\n"
      "stored sweep with its spec and counts) as JSON.\n"
      "Without SWEEP: one line per sweep that has runs, with the number of\n"
      "its unfinished runs predicted and the prediction generation.";
  c.run = Run;
  return c;
}

}  // namespace hlab::cli
