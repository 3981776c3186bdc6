// hlab-bench-store: metric points ingested per second through the store's
// RecordMetrics path (batches from several threads, as workers send them,
// group-committed by the writer thread) as a ratio to a raw SQLite insert
// loop (one prepared statement, one big transaction) into the same schema,
// measured in the same run; plus commit and call latency percentiles.
//
//   build/bin/hlab-bench-store                 # 8 threads x 500 x 100 points
//   build/bin/hlab-bench-store --threads 4 --batches 200 --batch 1000
//
// Each repetition uses fresh databases in a temporary directory (or --dir);
// the best repetition of each side is reported with the median and worst
// per-repetition ratios, and all of them are printed.
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/store/database.h"
#include "coordinator/store/store.h"

namespace hlab::store {
namespace {

struct Options {
  int threads = 8;
  int batches = 500;  // per thread
  int batch = 100;    // points per RecordMetrics call
  int repeats = 5;
  std::string dir;
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t index =
      static_cast<size_t>(q * static_cast<double>(values.size() - 1));
  return values[index];
}

void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "hlab-bench-store: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  std::exit(1);
}

std::string RunId(int t) { return "run-" + std::to_string(t); }

// A fresh database with one sweep, one run and one leased task per thread.
// Returns the store (open) and fills `attempts`.
std::unique_ptr<Store> Prepare(const std::string& path, int threads,
                               StoreOptions options,
                               std::vector<int>* attempts) {
  auto opened = Store::Open(path, std::move(options));
  if (!opened.ok()) Die("open " + path, opened.status());
  std::unique_ptr<Store> store = std::move(opened).value();
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  SweepSpec spec;
  spec.name = "bench";
  spec.spec_hash = "bench";
  spec.spec = "{}";
  auto sweep = store->CreateSweep(spec, now);
  if (!sweep.ok()) Die("create sweep", sweep.status());
  std::vector<RunSpec> runs;
  std::vector<TaskSpec> tasks;
  for (int t = 0; t < threads; ++t) {
    RunSpec run;
    run.id = RunId(t);
    run.arch = "full";
    run.scale = "s1";
    runs.push_back(run);
    TaskSpec task;
    task.id = RunId(t) + ".train";
    task.sweep_id = sweep->sweep_id;
    task.run_id = run.id;
    tasks.push_back(task);
  }
  if (auto s = store->AddRuns(sweep->sweep_id, runs, now); !s.ok()) {
    Die("add runs", s.status());
  }
  if (auto s = store->AddTasks(tasks, now); !s.ok())
    Die("add tasks", s.status());
  attempts->clear();
  for (const TaskSpec& task : tasks) {
    auto attempt = store->LeaseTask(task.id, "bench", now, absl::Hours(1));
    if (!attempt.ok()) Die("lease", attempt.status());
    attempts->push_back(*attempt);
  }
  return store;
}

MetricPoint Point(int t, int64_t step) {
  MetricPoint p;
  p.run_id = RunId(t);
  p.name = "train_loss";
  p.step = step;
  p.value = 10.0 / static_cast<double>(step + 1);
  p.tokens = step * 4096;
  p.wall_time = 0.01 * static_cast<double>(step);
  return p;
}

// Raw SQLite: same schema and pragmas, one prepared INSERT OR IGNORE, one
// transaction for all points. Returns points per second.
double RawInsertRate(const std::string& path, const Options& o) {
  std::vector<int> attempts;
  Prepare(path, o.threads, StoreOptions(), &attempts).reset();  // schema, runs
  // Opened as the store opens its writer's connection: the same pragmas
  // (WAL, synchronous=NORMAL, foreign keys, page cache), no mutex.
  auto connection = Database::Open(path, Database::Mode::kReadWrite);
  if (!connection.ok()) Die("raw open", connection.status());
  sqlite3* db = (*connection)->raw();
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT OR IGNORE INTO metrics (run_id, name, step, value,"
                     " tokens, wall_time) VALUES (?, ?, ?, ?, ?, ?)",
                     -1, &stmt, nullptr);
  const int64_t per_thread = static_cast<int64_t>(o.batches) * o.batch;
  auto start = std::chrono::steady_clock::now();
  sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
  for (int t = 0; t < o.threads; ++t) {
    for (int64_t step = 0; step < per_thread; ++step) {
      MetricPoint p = Point(t, step);
      sqlite3_bind_text(stmt, 1, p.run_id.data(),
                        static_cast<int>(p.run_id.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(stmt, 2, p.name.data(), static_cast<int>(p.name.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_int64(stmt, 3, p.step);
      sqlite3_bind_double(stmt, 4, p.value);
      sqlite3_bind_int64(stmt, 5, p.tokens);
      sqlite3_bind_double(stmt, 6, p.wall_time);
      if (sqlite3_step(stmt) != SQLITE_DONE) {
        Die("raw insert", absl::InternalError(sqlite3_errmsg(db)));
      }
      sqlite3_reset(stmt);
    }
  }
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  double seconds = Seconds(start);
  sqlite3_finalize(stmt);
  connection->reset();
  return static_cast<double>(per_thread * o.threads) / seconds;
}

struct StoreResult {
  double rate = 0;
  std::vector<double> commit_seconds;
  std::vector<double> call_seconds;
  double ops_per_commit = 0;
};

StoreResult StoreInsertRate(const std::string& path, const Options& o) {
  StoreResult result;
  StoreOptions options;
  std::vector<double>* commits = &result.commit_seconds;
  // Runs on the writer thread only; read after the store is closed.
  options.writer.on_commit = [commits](double seconds, int) {
    commits->push_back(seconds);
  };
  std::vector<int> attempts;
  std::unique_ptr<Store> store = Prepare(path, o.threads, options, &attempts);
  const size_t setup_commits = commits->size();
  const WriterStats before = store->writer_stats();
  std::vector<std::vector<double>> calls(o.threads);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      const std::string task = RunId(t) + ".train";
      std::vector<MetricPoint> batch;
      for (int b = 0; b < o.batches; ++b) {
        batch.clear();
        for (int i = 0; i < o.batch; ++i) {
          batch.push_back(Point(t, static_cast<int64_t>(b) * o.batch + i));
        }
        auto call_start = std::chrono::steady_clock::now();
        absl::Status s =
            store->RecordMetrics(task, attempts[t], batch, absl::Now());
        calls[t].push_back(Seconds(call_start));
        if (!s.ok()) Die("RecordMetrics", s);
      }
    });
  }
  for (auto& th : threads) th.join();
  double seconds = Seconds(start);
  const WriterStats after = store->writer_stats();
  store.reset();  // drains; the writer thread is gone
  result.commit_seconds.erase(
      result.commit_seconds.begin(),
      result.commit_seconds.begin() + static_cast<long>(setup_commits));
  for (auto& c : calls) {
    result.call_seconds.insert(result.call_seconds.end(), c.begin(), c.end());
  }
  const double total = static_cast<double>(o.threads) * o.batches * o.batch;
  result.rate = total / seconds;
  result.ops_per_commit = static_cast<double>(after.ops - before.ops) /
                          static_cast<double>(after.commits - before.commits);
  return result;
}

int Main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--threads") {
      o.threads = std::stoi(next());
    } else if (arg == "--batches") {
      o.batches = std::stoi(next());
    } else if (arg == "--batch") {
      o.batch = std::stoi(next());
    } else if (arg == "--repeats") {
      o.repeats = std::stoi(next());
    } else if (arg == "--dir") {
      o.dir = next();
    } else {
      std::fprintf(stderr,
                   "usage: hlab-bench-store [--threads N] [--batches N] "
                   "[--batch N] [--repeats N] [--dir DIR]\n");
      return 2;
    }
  }
  bool own_dir = o.dir.empty();
  if (own_dir) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "hlab_bench_store_XXXXXX")
            .string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    o.dir = pattern;
  }
  std::printf(
      "store ingest: %d threads x %d batches x %d points = %lld points"
      " per side, %d repeats, in %s\n",
      o.threads, o.batches, o.batch,
      static_cast<long long>(o.threads) * o.batches * o.batch, o.repeats,
      o.dir.c_str());
  double best_raw = 0;
  StoreResult best_store;
  std::vector<double> ratios;
  for (int r = 0; r < o.repeats; ++r) {
    std::string raw_path = o.dir + "/raw" + std::to_string(r) + ".db";
    std::string store_path = o.dir + "/store" + std::to_string(r) + ".db";
    double raw = RawInsertRate(raw_path, o);
    StoreResult store = StoreInsertRate(store_path, o);
    std::printf(
        "  repeat %d: raw %.0f points/s, store %.0f points/s (%.1f%%),"
        " %.1f calls per commit\n",
        r, raw, store.rate, 100.0 * store.rate / raw, store.ops_per_commit);
    ratios.push_back(store.rate / raw);
    best_raw = std::max(best_raw, raw);
    if (store.rate > best_store.rate) best_store = std::move(store);
  }
  std::printf("raw SQLite loop (1 txn, prepared): %12.0f points/s\n", best_raw);
  std::printf("store RecordMetrics (group commit): %12.0f points/s\n",
              best_store.rate);
  std::printf(
      "ratio: %.1f%% best vs best, %.1f%% median of the repeats, "
      "%.1f%% worst (target >= 50%%)\n",
      100.0 * best_store.rate / best_raw, 100.0 * Percentile(ratios, 0.5),
      100.0 * Percentile(ratios, 0.0));
  std::printf(
      "commit latency: p50 %.2f ms, p99 %.2f ms (%zu commits, %.1f "
      "calls each)\n",
      1e3 * Percentile(best_store.commit_seconds, 0.5),
      1e3 * Percentile(best_store.commit_seconds, 0.99),
      best_store.commit_seconds.size(), best_store.ops_per_commit);
  std::printf("RecordMetrics call latency: p50 %.2f ms, p99 %.2f ms\n",
              1e3 * Percentile(best_store.call_seconds, 0.5),
              1e3 * Percentile(best_store.call_seconds, 0.99));
  if (own_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(o.dir, ignored);
  }
  return 0;
}

}  // namespace
}  // namespace hlab::store

int main(int argc, char** argv) { return hlab::store::Main(argc, argv); }
