#include "coordinator/server/lease_queue.h"

#include <utility>
#include <vector>

#include "common/status_macros.h"

namespace hlab::coordinator {

LeaseQueue::LeaseQueue(store::Store* store, int window)
    : store_(store), window_(window > 0 ? window : kDefaultWindow) {}

bool LeaseQueue::Stale(absl::Time now) const {
  if (!loaded_ || reload_) return true;
  if (store_->leasable_generation() != generation_) return true;
  if (now - loaded_at_ >= kMaxAge) return true;
  return backoff_end_.has_value() && now >= *backoff_end_;
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
  if (Stale(now)) HLAB_RETURN_IF_ERROR(Load(now));
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
