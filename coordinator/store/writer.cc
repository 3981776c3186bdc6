#include "coordinator/store/writer.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/store_unavailable.h"

namespace hlab::store {
namespace {

// Runs a statement without results through the connection's statement cache
// (the writer runs SAVEPOINT/RELEASE for every operation).
absl::Status Exec(Database& db, const char* sql) {
  absl::StatusOr<Statement> st = db.Prepare(sql);
  if (!st.ok()) return st.status();
  return st->Run();
}

// Runs one operation; an exception (bad_alloc, a bug) fails only that op.
absl::Status RunOp(const WriteOp& op, Database& db) {
  try {
    return op(db);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("store write operation threw: ", e.what()));
  } catch (...) {
    return absl::InternalError("store write operation threw");
  }
}

// The refusal of a write the storage could not take (`failure`: the
// database's Unavailable, naming the file and the cause).
absl::Status NotWritable(const absl::Status& failure) {
  return absl::UnavailableError(
      absl::StrCat(kStoreNotWritable, ": ", failure.message(),
                   "; this write was not stored (reads still work; writes "
                   "resume by themselves once the storage can be written)"));
}

}  // namespace

Writer::Writer(std::unique_ptr<Database> db, WriterOptions options)
    : db_(std::move(db)), options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
  completer_ = std::thread([this] { CompleterLoop(); });
}

Writer::~Writer() { Shutdown(); }

void Writer::Enqueue(Pending pending) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      if (!pending.order.lease_critical) {
        queue_.push_back(std::move(pending));
        return;
      }
      // The bulk writes of its task queued before it go first, with it.
      if (!pending.order.task_id.empty()) {
        for (auto it = queue_.begin(); it != queue_.end();) {
          if (it->order.task_id == pending.order.task_id) {
            lease_queue_.push_back(std::move(*it));
            it = queue_.erase(it);
          } else {
            ++it;
          }
        }
      }
      lease_queue_.push_back(std::move(pending));
      return;
    }
  }
  pending.done(absl::CancelledError("store writer is shut down"));
}

void Writer::Submit(WriteOp op, WriteDone done, WriteOrder order) {
  Pending pending;
  pending.op = std::move(op);
  pending.done = std::move(done);
  pending.order = std::move(order);
  Enqueue(std::move(pending));
}

void Writer::SubmitAsync(WriteOp op, WriteDone done, WriteOrder order) {
  Pending pending;
  pending.op = std::move(op);
  pending.done = std::move(done);
  pending.done_on_completer = true;
  pending.order = std::move(order);
  Enqueue(std::move(pending));
}

std::future<absl::Status> Writer::Submit(WriteOp op, WriteOrder order) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> future = promise->get_future();
  Submit(
      std::move(op),
      [promise](absl::Status status) { promise->set_value(std::move(status)); },
      std::move(order));
  return future;
}

absl::Status Writer::Run(WriteOrder order, WriteOp op) {
  return Submit(std::move(op), std::move(order)).get();
}

absl::Status Writer::RunOutsideTransaction(WriteOp op) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> future = promise->get_future();
  Pending pending;
  pending.op = std::move(op);
  pending.done = [promise](absl::Status status) {
    promise->set_value(std::move(status));
  };
  pending.outside_transaction = true;
  Enqueue(std::move(pending));
  return future.get();
}

void Writer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // The writer thread has handed over its last completions.
  {
    absl::MutexLock lock(&completer_mu_);
    completer_stopping_ = true;
  }
  if (completer_.joinable()) completer_.join();
}

WriterStats Writer::stats() const {
  absl::MutexLock lock(&mu_);
  WriterStats stats = stats_;
  stats.queue_depth = static_cast<int64_t>(queue_.size() + lease_queue_.size());
  return stats;
}

bool Writer::ReadyOrStopping() const {
  return stopping_ || !queue_.empty() || !lease_queue_.empty();
}

bool Writer::CompletionsOrStopping() const {
  return completer_stopping_ || !completions_.empty();
}

void Writer::CompleterLoop() {
  std::vector<Completion> batch;
  while (true) {
    {
      absl::MutexLock lock(&completer_mu_);
      completer_mu_.Await(
          absl::Condition(this, &Writer::CompletionsOrStopping));
      if (completions_.empty()) return;  // stopping, and drained
      batch.swap(completions_);
    }
    for (Completion& c : batch) c.done(std::move(c.status));
    batch.clear();
  }
}

std::deque<Writer::Pending> Writer::TakeBatch() {
  std::deque<Pending> batch;
  const size_t max_ops =
      static_cast<size_t>(std::max(options_.max_batch_ops, 1));
  // Lease-critical writes alone when bulk ones wait, unless the last batch
  // already was such a one (the bulk writes' turn: no starvation).
  const bool lease_only =
      !lease_queue_.empty() && !queue_.empty() && !last_lease_only_;
  while (!lease_queue_.empty() && batch.size() < max_ops) {
    batch.push_back(std::move(lease_queue_.front()));
    lease_queue_.pop_front();
  }
  if (lease_only) {
    last_lease_only_ = true;
    stats_.lease_only_commits += 1;
    return batch;
  }
  last_lease_only_ = false;
  // Bulk writes only after every lease-critical one queued before them.
  if (!lease_queue_.empty() || queue_.empty()) return batch;
  if (batch.empty() && queue_.front().outside_transaction) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
    return batch;
  }
  int64_t rows = 0;
  bool any_bulk = false;
  while (!queue_.empty() && !queue_.front().outside_transaction &&
         batch.size() < max_ops &&
         (!any_bulk ||
          rows + queue_.front().order.rows <= options_.max_batch_rows)) {
    rows += queue_.front().order.rows;
    any_bulk = true;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void Writer::Loop() {
  while (true) {
    std::deque<Pending> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Writer::ReadyOrStopping));
      if (queue_.empty() && lease_queue_.empty()) return;  // stopping, drained
      batch = TakeBatch();
    }
    if (batch.front().outside_transaction) {
      (void)db_->TakeStorageFailure();  // not this op's
      absl::Status status = RunOp(batch.front().op, *db_);
      BatchOutcome outcome;
      outcome.storage_failure = db_->TakeStorageFailure();
      if (!outcome.storage_failure.ok()) {
        status = NotWritable(outcome.storage_failure);
        NoteStorage(outcome);
      }
      batch.front().done(std::move(status));
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    BatchOutcome outcome;
    std::vector<absl::Status> statuses = Execute(batch, &outcome);
    NoteStorage(outcome);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    int failed = 0;
    for (const absl::Status& s : statuses) failed += s.ok() ? 0 : 1;
    {
      absl::MutexLock lock(&mu_);
      stats_.commits += 1;
      stats_.ops += static_cast<int64_t>(batch.size());
      stats_.failed_ops += failed;
      stats_.max_batch = std::max<int64_t>(stats_.max_batch,
                                           static_cast<int64_t>(batch.size()));
    }
    if (options_.on_commit) {
      options_.on_commit(seconds, static_cast<int>(batch.size()));
    }
    // Completions for the completer first, in one hand-over, so it works
    // while this thread runs its own and starts the next commit.
    std::vector<Completion> handed;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].done_on_completer && batch[i].done) {
        handed.push_back({std::move(batch[i].done), std::move(statuses[i])});
      }
    }
    if (!handed.empty()) {
      absl::MutexLock lock(&completer_mu_);
      if (completions_.empty()) {
        completions_.swap(handed);
      } else {
        for (Completion& c : handed) completions_.push_back(std::move(c));
      }
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!batch[i].done_on_completer && batch[i].done) {
        batch[i].done(std::move(statuses[i]));
      }
    }
  }
}

void Writer::NoteStorage(const BatchOutcome& outcome) {
  bool writable;
  int64_t failures = 0;
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    if (!outcome.storage_failure.ok()) {
      changed = stats_.writable;
      stats_.writable = false;
      stats_.storage_failures += 1;
      stats_.storage_error = std::string(outcome.storage_failure.message());
      failures_since_writable_ += 1;
    } else if (outcome.wrote && !stats_.writable) {
      changed = true;
      stats_.writable = true;
      stats_.storage_error.clear();
      failures = failures_since_writable_;
      failures_since_writable_ = 0;
    } else {
      return;
    }
    writable = stats_.writable;
  }
  if (changed && !writable) {
    HLAB_LOG(ERROR) << "store: " << outcome.storage_failure.message()
                    << "; writes are refused with UNAVAILABLE until it can "
                       "be written again, reads go on";
  } else if (changed) {
    HLAB_LOG(WARNING) << "store: the database is written again, after "
                      << failures << " failed write(s)";
  }
  if (options_.on_storage) options_.on_storage(writable);
}

std::vector<absl::Status> Writer::Execute(std::deque<Pending>& batch,
                                          BatchOutcome* outcome) {
  std::vector<absl::Status> statuses(batch.size());
  // Rows each op changed (counted if it ends OK: then it committed).
  std::vector<int64_t> changes(batch.size(), 0);
  (void)db_->TakeStorageFailure();  // not this batch's
  // The refusal for a storage failure met since the last call; OK if none.
  auto refusal = [&]() -> absl::Status {
    absl::Status failure = db_->TakeStorageFailure();
    if (failure.ok()) return failure;
    if (outcome->storage_failure.ok()) outcome->storage_failure = failure;
    return NotWritable(failure);
  };
  absl::Status begin = Exec(*db_, "BEGIN IMMEDIATE");
  if (!begin.ok()) {
    absl::Status refused = refusal();
    for (auto& s : statuses) s = refused.ok() ? begin : refused;
    return statuses;
  }
  // Index of the first op whose work is still inside the open transaction.
  size_t first_in_txn = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t changes_before = db_->total_changes();
    absl::Status status = Exec(*db_, "SAVEPOINT op");
    if (status.ok()) {
      status = RunOp(batch[i].op, *db_);
      // Also when the op went on after the failure: its work is undone.
      absl::Status refused = refusal();
      if (!refused.ok()) status = refused;
      if (status.ok()) status = Exec(*db_, "RELEASE op");
      if (!status.ok() && db_->InTransaction()) {
        // Undo this op's work (also when RELEASE itself failed).
        (void)Exec(*db_, "ROLLBACK TO op");
        (void)Exec(*db_, "RELEASE op");
      }
    }
    absl::Status refused = refusal();
    if (!refused.ok()) status = refused;
    changes[i] = db_->total_changes() - changes_before;
    statuses[i] = std::move(status);
    if (!db_->InTransaction()) {
      // SQLite rolled the whole transaction back on its own (SQLITE_FULL,
      // IOERR): the ops before this one are lost too. Fail them, start over.
      absl::Status lost = IsStoreNotWritable(statuses[i])
                              ? statuses[i]
                              : absl::AbortedError(absl::StrCat(
                                    "transaction rolled back by SQLite: ",
                                    statuses[i].message()));
      for (size_t j = first_in_txn; j < i; ++j) {
        if (statuses[j].ok()) statuses[j] = lost;
      }
      if (statuses[i].ok()) statuses[i] = lost;
      first_in_txn = i + 1;
      absl::Status again = Exec(*db_, "BEGIN IMMEDIATE");
      if (!again.ok()) {
        absl::Status refused_again = refusal();
        if (!refused_again.ok()) again = refused_again;
        for (size_t j = i + 1; j < batch.size(); ++j) statuses[j] = again;
        return statuses;
      }
    }
  }
  absl::Status commit = Exec(*db_, "COMMIT");
  if (!commit.ok()) {
    absl::Status refused = refusal();
    if (!refused.ok()) commit = refused;
    if (refused.ok()) {
      HLAB_LOG(ERROR) << "store: commit failed: " << commit;
    }
    if (db_->InTransaction()) (void)Exec(*db_, "ROLLBACK");
    (void)refusal();  // a failed ROLLBACK's, the same cause
    for (size_t j = first_in_txn; j < batch.size(); ++j) {
      if (statuses[j].ok()) statuses[j] = commit;
    }
    return statuses;
  }
  for (size_t j = first_in_txn; j < batch.size(); ++j) {
    if (statuses[j].ok() && changes[j] > 0) outcome->wrote = true;
  }
  return statuses;
}

}  // namespace hlab::store
