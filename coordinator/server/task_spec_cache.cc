#include "coordinator/server/task_spec_cache.h"

#include <utility>

#include "common/status_macros.h"
#include "coordinator/planning/proto_mapping.h"

namespace hlab::coordinator {
namespace {

std::shared_ptr<const TaskSpec> MakeSpec(store::Task task) {
  auto spec = std::make_shared<TaskSpec>();
  spec->proto = ToProtoTask(task);
  spec->task = std::move(task);
  return spec;
}

}  // namespace

TaskSpecCache::TaskSpecCache(store::Store* store, size_t capacity)
    : store_(store), capacity_(capacity > 0 ? capacity : 1) {}

absl::StatusOr<std::shared_ptr<const TaskSpec>> TaskSpecCache::Get(
    const std::string& task_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = tasks_.find(task_id);
    if (it != tasks_.end()) return it->second;
  }
  // Read outside the lock: two readers of the same miss store the same spec.
  HLAB_ASSIGN_OR_RETURN(store::Task task, store_->GetTask(task_id));
  auto shared = MakeSpec(std::move(task));
  absl::MutexLock lock(&mu_);
  Insert(shared);
  return shared;
}

std::shared_ptr<const TaskSpec> TaskSpecCache::Cached(
    const std::string& task_id) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(task_id);
  return it == tasks_.end() ? nullptr : it->second;
}

std::shared_ptr<const TaskSpec> TaskSpecCache::Remember(
    const store::Task& task) {
  auto shared = MakeSpec(task);
  absl::MutexLock lock(&mu_);
  Insert(shared);
  return shared;
}

void TaskSpecCache::Forget(const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  tasks_.erase(task_id);
}

size_t TaskSpecCache::size() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void TaskSpecCache::Insert(std::shared_ptr<const TaskSpec> spec) {
  const std::string& id = spec->task.spec.id;
  if (tasks_.size() >= capacity_ && tasks_.count(id) == 0) tasks_.clear();
  tasks_[id] = std::move(spec);
}

}  // namespace hlab::coordinator
