// BackupDatabase (coordinator/store/backup.h): a consistent copy of a
// database that the store's writer keeps writing to, refusal to overwrite,
// and clear errors that leave no partial file behind.
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "coordinator/store/backup.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using testing::MakeRun;
using testing::MakeSweep;
using testing::RawInt;
using testing::T;
using testing::TempDir;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Adds `n` runs named prefix0.. to the sweep, 50 per transaction.
void AddRuns(Store* store, int64_t sweep_id, const std::string& prefix, int n) {
  for (int i = 0; i < n; i += 50) {
    std::vector<RunSpec> runs;
    for (int j = i; j < std::min(n, i + 50); ++j) {
      RunSpec run = MakeRun(absl::StrCat(prefix, j));
      run.config = std::string(200, 'x');  // fill pages
      runs.push_back(run);
    }
    ASSERT_TRUE(store->AddRuns(sweep_id, runs, T(0)).ok());
  }
}

TEST(BackupTest, CopiesOneSnapshotInStepsWhileTheWriterGoesOn) {
  TempDir dir;
  auto store = Store::Open(dir.File("hlab.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto sweep = (*store)->CreateSweep(MakeSweep("live"), T(0));
  ASSERT_TRUE(sweep.ok());
  AddRuns(store->get(), sweep->sweep_id, "before-", 2000);

  // A writer adds runs (run rows and sweep_runs rows in one transaction
  // each) for as long as the backup takes.
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      RunSpec run = MakeRun(absl::StrCat("during-", i));
      if ((*store)->AddRuns(sweep->sweep_id, {run}, T(1)).ok()) ++written;
    }
  });
  while (written.load() < 5) std::this_thread::yield();

  BackupOptions options;
  options.pages_per_step = 4;
  options.pause = absl::Milliseconds(1);
  int steps = 0;
  int64_t last_done = -1, last_total = 0;
  options.progress = [&](int64_t done, int64_t total) {
    ++steps;
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
  };
  const std::string copy = dir.File("copy.db");
  const int written_at_start = written.load();
  absl::StatusOr<BackupResult> result =
      BackupDatabase(dir.File("hlab.db"), copy, options);
  const int written_at_end = written.load();
  stop = true;
  writer.join();
  ASSERT_TRUE(result.ok()) << result.status();

  EXPECT_GT(steps, 10);  // copied in many small steps, not one
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(result->pages, last_total);
  EXPECT_EQ(result->bytes,
            static_cast<int64_t>(std::filesystem::file_size(copy)));
  // One snapshot: every run has its sweep_runs row, the runs from before
  // are all there, and the writer's runs up to some point.
  const int64_t runs = RawInt(copy, "SELECT count(*) FROM runs");
  EXPECT_EQ(RawInt(copy, "SELECT count(*) FROM sweep_runs"), runs);
  EXPECT_GE(runs, 2000 + written_at_start);
  EXPECT_LE(runs, 2000 + written_at_end + 1);
  // The writer committed while the copy ran: it was not blocked by it.
  EXPECT_GT(written_at_end, written_at_start);
  // The copy is a working database for the coordinator.
  auto reopened = Store::Open(copy);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ((*reopened)->GetRun("before-1999")->spec.arch, "swa");
  // Nothing else is left in the directory (no partial file).
  for (const std::string& name : FilesIn(dir.path())) {
    EXPECT_EQ(name.find(".partial-"), std::string::npos) << name;
  }
}

TEST(BackupTest, NeverOverwritesUnlessForced) {
  TempDir dir;
  auto store = Store::Open(dir.File("hlab.db"));
  ASSERT_TRUE(store.ok());
  auto sweep = (*store)->CreateSweep(MakeSweep("f"), T(0));
  ASSERT_TRUE(sweep.ok());
  const std::string copy = dir.File("copy.db");
  std::ofstream(copy) << "precious";

  absl::StatusOr<BackupResult> refused =
      BackupDatabase(dir.File("hlab.db"), copy);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(refused.status().message().find("--force"), std::string::npos)
      << refused.status();
  std::ifstream in(copy);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "precious");

  BackupOptions force;
  force.force = true;
  ASSERT_TRUE(BackupDatabase(dir.File("hlab.db"), copy, force).ok());
  EXPECT_EQ(RawInt(copy, "SELECT count(*) FROM sweeps"), 1);

  // The database onto itself: refused even with force.
  EXPECT_EQ(BackupDatabase(dir.File("hlab.db"), dir.File("hlab.db"), force)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BackupTest, BadSourcesAndTargetsFailCleanly) {
  TempDir dir;
  EXPECT_EQ(
      BackupDatabase(dir.File("missing.db"), dir.File("a.db")).status().code(),
      absl::StatusCode::kUnavailable);
  std::ofstream(dir.File("notes.txt")) << std::string(4096, 'n');
  EXPECT_EQ(
      BackupDatabase(dir.File("notes.txt"), dir.File("b.db")).status().code(),
      absl::StatusCode::kDataLoss);
  {
    auto store = Store::Open(dir.File("hlab.db"));
    ASSERT_TRUE(store.ok());
  }
  absl::StatusOr<BackupResult> no_dir =
      BackupDatabase(dir.File("hlab.db"), dir.File("no/such/dir/c.db"));
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(no_dir.status().message().find("no/such/dir"), std::string::npos)
      << no_dir.status();
  BackupOptions zero;
  zero.pages_per_step = 0;
  EXPECT_EQ(BackupDatabase(dir.File("hlab.db"), dir.File("d.db"), zero)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Only the inputs are left: no target, no partial file.
  for (const std::string& name : FilesIn(dir.path())) {
    EXPECT_TRUE(name.rfind("hlab.db", 0) == 0 || name == "notes.txt") << name;
  }
}

}  // namespace
}  // namespace hlab::store
