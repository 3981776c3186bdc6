// `hlab query`: one read-only SQL statement on the coordinator's store.
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "query";

int Run(const std::vector<std::string>& argv, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(
      argv, WithConnectionFlags({{"format", true}, {"max-rows", true}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (args->positional().size() != 1) {
    return UsageError(err, kName,
                      "expected one SQL statement in quotes, e.g. hlab query "
                      "\"SELECT * FROM runs LIMIT 5\"");
  }
  absl::StatusOr<OutputFormat> format =
      ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return UsageError(err, kName, format.status().message());
  v1::QueryRequest request;
  request.set_sql(args->positional()[0]);
  if (args->Has("max-rows")) {
    absl::StatusOr<long long> n = ParseCount("max-rows", args->Get("max-rows"));
    if (!n.ok()) return UsageError(err, kName, n.status().message());
    request.set_max_rows(
        static_cast<int32_t>(std::min<long long>(*n, 1 << 30)));
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, kName, client.status());
  // The server's own time limit applies; the call deadline covers it.
  request.set_timeout_ms(
      static_cast<int32_t>((*client)->options().timeout_seconds * 1000));
  v1::QueryResponse response;
  grpc::Status s =
      (*client)->Call(&v1::ClientService::Stub::Query, request, &response);
  if (!s.ok()) {
    return Failure(err, kName, (*client)->ErrorMessage(s, "run queries"));
  }
  Rows rows;
  rows.columns.assign(response.columns().begin(), response.columns().end());
  for (const v1::QueryRow& row : response.rows()) {
    std::vector<Cell>& cells = rows.rows.emplace_back();
    for (const v1::QueryValue& v : row.values()) cells.push_back(QueryCell(v));
  }
  WriteRows(rows, *format, out);
  if (response.truncated()) {
    err << "hlab query: note: the result was cut at " << response.rows_size()
        << " rows; add a LIMIT or raise --max-rows\n";
  }
  return kExitOk;
}

}  // namespace

Command QueryCommand() {
  Command c;
  c.name = kName;
  c.summary = "run read-only SQL on the results";
  c.usage =
      "usage: hlab query \"SQL\" [--format table|json|csv] [--max-rows N]\n\n"
      "Runs one read-only SQL statement on the coordinator's store (the\n"
      "server refuses writes) and prints the rows. The server cuts results\n"
      "at --max-rows (default 10000) and says so on stderr. The call's\n"
      "--timeout (default 30 s) is also the query's time limit.\n"
      "Example: hlab query \"SELECT arch, scale, n_params, final_val_loss\n"
      "FROM run_summary WHERE state = 'SUCCEEDED'\" --format csv\n"
      "(tables and views: docs/store.md).";
  c.run = Run;
  return c;
}

}  // namespace hlab::cli
