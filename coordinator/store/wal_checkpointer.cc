#include "coordinator/store/wal_checkpointer.h"
#include <pthread.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "common/status_macros.h"

namespace hlab::store {
namespace {

// Passes after one that left frames behind (the writer appended meanwhile),
// so that a busy writer still sees the WAL start over.
constexpr int kMaxPasses = 4;

// The WAL's size, in thresholds, at which the writer checkpoints itself.
constexpr int kBackstopFactor = 4;

}  // namespace

absl::StatusOr<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Start(
    const std::string& path, int threshold_pages) {
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                        Database::Open(path, Database::Mode::kReadWrite));
  // This connection never writes; it must not checkpoint on its own either.
  HLAB_RETURN_IF_ERROR(db->Exec("PRAGMA wal_autocheckpoint = 0"));
  return std::unique_ptr<WalCheckpointer>(
      new WalCheckpointer(std::move(db), threshold_pages));
}

WalCheckpointer::WalCheckpointer(std::unique_ptr<Database> db,
                                 int threshold_pages)
    : threshold_pages_(threshold_pages), db_(std::move(db)) {
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "hlab-checkpoint");
}

WalCheckpointer::~WalCheckpointer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  sqlite3_interrupt(db_->raw());
  thread_.join();
}

int WalCheckpointer::Hook(void* self, sqlite3* db, const char* /*name*/,
                          int wal_pages) {
  auto* checkpointer = static_cast<WalCheckpointer*>(self);
  {
    absl::MutexLock lock(&checkpointer->mu_);
    checkpointer->stats_.largest_wal_pages =
        std::max<int64_t>(checkpointer->stats_.largest_wal_pages, wal_pages);
    if (wal_pages >= checkpointer->threshold_pages_) checkpointer->due_ = true;
  }
  // The backstop: under commits back to back (a metric flood) the thread's
  // checkpoints may never catch up with the WAL's end, and the WAL starts
  // over only when one does. At kBackstopFactor times the threshold the
  // writer checkpoints itself, as SQLite's automatic checkpoint would: its
  // next commit then starts the WAL over.
  if (wal_pages >= kBackstopFactor * checkpointer->threshold_pages_) {
    const auto start = std::chrono::steady_clock::now();
    const int rc = sqlite3_wal_checkpoint_v2(
        db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    absl::MutexLock lock(&checkpointer->mu_);
    ++checkpointer->stats_.writer_checkpoints;
    checkpointer->stats_.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    // BUSY: the thread's checkpoint is running, and goes on.
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) ++checkpointer->stats_.failures;
  }
  return SQLITE_OK;
}

CheckpointerStats WalCheckpointer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void WalCheckpointer::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WalCheckpointer* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
            return c->due_ || c->stopping_;
          },
          this));
      if (stopping_) return;
      due_ = false;
    }
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      int wal_pages = 0, copied = 0;
      const auto start = std::chrono::steady_clock::now();
      const int rc = sqlite3_wal_checkpoint_v2(
          db_->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &wal_pages, &copied);
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - start)
                                 .count();
      absl::MutexLock lock(&mu_);
      ++stats_.checkpoints;
      stats_.seconds += seconds;
      // BUSY: the writer's backstop checkpoint is running; it does the work.
      if (rc == SQLITE_BUSY) break;
      if (rc != SQLITE_OK) {
        // The writer meets a storage failure on its own writes and says so;
        // here it is logged once per failed pass.
        if (!stopping_) {
          HLAB_LOG(WARNING)
              << "WAL checkpoint failed: " << sqlite3_errmsg(db_->raw());
        }
        ++stats_.failures;
        break;
      }
      // `copied` counts every frame in the database so far, by any pass.
      // Done when every frame is in the database, or when a reader's
      // snapshot holds the rest back (another pass would copy nothing).
      if (stopping_ || copied >= wal_pages || copied == 0) break;
    }
  }
}

}  // namespace hlab::store
