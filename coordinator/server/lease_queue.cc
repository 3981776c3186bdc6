#include "coordinator/server/lease_queue.h"

#include <utility>
#include <vector>

#include "common/status_macros.h"

namespace hlab::coordinator {

LeaseQueue::LeaseQueue(store::Store* store, int window)
    : store_(store), window_(window > 0 ? window : kDefaultWindow) {}

bool LeaseQueue::LoadDue(absl::Time now) const {
  if (!loaded_ || reload_) return true;
  if (now - loaded_at_ >= kMaxAge) return true;
  return backoff_end_.has_value() && now >= *backoff_end_;
}

absl::Status LeaseQueue::Refresh(absl::Time now) {
  if (LoadDue(now)) return Load(now);
  if (store_->leasable_generation() == generation_) return absl::OkStatus();
  store::Store::LeasableChanges changes =
      store_->LeasableChangesSince(generation_);
  if (!changes.dependents) return Load(now);
  return AddUnblocked(now, changes.generation, *changes.dependents);
}

absl::Status LeaseQueue::Load(absl::Time now) {
  // Read the generation first: a change committed during the read moves it
  // again, and the next claim reloads.
  const int64_t generation = store_->leasable_generation();
  const int limit = window_ + static_cast<int>(claimed_.size());
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Task> tasks,
                        store_->NextLeasableTasks(now, limit));
  HLAB_ASSIGN_OR_RETURN(backoff_end_, store_->NextBackoffEnd(now));
  complete_ = static_cast<int>(tasks.size()) < limit;
  last_loaded_.reset();
  if (!complete_) last_loaded_ = tasks.back();
  candidates_.clear();
  for (store::Task& task : tasks) {
    // A claimed task is still PENDING until its LeaseTask commits.
    if (claimed_.count(task.spec.id) > 0) continue;
    candidates_.push_back(std::move(task));
  }
  generation_ = generation;
  loaded_at_ = now;
  loaded_ = true;
  reload_ = false;
  leased_since_load_ = 0;
  ++stats_.loads;
  return absl::OkStatus();
}

absl::Status LeaseQueue::AddUnblocked(
    absl::Time now, int64_t generation,
    const std::vector<std::string>& dependents) {
  // Read after the generation: what the completions up to it did is
  // committed, so a dependent they made leasable reads as leasable.
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Task> tasks,
                        store_->UnblockedTasks(dependents));
  for (store::Task& task : tasks) {
    const std::string& id = task.spec.id;
    // Claimed: PENDING until its LeaseTask commits; leased since: no
    // longer PENDING, so not read.
    if (claimed_.count(id) > 0) continue;
    if (task.not_before > now) {
      // Leasable once its backoff ends: the load then lists it.
      if (!backoff_end_ || task.not_before < *backoff_end_) {
        backoff_end_ = task.not_before;
      }
      continue;
    }
    // Beyond the rows the last load got: so are others that the store has
    // and the cache does not, and a later load reaches them in order.
    if (last_loaded_ && store::LeasesBefore(*last_loaded_, task)) continue;
    auto place = candidates_.begin();
    bool cached = false;
    for (auto it = candidates_.begin(); it != candidates_.end(); ++it) {
      if (it->spec.id == id) {
        cached = true;  // the load read it already
        break;
      }
      if (store::LeasesBefore(*it, task)) place = it + 1;
    }
    if (!cached) candidates_.insert(place, std::move(task));
  }
  generation_ = generation;
  ++stats_.additions;
  return absl::OkStatus();
}

std::optional<store::Task> LeaseQueue::Take(
    const std::function<bool(const store::Task&)>& accept) {
  for (auto it = candidates_.begin(); it != candidates_.end(); ++it) {
    if (!accept(*it)) continue;
    store::Task task = std::move(*it);
    candidates_.erase(it);
    claimed_.insert(task.spec.id);
    ++stats_.claims;
    return task;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<store::Task>> LeaseQueue::Claim(
    absl::Time now, const std::function<bool(const store::Task&)>& accept) {
  absl::MutexLock lock(&mu_);
  HLAB_RETURN_IF_ERROR(Refresh(now));
  std::optional<store::Task> task = Take(accept);
  // The window is used up for this caller, the store has more, and what
  // the window held has changed since: look at the next ones.
  if (!task && !complete_ && leased_since_load_ > 0) {
    HLAB_RETURN_IF_ERROR(Load(now));
    task = Take(accept);
  }
  return task;
}

void LeaseQueue::Release(const std::string& task_id, bool leased) {
  absl::MutexLock lock(&mu_);
  if (claimed_.erase(task_id) == 0) return;
  if (leased) {
    ++leased_since_load_;
    ++stats_.leased;
  } else {
    reload_ = true;
    ++stats_.not_leased;
  }
}

LeaseQueue::Stats LeaseQueue::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats = stats_;
  stats.candidates = static_cast<int64_t>(candidates_.size());
  stats.claimed = static_cast<int64_t>(claimed_.size());
  return stats;
}

}  // namespace hlab::coordinator
