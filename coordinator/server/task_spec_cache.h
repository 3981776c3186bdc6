// TaskSpecCache: what the worker API needs to know about a task that never
// changes once it is stored (its id, kind, run, payload, resources), cached
// by task id with its proto, so that ReportMetrics and Heartbeat neither
// read the task nor parse its payload per call. Only immutable fields are
// meant to be used from an entry (of the row and of the proto): state, attempt
// and lease are a snapshot of when the entry was filled, and fencing is the
// store's (Store::RecordMetrics checks the attempt and the worker).
//
// Bounded: past `capacity` entries the cache is emptied and fills again.
//
// Thread-safety: thread-safe.
//
//   TaskSpecCache specs(store);
//   specs.Remember(leased_task);          // when it is leased
//   HLAB_ASSIGN_OR_RETURN(std::shared_ptr<const TaskSpec> spec,
//                         specs.Get(task_id));  // NotFound: unknown task
//   specs.Forget(task_id);                // when it ends
#ifndef HLAB_COORDINATOR_SERVER_TASK_SPEC_CACHE_H_
#define HLAB_COORDINATOR_SERVER_TASK_SPEC_CACHE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/store/store.h"
#include "hlab/v1/task.pb.h"

namespace hlab::coordinator {

// A cached task: the stored row and its proto, converted once
// (ToProtoTask parses the payload for the run ids and branch points that
// heartbeats and a trunk's metric batches need).
struct TaskSpec {
  store::Task task;
  hlab::v1::Task proto;
};

class TaskSpecCache {
 public:
  static constexpr size_t kDefaultCapacity = 8192;

  // `store` must outlive the cache.
  explicit TaskSpecCache(store::Store* store,
                         size_t capacity = kDefaultCapacity);
  TaskSpecCache(const TaskSpecCache&) = delete;
  TaskSpecCache& operator=(const TaskSpecCache&) = delete;

  // The task, from the cache or read from the store (then cached).
  // NotFound for an unknown task; other store read errors as they are.
  absl::StatusOr<std::shared_ptr<const TaskSpec>> Get(
      const std::string& task_id);
  // The task if it is cached, without reading the store; null otherwise.
  std::shared_ptr<const TaskSpec> Cached(const std::string& task_id) const;
  // Caches a task just read (e.g. the one leased); returns its entry.
  std::shared_ptr<const TaskSpec> Remember(const store::Task& task);
  // Drops a task (finished: its id is no longer expected).
  void Forget(const std::string& task_id);

  size_t size() const;

 private:
  void Insert(std::shared_ptr<const TaskSpec> spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const TaskSpec>> tasks_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_TASK_SPEC_CACHE_H_
