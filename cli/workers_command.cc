// `hlab workers`: workers and their devices.
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "workers";

// "2x cuda (NVIDIA H100 80GB HBM3), cpu 16 cores".
std::string DeviceSummary(const v1::Worker& worker) {
  std::map<std::string, int> gpus;
  std::vector<std::string> parts;
  for (const v1::Device& d : worker.devices()) {
    if (d.kind() == "cpu") {
      parts.push_back(absl::StrCat("cpu ", d.cores(), " cores"));
    } else {
      ++gpus[absl::StrCat(d.kind(), " (", d.name(), ")")];
    }
  }
  for (const auto& [name, count] : gpus) {
    parts.insert(parts.begin(), absl::StrCat(count, "x ", name));
  }
  return absl::StrJoin(parts, ", ");
}

int Run(const std::vector<std::string>& argv, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, WithConnectionFlags({{"format", true}, {"all", false}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (!args->positional().empty()) {
    return UsageError(err, kName,
                      "unexpected argument '" + args->positional()[0] + "'");
  }
  absl::StatusOr<OutputFormat> format =
      ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return UsageError(err, kName, format.status().message());
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, kName, client.status());
  v1::ListWorkersRequest request;
  request.set_include_lost(args->Has("all"));
  v1::ListWorkersResponse response;
  grpc::Status s = (*client)->Call(&v1::ClientService::Stub::ListWorkers,
                                   request, &response);
  if (!s.ok()) {
    return Failure(err, kName, (*client)->ErrorMessage(s, "list workers"));
  }
  Rows rows;
  rows.columns = {"worker_id",
                  "hostname",
                  "state",
                  "devices",
                  "tasks",
                  "version",
                  "last_heartbeat_unix_ms"};
  for (const v1::Worker& w : response.workers()) {
    rows.rows.push_back({Cell::Text(w.worker_id()), Cell::Text(w.hostname()),
                         Cell::Text(WorkerStateName(w.state())),
                         Cell::Text(DeviceSummary(w)),
                         Cell::Int(w.task_ids_size()), Cell::Text(w.version()),
                         Cell::Int(w.last_heartbeat_unix_ms())});
  }
  WriteRows(rows, *format, out);
  return kExitOk;
}

}  // namespace

Command WorkersCommand() {
  Command c;
  c.name = kName;
  c.summary = "list workers and their devices";
  c.usage =
      "usage: hlab workers [--all] [--format table|json|csv]\n\n"
      "Lists registered workers: id, host, state (alive, draining: see\n"
      "`hlab drain`; lost with --all), devices, tasks held, the build it\n"
      "runs (version), last heartbeat (Unix ms).";
  c.run = Run;
  return c;
}

}  // namespace hlab::cli
