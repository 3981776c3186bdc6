// Helpers for the store tests: a temporary directory per test and small
// builders for sweeps, runs and tasks.
#ifndef HLAB_TESTS_COORDINATOR_STORE_STORE_TEST_UTIL_H_
#define HLAB_TESTS_COORDINATOR_STORE_STORE_TEST_UTIL_H_

#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "coordinator/store/store.h"

namespace hlab::store::testing {

// A fresh directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "hlab_store_XXXXXX";
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Reads one integer with a plain sqlite3 connection (not the store's code),
// so tests check what is on disk; -1 when the query returns no row.
inline int64_t RawInt(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  int64_t value = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

// A fixed "now" so tests never read the clock.
inline absl::Time T(int64_t seconds) {
  return absl::FromUnixSeconds(1'800'000'000 + seconds);
}

inline SweepSpec MakeSweep(const std::string& name, int max_retries = 20) {
  SweepSpec spec;
  spec.name = name;
  spec.spec_hash = "hash-" + name;
  spec.request_id = "req-" + name;
  spec.spec = "{\"name\": \"" + name + "\"}";
  spec.max_retries = max_retries;
  return spec;
}

inline RunSpec MakeRun(const std::string& id, int max_attempts = 3) {
  RunSpec run;
  run.id = id;
  run.arch = "swa";
  run.scale = "s1";
  run.budget_tokens = 1000000;
  run.n_params = 3000000;
  run.seed = 1;
  run.config = "{}";
  run.max_attempts = max_attempts;
  return run;
}

inline TaskSpec MakeTask(const std::string& id, int64_t sweep_id,
                         const std::string& run_id,
                         std::vector<std::string> deps = {}, int priority = 0,
                         double cost = 0, TaskKind kind = TaskKind::kTrain) {
  TaskSpec task;
  task.id = id;
  task.sweep_id = sweep_id;
  task.run_id = run_id;
  task.kind = kind;
  task.priority = priority;
  task.cost_flops = cost;
  task.depends_on = std::move(deps);
  return task;
}

inline std::vector<std::string> Ids(const std::vector<Task>& tasks) {
  std::vector<std::string> ids;
  for (const Task& t : tasks) ids.push_back(t.spec.id);
  return ids;
}

// Sets a task's not_before straight in the database, outside the typed
// operations (no leasable generation moves): a backoff the test chooses,
// also on a task that is still waiting for its dependencies.
inline absl::Status SetNotBefore(Store& store, const std::string& task_id,
                                 absl::Time not_before) {
  return store.RunOnWriterForTesting([=](Database& db) -> absl::Status {
    absl::StatusOr<Statement> st =
        db.Prepare("UPDATE tasks SET not_before = ? WHERE id = ?");
    if (!st.ok()) return st.status();
    st->Bind(1, ToMillis(not_before)).Bind(2, task_id);
    return st->Run();
  });
}

// Opens a store at dir/hlab.db with one sweep "s" and run "r1" with task
// "r1.train" (max_attempts as given). Fails the test on error.
struct Fixture {
  explicit Fixture(int max_attempts = 3, int sweep_retries = 20) {
    auto opened = Store::Open(dir.File("hlab.db"));
    EXPECT_TRUE(opened.ok()) << opened.status();
    store = std::move(opened).value();
    auto sweep = store->CreateSweep(MakeSweep("s", sweep_retries), T(0));
    EXPECT_TRUE(sweep.ok()) << sweep.status();
    sweep_id = sweep->sweep_id;
    EXPECT_TRUE(
        store->AddRuns(sweep_id, {MakeRun("r1", max_attempts)}, T(0)).ok());
    EXPECT_TRUE(
        store->AddTasks({MakeTask("r1.train", sweep_id, "r1")}, T(0)).ok());
  }
  TempDir dir;
  std::unique_ptr<Store> store;
  int64_t sweep_id = 0;
};

}  // namespace hlab::store::testing

#endif  // HLAB_TESTS_COORDINATOR_STORE_STORE_TEST_UTIL_H_
