// `hlab runs`: list runs with filters, as a table, JSON or CSV.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "runs";

Rows RunRows(const std::vector<v1::Run>& runs) {
  Rows rows;
  rows.columns = {"run_id",
                  "sweep",
                  "architecture",
                  "scale",
                  "seed",
                  "params",
                  "tokens",
                  "tokens_per_param",
                  "state",
                  "progress",
                  "final_loss",
                  "final_val_loss",
                  "final_log_longppl",
                  "predicted_loss",
                  "predicted_loss_lo",
                  "predicted_loss_hi",
                  "predicted_log_longppl",
                  "prediction_generation",
                  "order_rank",
                  "order_score",
                  "order_reason",
                  "error"};
  for (const v1::Run& run : runs) {
    const double progress = run.tokens() > 0
                                ? static_cast<double>(run.tokens_done()) /
                                      static_cast<double>(run.tokens())
                                : 0.0;
    auto optional_double = [](bool has, double v) {
      return has ? Cell::Double(v) : Cell::Null();
    };
    // Live predictions (the last one before a run finished), never
    // measurements: the final_* columns are those.
    const v1::RunPrediction* loss = FindPrediction(run, "loss");
    const v1::RunPrediction* longppl = FindPrediction(run, "longppl");
    const v1::RunPrediction* newest = loss != nullptr ? loss : longppl;
    rows.rows.push_back({
        Cell::Text(run.run_id()),
        Cell::Text(run.sweep_ids_size() > 0 ? run.sweep_ids(0) : ""),
        Cell::Text(run.architecture()),
        Cell::Text(run.scale()),
        Cell::Int(run.seed()),
        Cell::Int(run.non_embedding_params()),
        Cell::Int(run.tokens()),
        // D/N as trained, also for a spec that gave absolute tokens (the
        // proto's tokens_per_param is the spec's ratio, 0 then).
        run.non_embedding_params() > 0
            ? Cell::Double(static_cast<double>(run.tokens()) /
                           static_cast<double>(run.non_embedding_params()))
            : Cell::Null(),
        Cell::Text(RunStateName(run.state())),
        Cell::Double(progress),
        optional_double(run.has_final_loss(), run.final_loss()),
        optional_double(run.has_final_val_loss(), run.final_val_loss()),
        optional_double(run.has_final_log_longppl(), run.final_log_longppl()),
        optional_double(loss != nullptr, loss ? loss->predicted() : 0),
        optional_double(loss != nullptr && loss->has_lower(),
                        loss ? loss->lower() : 0),
        optional_double(loss != nullptr && loss->has_upper(),
                        loss ? loss->upper() : 0),
        optional_double(longppl != nullptr, longppl ? longppl->predicted() : 0),
        newest != nullptr ? Cell::Int(newest->generation()) : Cell::Null(),
        run.order_rank() > 0 ? Cell::Int(run.order_rank()) : Cell::Null(),
        optional_double(run.has_order_score(), run.order_score()),
        run.order_reason().empty() ? Cell::Null()
                                   : Cell::Text(run.order_reason()),
        run.error().empty() ? Cell::Null() : Cell::Text(run.error()),
    });
  }
  return rows;
}

int Run(const std::vector<std::string>& argv, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, WithConnectionFlags({{"sweep", true},
                                           {"state", true},
                                           {"arch", true},
                                           {"scale", true},
                                           {"format", true}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (!args->positional().empty()) {
    return UsageError(err, kName,
                      "unexpected argument '" + args->positional()[0] +
                          "' (filters are flags: --sweep, --state, ...)");
  }
  absl::StatusOr<OutputFormat> format =
      ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return UsageError(err, kName, format.status().message());
  v1::ListRunsRequest request;
  request.set_sweep(args->Get("sweep"));
  request.set_architecture(args->Get("arch"));
  request.set_scale(args->Get("scale"));
  for (const std::string& list : args->GetAll("state")) {
    for (absl::string_view s : absl::StrSplit(list, ',', absl::SkipEmpty())) {
      absl::StatusOr<v1::RunState> state = ParseRunState(s);
      if (!state.ok()) return UsageError(err, kName, state.status().message());
      request.add_states(*state);
    }
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, kName, client.status());
  std::vector<v1::Run> runs;
  grpc::Status s = ListAllRuns(**client, request, &runs);
  if (!s.ok()) {
    return Failure(err, kName, (*client)->ErrorMessage(s, "read runs"));
  }
  WriteRows(RunRows(runs), *format, out);
  return kExitOk;
}

}  // namespace

Command RunsCommand() {
  Command c;
  c.name = kName;
  c.summary = "list runs (filters: sweep, state, architecture, scale)";
  c.usage =
      "usage: hlab runs [--sweep SWEEP] [--state S[,S...]] [--arch A]\n"
      "                 [--scale S] [--format table|json|csv]\n\n"
      "Lists runs, one row each: run_id, sweep, architecture, scale, seed,\n"
      "params (non-embedding N), tokens (D), tokens_per_param (D/N),\n"
      "state, progress (fraction of D trained), final_loss, final_val_loss,\n"
      "final_log_longppl, then the live prediction of its sweep's law\n"
      "(docs/coordinator.md, \"Live predictions\"): predicted_loss with its\n"
      "95% interval predicted_loss_lo and _hi, predicted_log_longppl and\n"
      "the prediction_generation (for a finished run: the last prediction\n"
      "before it finished, to read against final_val_loss); in a sweep with\n"
      "schedule_policy: adaptive (docs/sweeps.md, \"Adaptive order\"), a\n"
      "pending run's order_rank (1: trained next), order_score (expected\n"
      "variance reduction in the target region per PFLOP; empty while the\n"
      "laws are seeded) and order_reason; and error.\n"
      "Filters combine with AND; --state takes\n"
      "pending, running, succeeded, failed, cancelled, predicted (stopped\n"
      "early, not trained: its final figures are empty and only predicted)\n"
      "(repeat it or give a comma-separated list).\n"
      "Connection: --address, --token, --token-file, --tls-ca, --tls-cert,\n"
      "--tls-key, --timeout (see docs/cli.md).";
  c.run = Run;
  return c;
}

}  // namespace hlab::cli
