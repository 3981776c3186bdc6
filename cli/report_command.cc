// `hlab report`: a sweep's report directory (report/study_report.h) from a
// database file (`--db FILE`, read-only) or from a coordinator through its
// Query RPC (the connection flags). Both go through report::RowSource, so
// the report is the same.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "proto/grpc_status.h"
#include "report/row_source.h"
#include "report/study_data.h"
#include "report/study_report.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "report";

// The coordinator's Query RPC as a RowSource. Not thread-safe (one caller).
class CoordinatorRowSource final : public report::RowSource {
 public:
  explicit CoordinatorRowSource(std::unique_ptr<Client> client)
      : client_(std::move(client)) {}

  absl::StatusOr<store::QueryResult> Query(const std::string& sql) override {
    v1::QueryRequest request;
    request.set_sql(sql);
    request.set_max_rows(1000000);
    request.set_timeout_ms(
        static_cast<int32_t>(client_->options().timeout_seconds * 1000));
    v1::QueryResponse response;
    grpc::Status s =
        client_->Call(&v1::ClientService::Stub::Query, request, &response);
    if (!s.ok()) {
      return absl::Status(FromGrpcCode(s.error_code()),
                          client_->ErrorMessage(s, "run queries"));
    }
    if (response.truncated()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the coordinator cut a result at ", response.rows_size(), " rows"));
    }
    store::QueryResult result;
    result.columns.assign(response.columns().begin(), response.columns().end());
    for (const v1::QueryRow& row : response.rows()) {
      std::vector<store::Value>& values = result.rows.emplace_back();
      for (const v1::QueryValue& v : row.values()) {
        switch (v.value_case()) {
          case v1::QueryValue::kIntValue:
            values.emplace_back(v.int_value());
            break;
          case v1::QueryValue::kDoubleValue:
            values.emplace_back(v.double_value());
            break;
          case v1::QueryValue::kTextValue:
            values.emplace_back(v.text_value());
            break;
          case v1::QueryValue::kBlobValue:
            values.emplace_back(store::Blob{v.blob_value()});
            break;
          default:
            values.emplace_back(std::monostate());
        }
      }
    }
    return result;
  }

  std::string Describe() const override {
    return "the coordinator at " + client_->options().address;
  }

 private:
  std::unique_ptr<Client> client_;
};

int Run(const std::vector<std::string>& argv, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, WithConnectionFlags({{"db", true},
                                           {"sweep", true},
                                           {"out", true},
                                           {"bootstrap", true},
                                           {"threads", true},
                                           {"seed", true},
                                           {"gnuplot", true}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (!args->positional().empty()) {
    return UsageError(err, kName,
                      "unexpected argument '" + args->positional()[0] +
                          "'; name the sweep with --sweep ID");
  }
  const std::string out_dir = args->Get("out");
  if (out_dir.empty()) {
    return UsageError(err, kName,
                      "--out DIR is required (the report directory)");
  }
  report::StudyOptions study_options;
  for (const char* flag : {"bootstrap", "threads", "seed"}) {
    if (!args->Has(flag)) continue;
    absl::StatusOr<long long> n = ParseCount(flag, args->Get(flag));
    if (!n.ok()) return UsageError(err, kName, n.status().message());
    const std::string name = flag;
    if (name == "bootstrap") study_options.bootstrap = static_cast<int>(*n);
    if (name == "threads") study_options.threads = static_cast<int>(*n);
    if (name == "seed") study_options.seed = static_cast<uint64_t>(*n);
  }
  // Before reading and maybe fitting (minutes), so a bad --out fails fast.
  // A directory made here is removed again (when still empty) if the report
  // fails before writing into it, e.g. for an unknown sweep.
  std::error_code exists_error;
  const bool out_existed = std::filesystem::exists(out_dir, exists_error);
  auto forget_out_dir = [&] {
    std::error_code ec;
    if (!out_existed) std::filesystem::remove(out_dir, ec);  // only if empty
  };
  if (absl::Status ready = report::PrepareReportDirectory(out_dir);
      !ready.ok()) {
    return Failure(err, kName, ready.message());
  }
  std::unique_ptr<report::RowSource> source;
  if (args->Has("db")) {
    auto db = report::DatabaseRowSource::Open(args->Get("db"));
    if (!db.ok()) {
      forget_out_dir();
      return Failure(err, kName, db.status().message());
    }
    source = *std::move(db);
  } else {
    if (!args->Has("sweep")) {
      forget_out_dir();
      return UsageError(err, kName,
                        "name the sweep with --sweep ID (or read a database "
                        "file with --db FILE)");
    }
    absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
    if (!client.ok()) {
      forget_out_dir();
      return ConnectionFailure(err, kName, client.status());
    }
    source = std::make_unique<CoordinatorRowSource>(*std::move(client));
  }
  absl::StatusOr<report::StudyData> study =
      report::ReadStudyData(*source, args->Get("sweep"), study_options);
  if (!study.ok()) {
    forget_out_dir();
    return Failure(err, kName, study.status().message());
  }
  report::StudyReportOptions options;
  options.plot.gnuplot = args->Get("gnuplot", "gnuplot");
  absl::StatusOr<report::StudyReport> written =
      report::WriteStudyReport(*study, out_dir, options);
  if (!written.ok()) return Failure(err, kName, written.status().message());

  for (const std::string& note : study->notes) {
    out << "hlab report: note: " << note << "\n";
  }
  for (const std::string& line : report::LawLines(*study)) {
    out << "  " << line << "\n";
  }
  const int drawn = static_cast<int>(
      std::count_if(written->plots.begin(), written->plots.end(),
                    [](const report::Plot& p) { return p.svg; }));
  out << "hlab report: " << study->runs.size() << " runs, "
      << study->fits.size() << " fits, " << drawn
      << " figures: " << written->index_html << "\n";
  if (!written->plot_status.ok()) {
    return Failure(err, kName, written->plot_status.message());
  }
  return kExitOk;
}

}  // namespace

Command ReportCommand() {
  Command c;
  c.name = kName;
  c.summary = "write a sweep's report: tables, figures, index.html";
  c.usage =
      "usage: hlab report --db FILE.db [--sweep S] --out DIR\n"
      "       hlab report --sweep S --out DIR [connection flags]\n"
      "       [--bootstrap K] [--threads T] [--seed S] [--gnuplot PATH]\n\n"
      "Writes the report of sweep S (id or name; with --db it may be left "
      "out when\n"
      "the file holds one sweep) into DIR: index.html (everything on one "
      "page),\n"
      "report.md, runs.csv (one row per run), fits.csv (one row per "
      "architecture\n"
      "and target, with bootstrap CIs), and figures drawn by gnuplot: loss "
      "and\n"
      "log(LongPPL) against tokens with the fitted L(N, D), observed against\n"
      "predicted, and residuals (<name>.gp scripts over data/*.dat, "
      "<name>.svg,\n"
      "<name>.png). With --db the database file is opened read-only; "
      "otherwise\n"
      "the rows come from the coordinator's Query RPC. Fits come from the "
      "fits\n"
      "table; with --db, when none is stored they are computed as `hlab fit "
      "--db`\n"
      "does (--bootstrap K resamples, default 200). Needs gnuplot "
      "(gnuplot-nox):\n"
      "without it the tables are written and the command fails saying so.\n";
  c.run = Run;
  return c;
}

}  // namespace hlab::cli
