// hlab-bench-coordinator: load on a real coordinator from simulated workers
// (no training), in one process, on 127.0.0.1 port 0 with temp databases.
//
//  1. Lease and heartbeat latency p50/p99 with --workers simulated workers
//     (coordinator_fleet.h) heartbeating every --heartbeat-seconds and
//     reporting metric batches, for --seconds, on a generated sweep (the
//     demo spec, one TRAIN task per run, enough seeds to keep them busy).
//  2. Metric points ingested per second end to end (ReportMetrics over gRPC
//     into SQLite, batches of --batch points) against the tasks the workers
//     hold, as a ratio to a raw SQLite insert loop (one prepared statement,
//     one transaction, the same rows, a connection with the store writer's
//     pragmas) measured in the same run; by wall clock and by CPU time (the
//     process during the flood against the loop's thread), which a shared
//     machine's load moves much less. Also the store writes per commit
//     during the flood (how much group commit coalesced).
//  3. Expanding and scheduling the paper's grid (examples/sweeps/paper.yaml):
//     parse + validate + PlanSweep, and SubmitSweep into a fresh coordinator.
//  4. The FLOPs WSD trunk sharing saves on that grid, from the plan.
//
//
// --profile churn measures a fleet as it runs in production instead, with
// the coordinator in a process of its own (a real hlab-coordinator, found
// beside this program or given by --coordinator), so that its CPU time and
// memory are stated apart from the simulator's: 500 workers (--workers),
// each on its own connection, holding tasks of 1-3 minutes, heartbeating
// every 5 s and reporting 100 metric points a second, for 5 minutes. It
// prints lease and heartbeat latency p50/p99 after the start-up (the
// workers' staggered first leases, the first 10 s, reported apart), the
// heartbeats answered later than their interval, the coordinator's CPU
// (cores) and RSS, and the goals (lease p99 < 50 ms, heartbeat p99 < 20 ms).
//
//   build/bin/hlab-bench-coordinator                # 500 workers, 30 s
//   build/bin/hlab-bench-coordinator --quick        # 50 workers, 5 s
//   build/bin/hlab-bench-coordinator --workers 200 --seconds 10 --json
//   build/bin/hlab-bench-coordinator --profile churn [--workers 2000]
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/coordinator_fleet.h"
#include "bench/coordinator_process.h"
#include "common/log.h"
#include "coordinator/server/coordinator.h"
#include "coordinator/store/database.h"
#include "coordinator/store/store.h"
#include "coordinator/sweep/embedded_demo.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/limits.h"
#include "coordinator/sweep/spec_parser.h"
#include "hlab/v1/client_service.grpc.pb.h"

namespace hlab::bench {
namespace {

using Steady = std::chrono::steady_clock;

struct Options {
  FleetOptions fleet;
  double seconds = 30;
  int64_t ingest_points = 2'000'000;
  int ingest_in_flight = 16;
  std::string paper = HLAB_SOURCE_DIR "/examples/sweeps/paper.yaml";
  bool json = false;
  std::string dir;
  bool churn = false;       // --profile churn
  std::string coordinator;  // its hlab-coordinator ("": beside this program)
  std::vector<std::string> coordinator_flags;  // more flags for it
};

double SecondsSince(Steady::time_point start) {
  return std::chrono::duration<double>(Steady::now() - start).count();
}

// CPU seconds (user + system) of the process, or of the calling thread.
double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q *
                                    static_cast<double>(values.size() - 1))];
}

[[noreturn]] void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "hlab-bench-coordinator: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  std::exit(1);
}

std::unique_ptr<coordinator::Coordinator> StartCoordinator(
    const std::string& db_path) {
  coordinator::CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.db_path = db_path;
  options.metrics_listen = "none";
  // The workers do not heartbeat during the ingest flood, which can take
  // longer than the default 30 s lease: expiries would fail its batches.
  options.lease = absl::Minutes(5);
  auto started = coordinator::Coordinator::Start(options);
  if (!started.ok()) Die("start coordinator", started.status());
  return std::move(started).value();
}

// SubmitSweep over gRPC; returns seconds to the response.
double Submit(const std::string& address, const hlab::v1::SweepSpec& spec,
              hlab::v1::SubmitSweepResponse* response) {
  auto stub = hlab::v1::ClientService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  hlab::v1::SubmitSweepRequest request;
  request.set_request_id(absl::StrCat("bench-", spec.name()));
  *request.mutable_spec() = spec;
  grpc::ClientContext context;
  const Steady::time_point start = Steady::now();
  grpc::Status s = stub->SubmitSweep(&context, request, response);
  const double seconds = SecondsSince(start);
  if (!s.ok()) {
    Die("SubmitSweep " + spec.name(),
        absl::InternalError(
            absl::StrCat(s.error_code(), " ", s.error_message())));
  }
  return seconds;
}

// ---------------------------------------------------------------- paper grid

struct PaperResult {
  double load_seconds = 0;  // read + parse (best of repeats)
  double plan_seconds = 0;  // validate + PlanSweep (best of repeats)
  double submit_seconds = 0;
  size_t runs = 0, tasks = 0;
  double flops_shared = 0, flops_unshared = 0;
};

PaperResult MeasurePaper(const Options& o) {
  PaperResult r;
  r.load_seconds = r.plan_seconds = 1e9;
  hlab::v1::SweepSpec spec;
  for (int repeat = 0; repeat < 3; ++repeat) {
    Steady::time_point start = Steady::now();
    auto loaded = sweep::LoadSweepSpec(o.paper);
    if (!loaded.ok()) Die("load " + o.paper, loaded.status());
    r.load_seconds = std::min(r.load_seconds, SecondsSince(start));
    start = Steady::now();
    auto plan = sweep::PlanSweep(*loaded);
    if (!plan.ok()) Die("plan " + o.paper, plan.status());
    r.plan_seconds = std::min(r.plan_seconds, SecondsSince(start));
    r.runs = plan->runs.size();
    r.tasks = plan->tasks.size();
    r.flops_shared = plan->flops_shared;
    r.flops_unshared = plan->flops_unshared;
    spec = *std::move(loaded);
  }
  auto coordinator = StartCoordinator(o.dir + "/paper.db");
  hlab::v1::SubmitSweepResponse response;
  r.submit_seconds = Submit(coordinator->address(), spec, &response);
  coordinator->Shutdown();
  return r;
}

// ------------------------------------------------------------ raw baseline

// Points per second of a raw SQLite loop into the store's schema, on a
// connection with the store's pragmas: one prepared INSERT OR IGNORE, one
// transaction, the rows ReportMetrics stores.
double RawInsertRate(const std::string& path,
                     const std::vector<std::string>& run_ids, int64_t points,
                     int batch, double* cpu_seconds) {
  {
    auto opened = store::Store::Open(path, store::StoreOptions());
    if (!opened.ok()) Die("open " + path, opened.status());
    const absl::Time now = absl::Now();
    store::SweepSpec spec;
    spec.name = spec.spec_hash = "raw";
    spec.spec = "{}";
    auto sweep = (*opened)->CreateSweep(spec, now);
    if (!sweep.ok()) Die("create sweep", sweep.status());
    std::vector<store::RunSpec> runs;
    for (const std::string& id : run_ids) {
      store::RunSpec run;
      run.id = id;
      run.arch = "full";
      run.scale = "S1";
      runs.push_back(run);
    }
    auto added = (*opened)->AddRuns(sweep->sweep_id, runs, now);
    if (!added.ok()) Die("add runs", added.status());
  }
  // A connection opened as the store opens its writer's: the same pragmas
  // (WAL, synchronous=NORMAL, foreign keys, page cache), no mutex.
  auto connection =
      store::Database::Open(path, store::Database::Mode::kReadWrite);
  if (!connection.ok()) Die("raw open", connection.status());
  sqlite3* db = (*connection)->raw();
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT OR IGNORE INTO metrics (run_id, name, step, value,"
                     " tokens, wall_time) VALUES (?, ?, ?, ?, ?, ?)",
                     -1, &stmt, nullptr);
  const std::string name = "train_loss";
  const int64_t batches = std::max<int64_t>(1, points / batch);
  const int64_t tasks = static_cast<int64_t>(run_ids.size());
  const double wall = static_cast<double>(absl::ToUnixMillis(absl::Now()));
  const Steady::time_point start = Steady::now();
  const double cpu_start = CpuSeconds(RUSAGE_THREAD);
  sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
  for (int64_t b = 0; b < batches; ++b) {
    const std::string& run = run_ids[static_cast<size_t>(b % tasks)];
    for (int i = 0; i < batch; ++i) {
      const int64_t step = (b / tasks) * batch + i;
      sqlite3_bind_text(stmt, 1, run.data(), static_cast<int>(run.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_text(stmt, 2, name.data(), static_cast<int>(name.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_int64(stmt, 3, step);
      sqlite3_bind_double(stmt, 4, 10.0 / static_cast<double>(step + 1));
      sqlite3_bind_int64(stmt, 5, step * 1024);
      sqlite3_bind_double(stmt, 6, wall / 1e3);
      if (sqlite3_step(stmt) != SQLITE_DONE) {
        Die("raw insert", absl::InternalError(sqlite3_errmsg(db)));
      }
      sqlite3_reset(stmt);
    }
  }
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  const double seconds = SecondsSince(start);
  *cpu_seconds = CpuSeconds(RUSAGE_THREAD) - cpu_start;
  sqlite3_finalize(stmt);
  connection->reset();
  return static_cast<double>(batches * batch) / seconds;
}

// ---------------------------------------------------------------- load run

// The demo spec with one TRAIN task per run (no trunks, no evaluations,
// no fits) and enough seeds that every worker finds a task for the whole
// run (with room to spare): as many sweeps as the seeds need, each with at
// most sweep::kMaxSeeds of them.
std::vector<hlab::v1::SweepSpec> LoadSpecs(const Options& o, size_t* runs_out) {
  auto parsed = sweep::ParseSweepSpec(sweep::EmbeddedDemoSpec());
  if (!parsed.ok()) Die("demo spec", parsed.status());
  hlab::v1::SweepSpec spec = *std::move(parsed);
  spec.set_share_trunk(false);
  // TRAIN tasks only: an EVAL task's file needs the run's final checkpoint,
  // which simulated workers never write, so every EVAL would fail at its
  // lease (and a lease would pay for those failures).
  spec.clear_evaluation();
  spec.clear_fit();
  auto one = sweep::PlanSweep(spec);
  if (!one.ok()) Die("plan demo", one.status());
  const double leases_needed =
      o.fleet.workers *
      (1.0 + o.seconds / absl::ToDoubleSeconds(o.fleet.task_time)) * 1.5;
  const int seeds = static_cast<int>(
      std::ceil(leases_needed / static_cast<double>(one->runs.size())));
  std::vector<hlab::v1::SweepSpec> specs;
  for (int first = 0; first < seeds; first += sweep::kMaxSeeds) {
    hlab::v1::SweepSpec part = spec;
    part.set_name(absl::StrCat("bench-load-", specs.size() + 1));
    part.clear_seeds();
    for (int s = first; s < std::min(seeds, first + sweep::kMaxSeeds); ++s) {
      part.add_seeds(s);
    }
    specs.push_back(std::move(part));
  }
  *runs_out = one->runs.size() * static_cast<size_t>(seeds);
  return specs;
}

// Submits every spec; returns the seconds they took in all.
double SubmitAll(const std::string& address,
                 const std::vector<hlab::v1::SweepSpec>& specs) {
  double seconds = 0;
  for (const hlab::v1::SweepSpec& spec : specs) {
    hlab::v1::SubmitSweepResponse response;
    seconds += Submit(address, spec, &response);
  }
  return seconds;
}

void Usage() {
  std::fprintf(stderr,
               "usage: hlab-bench-coordinator [--quick] [--workers N]"
               " [--seconds S] [--heartbeat-seconds S] [--metrics-seconds S]"
               " [--task-seconds S] [--batch N] [--channels N]"
               " [--ingest-points N] [--ingest-in-flight N] [--paper PATH]"
               " [--dir DIR] [--json]\n"
               "       hlab-bench-coordinator --profile churn [--workers N]"
               " [--seconds S] [--coordinator PATH]"
               " [--coordinator-flag FLAG]... [--dir DIR] [--json]\n");
}

// Reads the flags; prints the usage and exits 2 on a bad one.
Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--quick") {
      o.fleet.workers = 50;
      o.seconds = 5;
      o.fleet.task_time = absl::Seconds(2);
      o.ingest_points = 500'000;
    } else if (arg == "--profile") {
      const std::string profile = next();
      if (profile != "churn") {
        std::fprintf(stderr,
                     "hlab-bench-coordinator: --profile: unknown profile"
                     " '%s' (known: churn)\n",
                     profile.c_str());
        std::exit(2);
      }
      // Set first: flags after it override these.
      o.churn = true;
      o.fleet.workers = 500;
      o.seconds = 300;
      o.fleet.heartbeat = absl::Seconds(5);  // hlab-worker at a 30 s lease
      o.fleet.metrics_every = absl::Seconds(1);
      o.fleet.batch = 100;
      o.fleet.task_time = absl::Seconds(120);
      o.fleet.task_time_spread = 0.5;
      o.fleet.warmup = absl::Seconds(10);
      o.fleet.channels = 0;  // one connection per worker
    } else if (arg == "--coordinator") {
      o.coordinator = next();
    } else if (arg == "--coordinator-flag") {
      o.coordinator_flags.push_back(next());
    } else if (arg == "--workers") {
      o.fleet.workers = std::stoi(next());
    } else if (arg == "--seconds") {
      o.seconds = std::stod(next());
    } else if (arg == "--heartbeat-seconds") {
      o.fleet.heartbeat = absl::Seconds(std::stod(next()));
    } else if (arg == "--metrics-seconds") {
      o.fleet.metrics_every = absl::Seconds(std::stod(next()));
    } else if (arg == "--task-seconds") {
      o.fleet.task_time = absl::Seconds(std::stod(next()));
    } else if (arg == "--batch") {
      o.fleet.batch = std::stoi(next());
    } else if (arg == "--channels") {
      o.fleet.channels = std::stoi(next());
    } else if (arg == "--ingest-points") {
      o.ingest_points = std::stoll(next());
    } else if (arg == "--ingest-in-flight") {
      o.ingest_in_flight = std::stoi(next());
    } else if (arg == "--paper") {
      o.paper = next();
    } else if (arg == "--dir") {
      o.dir = next();
    } else if (arg == "--json") {
      o.json = true;
    } else {
      Usage();
      std::exit(2);
    }
  }
  if (o.fleet.workers < 1 || o.fleet.batch < 1 || o.fleet.batch > 1000) {
    Usage();
    std::exit(2);
  }
  if (o.fleet.channels <= 0) o.fleet.channels = o.fleet.workers;
  return o;
}

// ------------------------------------------------------------ churn profile

// Raises the open-file limit to its hard limit: a connection per simulated
// worker, on both sides.
void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int RunChurnProfile(const Options& o) {
  RaiseFileLimit();
  const std::string binary =
      o.coordinator.empty() ? CoordinatorBesideThisProgram() : o.coordinator;
  const std::string log = o.dir + "/coordinator.log";
  std::vector<std::string> flags = {"--db", o.dir + "/churn.db"};
  flags.insert(flags.end(), o.coordinator_flags.begin(),
               o.coordinator_flags.end());
  auto coordinator = CoordinatorProcess::Start(binary, flags, log);
  if (!coordinator.ok()) Die("start " + binary, coordinator.status());

  size_t load_runs = 0;
  const double submit_seconds =
      SubmitAll((*coordinator)->address(), LoadSpecs(o, &load_runs));
  SimulatedFleet fleet((*coordinator)->address(), o.fleet);
  const Steady::time_point register_start = Steady::now();
  if (absl::Status s = fleet.Register(); !s.ok()) Die("register", s);
  const double register_seconds = SecondsSince(register_start);

  const ProcessUsage before = (*coordinator)->Usage();
  const double sim_cpu_start = CpuSeconds(RUSAGE_SELF);
  const Steady::time_point start = Steady::now();
  fleet.Run(absl::Seconds(o.seconds));
  const double seconds = SecondsSince(start);
  const ProcessUsage after = (*coordinator)->Usage();
  const double sim_cpu = CpuSeconds(RUSAGE_SELF) - sim_cpu_start;
  const FleetStats load = fleet.stats();
  double load_average[3] = {0, 0, 0};
  getloadavg(load_average, 3);
  const int exit_status = (*coordinator)->Stop();

  const double coordinator_cores =
      (after.cpu_seconds - before.cpu_seconds) / seconds;
  const double fitter_cores =
      (after.children_cpu_seconds - before.children_cpu_seconds) / seconds;
  const double sim_cores = sim_cpu / seconds;
  auto ms = [](const std::vector<double>& v, double q) {
    return 1e3 * Percentile(v, q);
  };
  const double lease_p99 = ms(load.lease_seconds, 0.99);
  const double heartbeat_p99 = ms(load.heartbeat_seconds, 0.99);
  const double points_per_s =
      static_cast<double>(load.points_accepted) / load.seconds;
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf("%-46s %s\n", "figure (churn profile)", "value");
  std::printf("%-46s %d x %.0f s, %d cores, load average %.2f at the end\n",
              "simulated workers x seconds", o.fleet.workers, seconds,
              static_cast<int>(ncpu), load_average[0]);
  std::printf("%-46s heartbeat %s, %d points every %s, tasks of %s +-%.0f%%\n",
              "each worker", absl::FormatDuration(o.fleet.heartbeat).c_str(),
              o.fleet.batch,
              absl::FormatDuration(o.fleet.metrics_every).c_str(),
              absl::FormatDuration(o.fleet.task_time).c_str(),
              100 * o.fleet.task_time_spread);
  std::printf("%-46s %zu runs queued (submit %.0f ms), register %.0f ms\n",
              "set-up", load_runs, 1e3 * submit_seconds,
              1e3 * register_seconds);
  std::printf("%-46s p50 %.2f ms, p99 %.2f ms (%zu leases)\n",
              "lease latency after start-up", ms(load.lease_seconds, 0.5),
              lease_p99, load.lease_seconds.size());
  std::printf("%-46s p50 %.2f ms, p99 %.2f ms (%zu calls)\n",
              "heartbeat latency after start-up",
              ms(load.heartbeat_seconds, 0.5), heartbeat_p99,
              load.heartbeat_seconds.size());
  std::printf("%-46s p50 %.2f ms, p99 %.2f ms (%zu calls)\n",
              "ReportMetrics latency after start-up",
              ms(load.metrics_seconds, 0.5), ms(load.metrics_seconds, 0.99),
              load.metrics_seconds.size());
  std::printf(
      "%-46s lease p50 %.2f / p99 %.2f ms (%zu), heartbeat p50 %.2f"
      " / p99 %.2f ms (%zu)\n",
      "start-up (first leases)", ms(load.startup_lease_seconds, 0.5),
      ms(load.startup_lease_seconds, 0.99), load.startup_lease_seconds.size(),
      ms(load.startup_heartbeat_seconds, 0.5),
      ms(load.startup_heartbeat_seconds, 0.99),
      load.startup_heartbeat_seconds.size());
  std::printf(
      "%-46s %lld late of %lld due (%zu answered)\n",
      "heartbeats later than their interval",
      static_cast<long long>(load.heartbeats_late),
      static_cast<long long>(load.heartbeats_due),
      load.heartbeat_seconds.size() + load.startup_heartbeat_seconds.size());
  std::printf("%-46s %lld (a lease the coordinator let expire)\n",
              "tasks stopped by a heartbeat",
              static_cast<long long>(load.stops));
  std::printf("%-46s %lld, %.0f points/s stored\n", "tasks completed",
              static_cast<long long>(load.completed), points_per_s);
  std::printf("%-46s %.2f cores (%.1f%% of the machine), %d threads\n",
              "coordinator CPU (own process)", coordinator_cores,
              100.0 * coordinator_cores / static_cast<double>(ncpu),
              after.threads);
  std::printf("%-46s %.2f cores (hlab-sweep-fit: live predictions)\n",
              "coordinator's children CPU", fitter_cores);
  std::printf("%-46s %.0f MiB now, %.0f MiB peak\n", "coordinator RSS",
              static_cast<double>(after.rss_bytes) / (1 << 20),
              static_cast<double>(after.peak_rss_bytes) / (1 << 20));
  std::printf("%-46s %.2f cores\n", "simulator CPU (this process)", sim_cores);
  std::printf(
      "%-46s lease p99 < 50 ms: %s; heartbeat p99 < 20 ms: %s;"
      " every heartbeat on time: %s\n",
      "goals", lease_p99 < 50 ? "met" : "missed",
      heartbeat_p99 < 20 ? "met" : "missed",
      load.heartbeats_late == 0 && load.stops == 0 ? "yes" : "no");
  std::printf("%-46s %lld (%s)\n", "errors",
              static_cast<long long>(load.errors), load.first_error.c_str());
  if (exit_status != 0) {
    std::printf("hlab-coordinator exited with status %d: see %s\n", exit_status,
                log.c_str());
  }
  if (o.json) {
    nlohmann::json j;
    j["profile"] = "churn";
    j["workers"] = o.fleet.workers;
    j["seconds"] = seconds;
    j["cores"] = ncpu;
    j["load_average"] = load_average[0];
    j["lease_ms"] = {{"p50", ms(load.lease_seconds, 0.5)},
                     {"p99", lease_p99},
                     {"count", load.lease_seconds.size()}};
    j["heartbeat_ms"] = {{"p50", ms(load.heartbeat_seconds, 0.5)},
                         {"p99", heartbeat_p99},
                         {"count", load.heartbeat_seconds.size()}};
    j["report_metrics_ms"] = {{"p50", ms(load.metrics_seconds, 0.5)},
                              {"p99", ms(load.metrics_seconds, 0.99)},
                              {"count", load.metrics_seconds.size()}};
    j["startup_lease_ms"] = {{"p50", ms(load.startup_lease_seconds, 0.5)},
                             {"p99", ms(load.startup_lease_seconds, 0.99)},
                             {"count", load.startup_lease_seconds.size()}};
    j["heartbeats_late"] = load.heartbeats_late;
    j["heartbeats_due"] = load.heartbeats_due;
    j["stops"] = load.stops;
    j["tasks_completed"] = load.completed;
    j["points_per_s"] = points_per_s;
    j["coordinator_cores"] = coordinator_cores;
    j["coordinator_children_cores"] = fitter_cores;
    j["coordinator_rss_bytes"] = after.rss_bytes;
    j["coordinator_peak_rss_bytes"] = after.peak_rss_bytes;
    j["simulator_cores"] = sim_cores;
    j["errors"] = load.errors;
    std::printf("%s\n", j.dump(2).c_str());
  }
  return load.errors == 0 && exit_status == 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  Options o = ParseOptions(argc, argv);
  if (!std::getenv("HLAB_LOG_LEVEL")) SetLogLevel(LogLevel::kWARNING);
  // As hlab-coordinator does (hlab_coordinator_main.cc).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const bool own_dir = o.dir.empty();
  if (own_dir) {
    std::string pattern = (std::filesystem::temp_directory_path() /
                           "hlab_bench_coordinator_XXXXXX")
                              .string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    o.dir = pattern;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(o.dir, ec);
    if (ec) {
      std::fprintf(stderr, "hlab-bench-coordinator: --dir %s: %s\n",
                   o.dir.c_str(), ec.message().c_str());
      return 1;
    }
  }
  std::fprintf(stderr,
               "hlab-bench-coordinator: %d workers, %.0f s, heartbeat %s,"
               " metrics every %s (%d points), tasks of %s, in %s\n",
               o.fleet.workers, o.seconds,
               absl::FormatDuration(o.fleet.heartbeat).c_str(),
               absl::FormatDuration(o.fleet.metrics_every).c_str(),
               o.fleet.batch, absl::FormatDuration(o.fleet.task_time).c_str(),
               o.dir.c_str());
  if (o.churn) {
    const int code = RunChurnProfile(o);
    if (own_dir && code == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(o.dir, ignored);
    }
    return code;
  }

  // 3 and 4: the paper's grid.
  const PaperResult paper = MeasurePaper(o);

  // 1: the load run.
  size_t load_runs = 0;
  const std::vector<hlab::v1::SweepSpec> load_specs = LoadSpecs(o, &load_runs);
  auto coordinator = StartCoordinator(o.dir + "/load.db");
  const double load_submit_seconds =
      SubmitAll(coordinator->address(), load_specs);
  SimulatedFleet fleet(coordinator->address(), o.fleet);
  const Steady::time_point register_start = Steady::now();
  if (absl::Status s = fleet.Register(); !s.ok()) Die("register", s);
  const double register_seconds = SecondsSince(register_start);
  fleet.Run(absl::Seconds(o.seconds));
  const FleetStats load = fleet.stats();

  // 2: ingest capacity against the tasks the workers hold, then raw SQLite.
  // The whole process: the coordinator and the simulated workers' client
  // side (mostly idle otherwise), so ingest's CPU cost is overstated.
  const store::WriterStats writer_before = coordinator->store()->writer_stats();
  const double flood_cpu_start = CpuSeconds(RUSAGE_SELF);
  auto flood = fleet.FloodMetrics(o.ingest_points, o.ingest_in_flight);
  const double flood_cpu = CpuSeconds(RUSAGE_SELF) - flood_cpu_start;
  const store::WriterStats writer_after = coordinator->store()->writer_stats();
  // Store writes per commit during the flood (ReportMetrics calls, plus the
  // few other writes that joined them): how much group commit coalesced.
  const double ops_per_commit =
      static_cast<double>(writer_after.ops - writer_before.ops) /
      static_cast<double>(
          std::max<int64_t>(1, writer_after.commits - writer_before.commits));
  if (!flood.ok()) Die("flood", flood.status());
  const FleetStats after = fleet.stats();
  coordinator->Shutdown();
  const double ingest_rate =
      static_cast<double>(flood->points_accepted) / flood->seconds;
  double raw_cpu = 0;
  const double raw_rate =
      RawInsertRate(o.dir + "/raw.db", flood->run_ids, flood->points_sent,
                    o.fleet.batch, &raw_cpu);
  // Per CPU-second: steadier than wall-clock rates on a shared machine,
  // where a single-threaded loop and a multi-threaded server get unequal
  // shares of the cores.
  const double ingest_per_cpu =
      static_cast<double>(flood->points_accepted) / std::max(flood_cpu, 1e-9);
  const double raw_per_cpu =
      static_cast<double>(flood->points_sent) / std::max(raw_cpu, 1e-9);

  const double load_ingest =
      static_cast<double>(load.points_accepted) / load.seconds;
  auto ms = [](const std::vector<double>& v, double q) {
    return 1e3 * Percentile(v, q);
  };
  std::printf("%-44s %s\n", "figure", "value");
  std::printf("%-44s %d x %.0f s (%zu runs queued, submit %.1f ms)\n",
              "simulated workers x seconds", o.fleet.workers, load.seconds,
              load_runs, 1e3 * load_submit_seconds);
  std::printf("%-44s %.0f ms for all\n", "register", 1e3 * register_seconds);
  std::printf("%-44s p50 %.2f ms, p99 %.2f ms (%zu leases, %lld empty)\n",
              "lease latency (with a task)", ms(load.lease_seconds, 0.5),
              ms(load.lease_seconds, 0.99), load.lease_seconds.size(),
              static_cast<long long>(load.empty_leases));
  std::printf("%-44s p50 %.2f ms, p99 %.2f ms (%zu calls)\n",
              "heartbeat latency", ms(load.heartbeat_seconds, 0.5),
              ms(load.heartbeat_seconds, 0.99), load.heartbeat_seconds.size());
  std::printf("%-44s p50 %.2f ms, p99 %.2f ms (%zu calls)\n",
              "ReportMetrics latency under load", ms(load.metrics_seconds, 0.5),
              ms(load.metrics_seconds, 0.99), load.metrics_seconds.size());
  std::printf("%-44s %.0f points/s offered by the workers\n",
              "metric points ingested under load", load_ingest);
  std::printf("%-44s %lld\n", "tasks completed",
              static_cast<long long>(load.completed));
  std::printf("%-44s %.0f points/s (%lld points, %d in flight, %d tasks)\n",
              "ingest end to end (gRPC -> SQLite)", ingest_rate,
              static_cast<long long>(flood->points_accepted),
              o.ingest_in_flight, flood->tasks);
  std::printf("%-44s p50 %.2f ms, p99 %.2f ms\n", "  ReportMetrics call",
              ms(flood->call_seconds, 0.5), ms(flood->call_seconds, 0.99));
  std::printf("%-44s %.1f (largest %lld)\n", "  store writes per commit",
              ops_per_commit, static_cast<long long>(writer_after.max_batch));
  std::printf("%-44s %.0f points/s\n", "raw SQLite loop (1 txn, prepared)",
              raw_rate);
  std::printf("%-44s %.1f%% (target >= 50%%)\n", "ingest / raw",
              100.0 * ingest_rate / raw_rate);
  std::printf("%-44s %.0f vs %.0f points per CPU-second: %.1f%%\n",
              "ingest / raw by CPU time (process vs loop)", ingest_per_cpu,
              raw_per_cpu, 100.0 * ingest_per_cpu / raw_per_cpu);
  std::printf("%-44s %.1f ms read+parse, %.1f ms validate+PlanSweep\n",
              "paper grid: expand", 1e3 * paper.load_seconds,
              1e3 * paper.plan_seconds);
  std::printf("%-44s %.1f ms (%zu runs, %zu tasks)\n",
              "paper grid: SubmitSweep (fresh coordinator)",
              1e3 * paper.submit_seconds, paper.runs, paper.tasks);
  std::printf("%-44s %.3g shared vs %.3g unshared: saves %.1f%% (x%.2f)\n",
              "paper grid: training FLOPs", paper.flops_shared,
              paper.flops_unshared,
              100.0 * (1.0 - paper.flops_shared / paper.flops_unshared),
              paper.flops_unshared / paper.flops_shared);
  std::printf("%-44s %lld (%s)\n", "errors",
              static_cast<long long>(after.errors), after.first_error.c_str());

  if (o.json) {
    nlohmann::json j;
    j["workers"] = o.fleet.workers;
    j["seconds"] = load.seconds;
    j["heartbeat_seconds"] = absl::ToDoubleSeconds(o.fleet.heartbeat);
    j["lease_ms"] = {{"p50", ms(load.lease_seconds, 0.5)},
                     {"p99", ms(load.lease_seconds, 0.99)},
                     {"count", load.lease_seconds.size()},
                     {"empty", load.empty_leases}};
    j["heartbeat_ms"] = {{"p50", ms(load.heartbeat_seconds, 0.5)},
                         {"p99", ms(load.heartbeat_seconds, 0.99)},
                         {"count", load.heartbeat_seconds.size()}};
    j["report_metrics_under_load_ms"] = {
        {"p50", ms(load.metrics_seconds, 0.5)},
        {"p99", ms(load.metrics_seconds, 0.99)}};
    j["points_per_s_under_load"] = load_ingest;
    j["tasks_completed"] = load.completed;
    j["ingest_points_per_s"] = ingest_rate;
    j["raw_sqlite_points_per_s"] = raw_rate;
    j["ingest_ratio"] = ingest_rate / raw_rate;
    j["ingest_writes_per_commit"] = ops_per_commit;
    j["ingest_points_per_cpu_s"] = ingest_per_cpu;
    j["raw_sqlite_points_per_cpu_s"] = raw_per_cpu;
    j["ingest_ratio_cpu"] = ingest_per_cpu / raw_per_cpu;
    j["paper"] = {{"read_parse_ms", 1e3 * paper.load_seconds},
                  {"validate_plan_ms", 1e3 * paper.plan_seconds},
                  {"submit_ms", 1e3 * paper.submit_seconds},
                  {"runs", paper.runs},
                  {"tasks", paper.tasks},
                  {"flops_shared", paper.flops_shared},
                  {"flops_unshared", paper.flops_unshared},
                  {"flops_saved_fraction",
                   1.0 - paper.flops_shared / paper.flops_unshared}};
    j["errors"] = after.errors;
    std::printf("%s\n", j.dump(2).c_str());
  }
  if (own_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(o.dir, ignored);
  }
  return after.errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace hlab::bench

int main(int argc, char** argv) { return hlab::bench::Main(argc, argv); }
