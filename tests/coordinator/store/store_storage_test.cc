// Disk full and read-only storage under the store: a write the storage
// cannot take is refused with Unavailable (kStoreNotWritable) and stores
// nothing, committed rows stay and stay readable, the writer says it is not
// writable, and the next write after the storage recovers succeeds with no
// restart.
//
// A full disk is made deterministic with PRAGMA max_page_count on the
// writer's connection (SQLITE_FULL once the file would grow), a read-only
// database with PRAGMA query_only (SQLITE_READONLY). A real full file system
// is a small tmpfs, where mount(2) is allowed (root); skipped elsewhere.
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "common/store_unavailable.h"
#include "coordinator/store/database.h"
#include "coordinator/store/store.h"
#include "coordinator/store/writer.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using ::testing::ElementsAre;
using testing::Fixture;
using ::testing::HasSubstr;
using testing::T;
using testing::TempDir;

const absl::Duration kLease = absl::Seconds(30);

std::unique_ptr<Database> OpenWithTable(const std::string& path) {
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  EXPECT_TRUE(db.ok()) << db.status();
  EXPECT_TRUE(
      (*db)
          ->Exec("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT)")
          .ok());
  return std::move(db).value();
}

// Inserts (key, `bytes` characters): past a page, it needs new pages.
WriteOp Insert(const std::string& key, size_t bytes = 1) {
  return [key, bytes](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(Statement st,
                          db.Prepare("INSERT INTO kv (k, v) VALUES (?, ?)"));
    st.Bind(1, key).Bind(2, std::string(bytes, 'x'));
    return st.Run();
  };
}

WriteOp Pragma(const std::string& sql) {
  return [sql](Database& db) { return db.Exec(sql); };
}

int64_t CountRows(const std::string& path) {
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  EXPECT_TRUE(db.ok()) << db.status();
  return *(*db)->QueryInt("SELECT count(*) FROM kv");
}

// Records the writer's on_storage calls.
struct StorageLog {
  WriterOptions Options() {
    WriterOptions options;
    options.on_storage = [this](bool writable) {
      absl::MutexLock lock(&mu);
      calls.push_back(writable);
    };
    return options;
  }
  std::vector<bool> Calls() {
    absl::MutexLock lock(&mu);
    return calls;
  }
  absl::Mutex mu;
  std::vector<bool> calls;
};

TEST(StoreStorageTest, DiskFullRefusesWritesWithUnavailableAndRecovers) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  StorageLog log;
  Writer writer(OpenWithTable(path), log.Options());
  ASSERT_TRUE(writer.Run(Insert("before")).ok());
  // The file may not grow: max_page_count is clamped to its size now.
  ASSERT_TRUE(
      writer.RunOutsideTransaction(Pragma("PRAGMA max_page_count = 1")).ok());

  absl::Status full = writer.Run(Insert("big", 64 * 1024));
  EXPECT_EQ(full.code(), absl::StatusCode::kUnavailable) << full;
  EXPECT_TRUE(IsStoreNotWritable(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("disk full"));
  EXPECT_THAT(full.message(), HasSubstr(path));
  WriterStats stats = writer.stats();
  EXPECT_FALSE(stats.writable);
  EXPECT_EQ(stats.storage_failures, 1);
  EXPECT_THAT(stats.storage_error, HasSubstr("disk full"));
  // Reads go on, and see the committed row, not the refused one.
  EXPECT_EQ(CountRows(path), 1);
  // A write that changes nothing does not count as recovered.
  ASSERT_TRUE(writer.Run([](Database&) { return absl::OkStatus(); }).ok());
  EXPECT_FALSE(writer.stats().writable);

  // Space returns: the same write succeeds, with no restart.
  ASSERT_TRUE(
      writer.RunOutsideTransaction(Pragma("PRAGMA max_page_count = 1000000"))
          .ok());
  ASSERT_TRUE(writer.Run(Insert("big", 64 * 1024)).ok());
  stats = writer.stats();
  EXPECT_TRUE(stats.writable);
  EXPECT_EQ(stats.storage_failures, 1);
  EXPECT_EQ(stats.storage_error, "");
  EXPECT_THAT(log.Calls(), ElementsAre(false, true));
  EXPECT_EQ(CountRows(path), 2);
}

// In one batch, the op the full disk refused fails alone; the others commit.
TEST(StoreStorageTest, DiskFullFailsOnlyTheOpsItRefused) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  Writer writer(OpenWithTable(path), WriterOptions());
  ASSERT_TRUE(writer.Run(Insert("before")).ok());
  ASSERT_TRUE(
      writer.RunOutsideTransaction(Pragma("PRAGMA max_page_count = 1")).ok());
  absl::Notification entered, release;
  auto gate = writer.Submit([&](Database&) {
    entered.Notify();
    release.WaitForNotification();
    return absl::OkStatus();
  });
  entered.WaitForNotification();
  auto big = writer.Submit(Insert("big", 64 * 1024));
  auto not_storage = writer.Submit(Insert("before"));  // duplicate key
  release.Notify();
  EXPECT_TRUE(gate.get().ok());
  absl::Status refused = big.get();
  EXPECT_TRUE(IsStoreNotWritable(refused)) << refused;
  // A failure of the op itself keeps its own code.
  EXPECT_EQ(not_storage.get().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountRows(path), 1);
}

TEST(StoreStorageTest,
     ReadOnlyDatabaseRefusesWritesWithUnavailableAndRecovers) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  StorageLog log;
  Writer writer(OpenWithTable(path), log.Options());
  ASSERT_TRUE(writer.Run(Insert("before")).ok());
  ASSERT_TRUE(
      writer.RunOutsideTransaction(Pragma("PRAGMA query_only = 1")).ok());
  absl::Status refused = writer.Run(Insert("during"));
  // Not InvalidArgument (SQLITE_READONLY's usual code): a worker drops a
  // report refused as invalid, and keeps one refused as unavailable.
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(IsStoreNotWritable(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("read-only"));
  EXPECT_FALSE(writer.stats().writable);
  EXPECT_EQ(CountRows(path), 1);
  ASSERT_TRUE(
      writer.RunOutsideTransaction(Pragma("PRAGMA query_only = 0")).ok());
  ASSERT_TRUE(writer.Run(Insert("during")).ok());
  EXPECT_TRUE(writer.stats().writable);
  EXPECT_THAT(log.Calls(), ElementsAre(false, true));
  EXPECT_EQ(CountRows(path), 2);
}

std::vector<MetricPoint> Points(int first_step, int count) {
  std::vector<MetricPoint> points;
  for (int i = 0; i < count; ++i) {
    MetricPoint p;
    p.name = "train_loss";
    p.step = first_step + i;
    p.value = 10.0 - 0.001 * p.step;
    p.tokens = 1000 * p.step;
    points.push_back(p);
  }
  return points;
}

// Through the Store: metric points refused on a full disk are not stored
// (the worker sends them again), what was committed stays readable, and
// the same batch is stored whole once space returns.
TEST(StoreStorageTest, StoreKeepsReadingAndTakesTheRefusedPointsLater) {
  Fixture f;
  ASSERT_EQ(*f.store->LeaseTask("r1.train", "w1", T(0), kLease), 1);
  ASSERT_TRUE(f.store->RecordMetrics("r1.train", 1, Points(0, 10), T(1)).ok());
  ASSERT_TRUE(
      f.store->RunOnWriterForTesting(Pragma("PRAGMA max_page_count = 1")).ok());

  const std::vector<MetricPoint> batch = Points(10, 5000);
  absl::Status refused = f.store->RecordMetrics("r1.train", 1, batch, T(2));
  EXPECT_TRUE(IsStoreNotWritable(refused)) << refused;
  EXPECT_FALSE(f.store->writer_stats().writable);
  // A small write may still fit in the pages the file has (and then says
  // the database is writable again); either way it is answered.
  absl::Status lease = f.store->ExtendLease("r1.train", 1, "w1", T(2), kLease);
  EXPECT_TRUE(lease.ok() || IsStoreNotWritable(lease)) << lease;
  // Reads: the committed points, the run, the task.
  auto points = f.store->ReadMetrics("r1", "train_loss");
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ(points->size(), 10u);
  EXPECT_TRUE(f.store->GetRun("r1").ok());
  EXPECT_TRUE(f.store->ListRuns(RunFilter()).ok());
  EXPECT_EQ(f.store->GetTask("r1.train")->state, TaskState::kLeased);

  ASSERT_TRUE(
      f.store->RunOnWriterForTesting(Pragma("PRAGMA max_page_count = 1000000"))
          .ok());
  int64_t inserted = 0;
  ASSERT_TRUE(
      f.store->RecordMetrics("r1.train", 1, batch, T(3), &inserted).ok());
  EXPECT_EQ(inserted, 5000);  // nothing of the refused batch was stored
  EXPECT_TRUE(f.store->writer_stats().writable);
  EXPECT_EQ(f.store->ReadMetrics("r1", "train_loss")->size(), 5010u);
}

// A real full file system: the store on a 1 MiB tmpfs that a second file
// fills. Needs mount(2) (root, or CAP_SYS_ADMIN); skipped with a message
// where it is not allowed.
class TmpfsDir {
 public:
  TmpfsDir() {
    path_ = dir_.File("tmpfs");
    std::error_code ignored;
    std::filesystem::create_directory(path_, ignored);
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, "size=1m") == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~TmpfsDir() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  TempDir dir_;
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

// Writes `path` until the file system is full (or `limit` bytes).
void FillUp(const std::string& path, size_t limit = 4 << 20) {
  std::ofstream out(path, std::ios::binary);
  const std::string chunk(4096, 'f');
  for (size_t written = 0; written < limit && out; written += chunk.size()) {
    out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    out.flush();
  }
}

TEST(StoreStorageTest, FullTmpfsRefusesWritesAndRecoversWhenSpaceReturns) {
  TmpfsDir fs;
  if (!fs.mounted()) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << fs.error()
                 << "); the max_page_count tests cover the logic";
  }
  const std::string path = fs.File("hlab.db");
  {
    auto opened = Store::Open(path);
    ASSERT_TRUE(opened.ok()) << opened.status();
    std::unique_ptr<Store> store = std::move(opened).value();
    auto sweep = store->CreateSweep(testing::MakeSweep("s"), T(0));
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    ASSERT_TRUE(
        store->AddRuns(sweep->sweep_id, {testing::MakeRun("r1")}, T(0)).ok());
    ASSERT_TRUE(
        store
            ->AddTasks({testing::MakeTask("r1.train", sweep->sweep_id, "r1")},
                       T(0))
            .ok());
    ASSERT_EQ(*store->LeaseTask("r1.train", "w1", T(0), kLease), 1);
    ASSERT_TRUE(store->RecordMetrics("r1.train", 1, Points(0, 10), T(1)).ok());
    FillUp(fs.File("filler"));

    // Keep writing until the disk refuses (the WAL may have room left).
    absl::Status refused;
    int64_t stored = 10;
    for (int i = 0; i < 200 && refused.ok(); ++i) {
      refused = store->RecordMetrics("r1.train", 1, Points(10 + 1000 * i, 1000),
                                     T(2));
      if (refused.ok()) stored += 1000;
    }
    ASSERT_FALSE(refused.ok()) << "the full tmpfs took every write";
    EXPECT_TRUE(IsStoreNotWritable(refused)) << refused;
    EXPECT_FALSE(store->writer_stats().writable);
    auto points = store->ReadMetrics("r1", "train_loss");
    ASSERT_TRUE(points.ok()) << points.status();
    EXPECT_EQ(static_cast<int64_t>(points->size()), stored);

    std::filesystem::remove(fs.File("filler"));
    ASSERT_TRUE(
        store->RecordMetrics("r1.train", 1, Points(1'000'000, 10), T(3)).ok());
    EXPECT_TRUE(store->writer_stats().writable);
    EXPECT_EQ(
        static_cast<int64_t>(store->ReadMetrics("r1", "train_loss")->size()),
        stored + 10);
  }
  // Nothing committed was lost: a fresh open reads the same rows.
  EXPECT_GE(testing::RawInt(path, "SELECT count(*) FROM metrics"), 10);
}

}  // namespace
}  // namespace hlab::store
