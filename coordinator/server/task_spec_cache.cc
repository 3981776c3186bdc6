#include "coordinator/server/task_spec_cache.h"

#include <utility>

#include "common/status_macros.h"

namespace hlab::coordinator {

TaskSpecCache::TaskSpecCache(store::Store* store, size_t capacity)
    : store_(store), capacity_(capacity > 0 ? capacity : 1) {}

absl::StatusOr<std::shared_ptr<const store::Task>> TaskSpecCache::Get(
    const std::string& task_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(task_id);
    if (it != tasks_.end()) return it->second;
  }
  // Read outside the lock: two readers of the same miss store the same spec.
  HLAB_ASSIGN_OR_RETURN(store::Task task, store_->GetTask(task_id));
  auto shared = std::make_shared<const store::Task>(std::move(task));
  absl::MutexLock lock(&mu_);
  Insert(shared);
  return shared;
}

std::shared_ptr<const store::Task> TaskSpecCache::Cached(
    const std::string& task_id) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  return it == tasks_.end() ? nullptr : it->second;
}

void TaskSpecCache::Remember(const store::Task& task) {
  auto shared = std::make_shared<const store::Task>(task);
  absl::MutexLock lock(&mu_);
  Insert(std::move(shared));
}

void TaskSpecCache::Forget(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  tasks_.erase(task_id);
}

size_t TaskSpecCache::size() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void TaskSpecCache::Insert(std::shared_ptr<const store::Task> task) {
  if (tasks_.size() >= capacity_ && tasks_.count(task->spec.id) == 0) {
    tasks_.clear();
  }
  tasks_[task->spec.id] = std::move(task);
}

}  // namespace hlab::coordinator
