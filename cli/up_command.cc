// `hlab up`: the embedded default. Starts a coordinator and local workers
// on loopback (cli/local_cluster.h), submits a sweep (default: the embedded
// examples/sweeps/demo.yaml), shows its progress, then prints the runs, the
// fitted laws, how to query the results, and writes the sweep's report
// (`hlab report`) into DIR/report.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/cli.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/local_cluster.h"
#include "coordinator/sweep/embedded_demo.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "up";

int UpUsage(std::ostream& err, const std::string& message) {
  err << "hlab up: " << message << " (see hlab help up)\n";
  return kExitUsage;
}

// The coordinator fits a finished sweep by itself (a "fits" event, rows in
// fit_summary): waits for it (at most 2 minutes), then shows the laws, or
// says how to fit by hand.
void ShowFits(const std::string& address, const std::string& sweep_id,
              const std::string& dir, std::ostream& out, std::ostream& err) {
  out << "\nwaiting for the coordinator's fits of L(N, D) = E + A/N^alpha + "
         "B/D^beta ...\n";
  out.flush();
  const std::string fits_done =
      "SELECT count(*) AS n FROM events WHERE kind = 'fits' AND sweep_id = " +
      sweep_id;
  bool fitted = false;
  for (int i = 0; i < 240 && !fitted; ++i) {
    std::ostringstream count, ignored;
    RunCli({"query", fits_done, "--format", "csv", "--address", address}, count,
           ignored);
    fitted = count.str().find("\n1") != std::string::npos;
    if (!fitted) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (fitted) {
    // The fitter's summary as plain lines (it spans several).
    std::ostringstream message;
    RunCli({"query",
            "SELECT message FROM events WHERE kind = 'fits' AND sweep_id = " +
                sweep_id,
            "--format", "json", "--address", address},
           message, err);
    const nlohmann::json rows =
        nlohmann::json::parse(message.str(), nullptr, false);
    if (rows.is_array()) {
      for (const nlohmann::json& row : rows) {
        if (row.is_object() && row.contains("message") &&
            row["message"].is_string()) {
          out << row["message"].get<std::string>() << "\n";
        }
      }
    }
    RunCli({"query",
            "SELECT arch, target, round(e, 4) AS E, round(a, 2) AS A, "
            "round(alpha, 4) AS alpha, round(b, 2) AS B, round(beta, 4) AS "
            "beta, round(r2_fit, 4) AS r2_fit, round(r2_verify, 4) AS "
            "r2_verify, n_points FROM fit_summary WHERE sweep_id = " +
                sweep_id + " ORDER BY arch, target",
            "--address", address},
           out, err);
    out << "(details and confidence intervals: hlab fit --db " << dir
        << "/hlab.db --sweep " << sweep_id << ")\n";
  } else {
    out << "the fits are not ready after 2 minutes; see " << dir
        << "/logs/coordinator.log, or run: hlab fit --db " << dir
        << "/hlab.db --sweep " << sweep_id << "\n";
  }
}

int RunUp(const std::vector<std::string>& raw, std::ostream& out,
          std::ostream& err) {
  auto args = ParseArgs(raw, {{"workers", true},
                              {"capacity", true},
                              {"dir", true},
                              {"keep-running", false},
                              {"metrics-listen", true}});
  if (!args.ok()) return UpUsage(err, std::string(args.status().message()));
  if (args->positional().size() > 1)
    return UpUsage(err, "give at most one SPEC");
  int workers = 2;
  if (args->Has("workers") &&
      (!absl::SimpleAtoi(args->Get("workers"), &workers) || workers < 1)) {
    return UpUsage(err, "--workers must be a positive integer");
  }
  int capacity = 1;
  if (args->Has("capacity") &&
      (!absl::SimpleAtoi(args->Get("capacity"), &capacity) || capacity < 1)) {
    return UpUsage(err, "--capacity must be a positive integer");
  }
  LocalClusterOptions options;
  options.dir = args->Get("dir", "hlab-up");
  options.workers = workers;
  options.worker_capacity = capacity;
  options.metrics_listen = args->Get("metrics-listen", "none");

  LocalCluster cluster(options);
  if (absl::Status s = cluster.Start(); !s.ok()) {
    err << "hlab up: " << s.message() << "\n";
    return kExitFailed;
  }
  cluster.InstallStopOnSignal();
  std::string spec = args->positional().empty() ? "" : args->positional()[0];
  if (spec.empty()) {
    spec = options.dir + "/demo.yaml";
    std::ofstream(spec) << std::string(hlab::sweep::EmbeddedDemoSpec());
  }
  const std::string address = cluster.address();
  out << "hlab up: coordinator at " << address << ", " << workers
      << " local workers, database " << options.dir << "/hlab.db, logs in "
      << options.dir << "/logs\n";

  std::ostringstream submitted;
  if (RunCli({"submit", spec, "--address", address, "--json"}, submitted,
             err) != kExitOk) {
    return kExitFailed;
  }
  const nlohmann::json response =
      nlohmann::json::parse(submitted.str(), nullptr, false);
  const std::string sweep_id =
      response.is_discarded() ? "" : response["sweep"].value("sweep_id", "");
  if (sweep_id.empty()) {
    err << "hlab up: the coordinator's answer to the submission has no sweep "
           "id; see "
        << options.dir << "/logs/coordinator.log\n";
    return kExitFailed;
  }
  out << "hlab up: sweep " << sweep_id << " ("
      << (response.contains("runs") ? response["runs"].size() : 0) << " runs) "
      << (response.value("created", false)
              ? "submitted"
              : "was already in this database (nothing is trained twice)")
      << " from " << spec << "\n";

  // A sweep found already there is followed from its newest event: its
  // history (thousands of lines for a large sweep) is not replayed; the
  // view starts from the runs' stored state.
  std::vector<std::string> watch = {"watch", sweep_id, "--address", address};
  if (!response.value("created", false)) {
    std::ostringstream newest;
    if (RunCli({"query",
                absl::StrCat("SELECT coalesce(max(seq), 0) AS seq FROM events "
                             "WHERE sweep_id = ",
                             sweep_id),
                "--address", address, "--format", "csv"},
               newest, err) == kExitOk) {
      const std::vector<std::string> lines =
          absl::StrSplit(newest.str(), '\n', absl::SkipEmpty());
      int64_t seq = 0;
      if (lines.size() == 2 && absl::SimpleAtoi(lines[1], &seq) && seq > 0) {
        out << "hlab up: following sweep " << sweep_id << " from event #" << seq
            << " (its history: hlab watch " << sweep_id
            << " --from 0 --address " << address << ")\n";
        watch.push_back("--from");
        watch.push_back(std::to_string(seq));
      }
    }
  }

  // The watch runs on a thread of its own; this thread, which started the
  // daemons (their parent-death signal is tied to it), restarts any that
  // exit meanwhile. Both write to the terminal's streams: std::cout and
  // std::cerr are synchronized, and the notes are rare.
  std::atomic<bool> watch_done{false};
  int watched = kExitFailed;
  std::thread watcher([&] {
    watched = RunCli(watch, out, err);
    watch_done.store(true);
  });
  while (!watch_done.load()) {
    for (const std::string& line : cluster.RestartExited()) {
      err << "hlab up: " << line << "\n";
      err.flush();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  watcher.join();
  out << "\n";
  RunCli({"runs", "--sweep", sweep_id, "--address", address}, out, err);
  // What the workers' hlab-eval measured (the newest step of each run).
  out << "\nevaluations (hlab-eval; details: hlab query 'SELECT * FROM "
         "evals'):\n";
  auto newest = [&](const char* metric) {
    return absl::StrCat(
        "(SELECT round(e.value, 4) FROM evals e WHERE "
        "e.run_id = r.id AND e.metric = '",
        metric, "' ORDER BY e.step DESC LIMIT 1) AS ", metric);
  };
  RunCli(
      {"query",
       absl::StrCat("SELECT r.arch, r.scale, r.budget_tokens AS tokens, ",
                    newest("val_loss"), ", ", newest("log_longppl"), ", ",
                    newest("niah_acc"),
                    " FROM runs r JOIN sweep_runs sr ON sr.run_id = r.id "
                    "WHERE sr.sweep_id = ",
                    sweep_id, " ORDER BY r.arch, r.n_params, r.budget_tokens"),
       "--address", address},
      out, err);
  ShowFits(address, sweep_id, options.dir, out, err);
  out << "\nthe results are in " << options.dir << "/hlab.db:\n"
      << "  sqlite3 " << options.dir << "/hlab.db 'SELECT * FROM run_summary'\n"
      << "  hlab up --keep-running, then: hlab query --address " << address
      << " 'SELECT * FROM run_summary'\n";
  // The report (tables, figures, index.html) from the database, read-only;
  // it computes the fits itself when the coordinator's are not stored yet.
  const std::string report_dir = options.dir + "/report";
  out << "\nthe report of sweep " << sweep_id << " (hlab report --db "
      << options.dir << "/hlab.db --sweep " << sweep_id << " --out "
      << report_dir << "):\n";
  out.flush();
  if (RunCli({"report", "--db", options.dir + "/hlab.db", "--sweep", sweep_id,
              "--out", report_dir},
             out, err) == kExitOk) {
    out << "open " << report_dir << "/index.html in a browser\n";
  }
  if (args->Has("keep-running")) {
    out << "hlab up: coordinator still at " << address
        << "; Ctrl-C stops it and the workers\n";
    out.flush();
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    int signal = 0;
    sigwait(&set, &signal);
  }
  cluster.Stop();
  return watched;
}

}  // namespace

Command UpCommand() {
  Command c;
  c.name = kName;
  c.summary = "start a local coordinator and workers and run a sweep";
  c.usage =
      "usage: hlab up [SPEC.yaml] [--workers N] [--capacity C] [--dir DIR]\n"
      "               [--keep-running] [--metrics-listen HOST:PORT]\n\n"
      "The embedded default: starts hlab-coordinator on 127.0.0.1 (a free\n"
      "port) with its database in DIR (default ./hlab-up), N local\n"
      "hlab-worker daemons (default 2, C task slots each, default 1; a spec\n"
      "with resources cpu_ranks R needs C >= R), submits SPEC (default:\n"
      "the embedded examples/sweeps/demo.yaml), shows progress, then prints\n"
      "the runs, the fitted laws and how to query the database, and writes\n"
      "the sweep's report (hlab report: tables, figures, index.html) into\n"
      "DIR/report. A daemon that exits while the sweep runs (a crash,\n"
      "kill -9) is restarted, at most 3 times a minute. Ctrl-C stops\n"
      "watching; the sweep can be resumed with `hlab up` on the same DIR.\n";
  c.run = RunUp;
  return c;
}

}  // namespace hlab::cli
