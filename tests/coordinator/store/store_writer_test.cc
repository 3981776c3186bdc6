// The writer thread: group commit, per-op failure isolation, durability when
// the completion runs, draining on shutdown, lease-critical writes ahead of
// bulk ones with each task's writes in order.
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "coordinator/store/database.h"
#include "coordinator/store/writer.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using testing::TempDir;

std::unique_ptr<Database> OpenWithTable(const std::string& path) {
  auto db = Database::Open(path, Database::Mode::kReadWrite);
  EXPECT_TRUE(db.ok()) << db.status();
  EXPECT_TRUE((*db)
                  ->Exec("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY,"
                         " v INTEGER NOT NULL)")
                  .ok());
  return std::move(db).value();
}

WriteOp Insert(const std::string& key, int64_t value) {
  return [key, value](Database& db) -> absl::Status {
    HLAB_ASSIGN_OR_RETURN(Statement st,
                          db.Prepare("INSERT INTO kv (k, v) VALUES (?, ?)"));
    st.Bind(1, key).Bind(2, value);
    return st.Run();
  };
}

int64_t CountRows(const std::string& path) {
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  EXPECT_TRUE(db.ok());
  return *(*db)->QueryInt("SELECT count(*) FROM kv");
}

TEST(StoreWriterTest, ConcurrentWritersAllLand) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  int commits_seen = 0;
  WriterOptions options;
  options.on_commit = [&](double seconds, int ops) {
    EXPECT_GE(seconds, 0.0);
    EXPECT_GE(ops, 1);
    ++commits_seen;  // writer thread only
  };
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  {
    Writer writer(OpenWithTable(path), options);
    std::vector<std::thread> threads;
    std::vector<int> failures(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          absl::Status s = writer.Run(
              Insert("t" + std::to_string(t) + "-" + std::to_string(i), i));
          if (!s.ok()) ++failures[t];
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0);
    // Durable once Run returned: visible to another connection now.
    EXPECT_EQ(CountRows(path), kThreads * kPerThread);
    WriterStats stats = writer.stats();
    EXPECT_EQ(stats.ops, kThreads * kPerThread);
    EXPECT_EQ(stats.failed_ops, 0);
    EXPECT_LE(stats.commits, stats.ops);
  }
  EXPECT_GE(commits_seen, 1);
}

TEST(StoreWriterTest, OneBadOpDoesNotFailItsBatch) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  Writer writer(OpenWithTable(path), WriterOptions());
  // Hold the writer inside an op so the next ones queue into one batch.
  absl::Notification entered, release;
  auto gate = writer.Submit([&](Database&) {
    entered.Notify();
    release.WaitForNotification();
    return absl::OkStatus();
  });
  entered.WaitForNotification();
  auto good1 = writer.Submit(Insert("a", 1));
  auto bad = writer.Submit([](Database& db) -> absl::Status {
    // Does some work, then fails: its work must be rolled back.
    HLAB_RETURN_IF_ERROR(Insert("partial", 7)(db));
    return Insert("a", 2)(db);  // duplicate key
  });
  auto good2 = writer.Submit(Insert("b", 3));
  auto bad_sql = writer.Submit([](Database& db) {
    return db.Exec("INSERT INTO no_such_table VALUES (1)");
  });
  auto good3 = writer.Submit(Insert("c", 4));
  release.Notify();
  EXPECT_TRUE(gate.get().ok());
  EXPECT_TRUE(good1.get().ok());
  absl::Status bad_status = bad.get();
  EXPECT_EQ(bad_status.code(), absl::StatusCode::kFailedPrecondition)
      << bad_status;
  EXPECT_TRUE(good2.get().ok());
  EXPECT_EQ(bad_sql.get().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(good3.get().ok());
  EXPECT_EQ(CountRows(path), 3);  // a, b, c; not "partial"
  WriterStats stats = writer.stats();
  EXPECT_GE(stats.max_batch, 5);  // the five queued ops shared one commit
  EXPECT_EQ(stats.failed_ops, 2);
}

TEST(StoreWriterTest, ThrowingOpFailsAlone) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  Writer writer(OpenWithTable(path), WriterOptions());
  absl::Status thrown = writer.Run([](Database& db) -> absl::Status {
    HLAB_RETURN_IF_ERROR(Insert("before-throw", 1)(db));
    throw std::runtime_error("boom");
  });
  EXPECT_EQ(thrown.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(writer.Run(Insert("after", 2)).ok());
  EXPECT_EQ(CountRows(path), 1);
}

TEST(StoreWriterTest, ShutdownDrainsTheQueueAndRefusesLaterWrites) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  std::vector<std::future<absl::Status>> pending;
  {
    Writer writer(OpenWithTable(path), WriterOptions());
    absl::Notification entered, release;
    pending.push_back(writer.Submit([&](Database&) {
      entered.Notify();
      release.WaitForNotification();
      return absl::OkStatus();
    }));
    entered.WaitForNotification();
    for (int i = 0; i < 50; ++i) {
      pending.push_back(writer.Submit(Insert("k" + std::to_string(i), i)));
    }
    std::thread closer([&] { writer.Shutdown(); });
    release.Notify();
    closer.join();
    EXPECT_EQ(writer.Run(Insert("late", 0)).code(),
              absl::StatusCode::kCancelled);
  }
  for (auto& f : pending) EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(CountRows(path), 50);
}

// SubmitAsync: completions run on the completer thread, not the writer's,
// after the commit (the row is readable from another connection), in commit
// order; a slow completion does not hold up the next commit; Shutdown runs
// every completion still pending.
TEST(StoreWriterTest, AsyncCompletionsRunOffTheWriterThreadInOrder) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  absl::Mutex mu;
  std::vector<int> order;                           // GUARDED_BY(mu)
  std::vector<std::thread::id> completion_threads;  // GUARDED_BY(mu)
  int visible = 0;  // GUARDED_BY(mu): completions whose row was readable
  std::thread::id writer_thread;
  absl::Notification slow_entered, slow_release;
  constexpr int kOps = 20;
  {
    Writer writer(OpenWithTable(path), WriterOptions());
    ASSERT_TRUE(writer
                    .Run([&](Database&) {
                      writer_thread = std::this_thread::get_id();
                      return absl::OkStatus();
                    })
                    .ok());
    // The first completion blocks until the writer has committed an op
    // submitted after it: the writer does not wait for its completions.
    writer.SubmitAsync(Insert("k0", 0), [&](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      slow_entered.Notify();
      slow_release.WaitForNotification();
      absl::MutexLock lock(&mu);
      order.push_back(0);
      completion_threads.push_back(std::this_thread::get_id());
    });
    slow_entered.WaitForNotification();
    EXPECT_TRUE(writer.Run(Insert("sync", -1)).ok());
    for (int i = 1; i < kOps; ++i) {
      const std::string key = "k" + std::to_string(i);
      writer.SubmitAsync(Insert(key, i), [&, i, key](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        auto reader = Database::Open(path, Database::Mode::kReadOnly);
        ASSERT_TRUE(reader.ok());
        auto st = (*reader)->Prepare("SELECT count(*) FROM kv WHERE k = ?");
        ASSERT_TRUE(st.ok());
        st->Bind(1, key);
        ASSERT_TRUE(*st->Step());
        absl::MutexLock lock(&mu);
        visible += static_cast<int>(st->ColumnInt(0));
        order.push_back(i);
        completion_threads.push_back(std::this_thread::get_id());
      });
    }
    slow_release.Notify();
    // The destructor's Shutdown drains the writer and then the completer.
  }
  absl::MutexLock lock(&mu);
  ASSERT_EQ(order.size(), static_cast<size_t>(kOps));
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(visible, kOps - 1);
  for (const std::thread::id& id : completion_threads) {
    EXPECT_NE(id, writer_thread);
  }
  EXPECT_EQ(CountRows(path), kOps + 1);
}

TEST(StoreWriterTest, AsyncSubmitAfterShutdownIsCancelledAtOnce) {
  TempDir dir;
  Writer writer(OpenWithTable(dir.File("w.db")), WriterOptions());
  writer.Shutdown();
  absl::Status status;
  writer.SubmitAsync(Insert("late", 0), [&](absl::Status s) { status = s; });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
}

// ---- Precedence: lease-critical writes ahead of bulk ones

// Writes run on the writer thread one at a time: `ran` (read once the
// writer is gone) says in which order; `sizes` how many each commit held.
struct Recorder {
  std::vector<std::string> ran;
  std::vector<int> sizes;

  WriterOptions Options() {
    WriterOptions options;
    options.on_commit = [this](double, int ops) { sizes.push_back(ops); };
    return options;
  }
  WriteOp Op(const std::string& name) {
    return [this, name](Database&) {
      ran.push_back(name);
      return absl::OkStatus();
    };
  }
  // An op that holds the writer until `release` (after telling `entered`).
  WriteOp Hold(const std::string& name, absl::Notification* entered,
               absl::Notification* release) {
    return [this, name, entered, release](Database&) {
      ran.push_back(name);
      entered->Notify();
      release->WaitForNotification();
      return absl::OkStatus();
    };
  }
};

TEST(StoreWriterTest, LeaseCriticalWritesCommitAheadOfQueuedBulkWrites) {
  TempDir dir;
  Recorder r;
  std::vector<std::future<absl::Status>> pending;
  int64_t lease_only_commits = 0;
  {
    Writer writer(OpenWithTable(dir.File("w.db")), r.Options());
    absl::Notification entered, release;
    pending.push_back(writer.Submit(r.Hold("hold", &entered, &release)));
    entered.WaitForNotification();
    for (int i = 0; i < 5; ++i) {
      pending.push_back(writer.Submit(r.Op("b" + std::to_string(i))));
    }
    pending.push_back(
        writer.Submit(r.Op("heartbeat"), WriteOrder::LeaseCritical()));
    pending.push_back(writer.Submit(r.Op("b5")));
    release.Notify();
    for (auto& f : pending) EXPECT_TRUE(f.get().ok());
    lease_only_commits = writer.stats().lease_only_commits;
  }
  EXPECT_EQ(r.ran, (std::vector<std::string>{"hold", "heartbeat", "b0", "b1",
                                             "b2", "b3", "b4", "b5"}));
  // The heartbeat in a commit of its own, then the bulk writes together.
  EXPECT_EQ(r.sizes, (std::vector<int>{1, 1, 6}));
  EXPECT_EQ(lease_only_commits, 1);
}

// A commit's bulk part holds at most max_batch_rows rows (WriteOrder::rows),
// so that a heartbeat waits for a bounded commit; a write larger than the
// bound commits alone.
TEST(StoreWriterTest, ACommitsBulkPartIsBoundedByRows) {
  TempDir dir;
  Recorder r;
  std::vector<std::future<absl::Status>> pending;
  {
    WriterOptions options = r.Options();
    options.max_batch_rows = 250;
    Writer writer(OpenWithTable(dir.File("w.db")), options);
    absl::Notification entered, release;
    pending.push_back(writer.Submit(r.Hold("hold", &entered, &release)));
    entered.WaitForNotification();
    for (int i = 0; i < 5; ++i) {  // 100 rows each: two fit, a third not
      pending.push_back(writer.Submit(r.Op("m" + std::to_string(i)),
                                      WriteOrder::Bulk("t", 100)));
    }
    pending.push_back(writer.Submit(r.Op("big"), WriteOrder::Bulk("u", 900)));
    pending.push_back(writer.Submit(r.Op("small"), WriteOrder::Bulk("u", 10)));
    release.Notify();
    for (auto& f : pending) EXPECT_TRUE(f.get().ok());
  }
  EXPECT_EQ(r.ran, (std::vector<std::string>{"hold", "m0", "m1", "m2", "m3",
                                             "m4", "big", "small"}));
  EXPECT_EQ(r.sizes, (std::vector<int>{1, 2, 2, 1, 1, 1}));
}

// A lease-critical write that arrives during a lease-only commit joins the
// next commit with the bulk writes (ahead of them), instead of taking
// another commit of its own: bulk writes wait for at most one.
TEST(StoreWriterTest, BulkWritesWaitForAtMostOneLeaseOnlyCommit) {
  TempDir dir;
  Recorder r;
  std::vector<std::future<absl::Status>> pending;
  {
    Writer writer(OpenWithTable(dir.File("w.db")), r.Options());
    absl::Notification entered, release, lease_entered, lease_release;
    pending.push_back(writer.Submit(r.Hold("hold", &entered, &release)));
    entered.WaitForNotification();
    pending.push_back(writer.Submit(r.Op("b0")));
    pending.push_back(writer.Submit(r.Op("b1")));
    pending.push_back(
        writer.Submit(r.Hold("lease0", &lease_entered, &lease_release),
                      WriteOrder::LeaseCritical()));
    release.Notify();
    lease_entered.WaitForNotification();
    pending.push_back(
        writer.Submit(r.Op("lease1"), WriteOrder::LeaseCritical()));
    lease_release.Notify();
    for (auto& f : pending) EXPECT_TRUE(f.get().ok());
  }
  EXPECT_EQ(r.ran,
            (std::vector<std::string>{"hold", "lease0", "lease1", "b0", "b1"}));
  EXPECT_EQ(r.sizes, (std::vector<int>{1, 1, 3}));
}

// Writes for one task keep their order: a lease-critical write (a
// completion) takes the bulk writes of its task queued before it (metric
// batches) along, ahead of it; those of other tasks, and of its task
// queued after it, wait.
TEST(StoreWriterTest, ALeaseCriticalWriteTakesItsTasksEarlierWritesAlong) {
  TempDir dir;
  Recorder r;
  std::vector<std::future<absl::Status>> pending;
  {
    Writer writer(OpenWithTable(dir.File("w.db")), r.Options());
    absl::Notification entered, release;
    pending.push_back(writer.Submit(r.Hold("hold", &entered, &release)));
    entered.WaitForNotification();
    pending.push_back(writer.Submit(r.Op("x1"), WriteOrder::Bulk("x")));
    pending.push_back(writer.Submit(r.Op("y1"), WriteOrder::Bulk("y")));
    pending.push_back(writer.Submit(r.Op("x2"), WriteOrder::Bulk("x")));
    pending.push_back(writer.Submit(r.Op("plain")));
    pending.push_back(
        writer.Submit(r.Op("complete x"), WriteOrder::LeaseCritical("x")));
    pending.push_back(writer.Submit(r.Op("x3"), WriteOrder::Bulk("x")));
    release.Notify();
    for (auto& f : pending) EXPECT_TRUE(f.get().ok());
  }
  EXPECT_EQ(r.ran, (std::vector<std::string>{"hold", "x1", "x2", "complete x",
                                             "y1", "plain", "x3"}));
  EXPECT_EQ(r.sizes, (std::vector<int>{1, 3, 3}));
}

// Through the store: a metric batch queued before its task's completion
// commits before it (else its fencing would refuse it), though the
// completion is lease-critical and the batch is not.
TEST(StoreWriterTest, AMetricBatchCommitsBeforeItsTasksCompletion) {
  testing::Fixture f;
  ASSERT_TRUE(
      f.store->LeaseTask("r1.train", "w1", testing::T(1), absl::Seconds(30))
          .ok());
  absl::Notification entered, release;
  std::thread holder([&] {
    EXPECT_TRUE(f.store
                    ->RunOnWriterForTesting([&](Database&) {
                      entered.Notify();
                      release.WaitForNotification();
                      return absl::OkStatus();
                    })
                    .ok());
  });
  entered.WaitForNotification();
  MetricPoint point;
  point.name = "train_loss";
  point.step = 1;
  point.value = 2.5;
  absl::Notification metrics_done;
  absl::Status metrics_status;
  int64_t metrics_added = 0;
  f.store->RecordMetricsAsync("r1.train", 1, {point}, "w1", testing::T(2),
                              [&](absl::Status s, int64_t added) {
                                metrics_status = s;
                                metrics_added = added;
                                metrics_done.Notify();
                              });
  absl::Status completed;
  std::thread completer(
      [&] { completed = f.store->CompleteTask("r1.train", 1, testing::T(3)); });
  // Both queued behind the held writer (no clock: the queue says so).
  while (f.store->writer_stats().queue_depth < 2) std::this_thread::yield();
  release.Notify();
  holder.join();
  completer.join();
  metrics_done.WaitForNotification();
  EXPECT_TRUE(metrics_status.ok()) << metrics_status;
  EXPECT_EQ(metrics_added, 1);
  EXPECT_TRUE(completed.ok()) << completed;
  EXPECT_EQ(f.store->ReadMetrics("r1", "train_loss")->size(), 1u);
  EXPECT_EQ(f.store->GetTask("r1.train")->state, TaskState::kSucceeded);
}

TEST(StoreWriterTest, ShutdownDrainsBothQueues) {
  TempDir dir;
  const std::string path = dir.File("w.db");
  std::vector<std::future<absl::Status>> pending;
  {
    Writer writer(OpenWithTable(path), WriterOptions());
    absl::Notification entered, release;
    pending.push_back(writer.Submit([&](Database&) {
      entered.Notify();
      release.WaitForNotification();
      return absl::OkStatus();
    }));
    entered.WaitForNotification();
    for (int i = 0; i < 20; ++i) {
      const WriteOrder order =
          i % 3 == 0 ? WriteOrder::LeaseCritical() : WriteOrder::Bulk("t");
      pending.push_back(
          writer.Submit(Insert("k" + std::to_string(i), i), order));
    }
    std::thread closer([&] { writer.Shutdown(); });
    release.Notify();
    closer.join();
    EXPECT_EQ(writer.Run(WriteOrder::LeaseCritical(), Insert("late", 0)).code(),
              absl::StatusCode::kCancelled);
  }
  for (auto& f : pending) EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(CountRows(path), 20);
}

}  // namespace
}  // namespace hlab::store
