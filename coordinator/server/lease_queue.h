// LeaseQueue: the coordinator's in-memory queue of leasable tasks. Lease
// calls claim candidates from it instead of each querying the store
// (Store::NextLeasableTasks: all columns of the PENDING tasks, a dependency
// subquery, a sort) on every long-poll step.
//
// It is a cache of the first `window` rows of NextLeasableTasks, and never
// the authority: the caller leases a claimed candidate with Store::LeaseTask,
// which checks state, dependencies and backoff in the writer's transaction
// (fencing), and reports the outcome with Release(). A claim is exclusive
// (no two callers hold the same candidate), so workers no longer race for
// the same first candidates.
//
// Before a claim the cache is brought up to date with the store. When the
// store's leasable_generation() moved only for completions
// (Store::LeasableChangesSince), the queue reads just the completed tasks'
// dependents that are leasable now (Store::UnblockedTasks) and puts each in
// its place in the lease order (store::LeasesBefore); one whose backoff
// has not ended moves the backoff end instead, and one that sorts beyond a
// window that did not hold every row is left for the load that reaches it.
// It reloads the whole window (one read) when
//   - it was never loaded (a new coordinator: restart recovery is the
//     store's state),
//   - the generation moved for anything else: tasks added, a task requeued
//     (retry, expiry, a worker that left), runs resumed or cancelled, an
//     adaptive order set, by anyone (the worker API, the client API, the
//     reaper, or code using the store directly), or for more changes than
//     the store keeps,
//   - the earliest backoff seen ended (`now` passed it),
//   - a claim ended without a lease (Release(..., false): the candidate was
//     stale or the lease failed), so nothing is ever dropped on a guess,
//   - no candidate fitted the caller, the store had more than the window,
//     and candidates were leased since the last load,
//   - it is older than kMaxAge (by `now`): a backstop for changes made
//     behind its back that move no generation (e.g. a task leased straight
//     in the store by code outside the queue, which could otherwise stay in
//     the window as a candidate no worker takes).
// So a task leasable in the store is in the cache or reaches it at the next
// claim after the change that made it leasable (at the latest kMaxAge
// later): none starves, and none is leased twice (LeaseTask). After a
// completion the cache holds exactly what a reload would, in the same
// order (lease_queue_test checks this against NextLeasableTasks).
//
// Thread-safety: thread-safe. Claim holds the queue's mutex while it reads
// the store, so concurrent callers wait for one reload instead of each
// running their own.
//
//   LeaseQueue queue(store);
//   HLAB_ASSIGN_OR_RETURN(std::optional<store::Task> task,
//                         queue.Claim(now, [](const store::Task&) {
//                           return true; }));
//   if (task) {
//     absl::StatusOr<int> attempt = store->LeaseTask(task->spec.id, ...);
//     queue.Release(task->spec.id, /*leased=*/attempt.ok());
//   }
#ifndef HLAB_COORDINATOR_SERVER_LEASE_QUEUE_H_
#define HLAB_COORDINATOR_SERVER_LEASE_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/store/store.h"

namespace hlab::coordinator {

class LeaseQueue {
 public:
  // How many candidates one load keeps (NextLeasableTasks' limit, beyond
  // those claimed at the time).
  static constexpr int kDefaultWindow = 256;
  // The oldest a load may be when a claim uses it. Every change the store
  // makes to what is leasable moves its generation, so this only bounds
  // the cost of one it missed; a reload holds every claim back.
  static constexpr absl::Duration kMaxAge = absl::Seconds(30);

  struct Stats {
    int64_t loads = 0;       // reads of the whole window
    int64_t additions = 0;   // reads of completions' dependents instead
    int64_t claims = 0;      // candidates handed out
    int64_t leased = 0;      // Release(..., true)
    int64_t not_leased = 0;  // Release(..., false)
    int64_t candidates = 0;  // waiting in the cache now
    int64_t claimed = 0;     // claimed and not released now
  };

  // `store` must outlive the queue.
  explicit LeaseQueue(store::Store* store, int window = kDefaultWindow);
  LeaseQueue(const LeaseQueue&) = delete;
  LeaseQueue& operator=(const LeaseQueue&) = delete;

  // Claims the first unclaimed candidate (the store's lease order:
  // priority DESC, then order_key or cost_flops ASC, then id)
  // that `accept` takes, reloading first if the cache is stale (see above).
  // nullopt when none fits now. A claimed task must be released with
  // Release(). Errors are the store's read errors.
  absl::StatusOr<std::optional<store::Task>> Claim(
      absl::Time now, const std::function<bool(const store::Task&)>& accept);

  // Ends a claim: `leased` when Store::LeaseTask leased it to the caller
  // (the candidate is gone), false otherwise (it was not leasable after all,
  // or leasing failed): the next claim reloads from the store, which puts
  // it back if it is still leasable.
  void Release(const std::string& task_id, bool leased);

  Stats stats() const;

 private:
  // Brings the cache up to date with the store (see above).
  absl::Status Refresh(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A reload of the whole window is due whatever the generation says.
  bool LoadDue(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Load(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds what completions made leasable: `dependents` of the completed
  // tasks, up to `generation`.
  absl::Status AddUnblocked(absl::Time now, int64_t generation,
                            const std::vector<std::string>& dependents)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the first acceptable candidate out of candidates_ into claimed_.
  std::optional<store::Task> Take(
      const std::function<bool(const store::Task&)>& accept)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  const int window_;

  mutable absl::Mutex mu_;
  std::deque<store::Task> candidates_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> claimed_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  bool reload_ ABSL_GUARDED_BY(mu_) = false;   // a claim was not leased
  bool complete_ ABSL_GUARDED_BY(mu_) = true;  // the load got every row
  // The load's last row when it did not get every row: what sorts after it
  // is not in the cache (a task added after a completion included).
  std::optional<store::Task> last_loaded_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time loaded_at_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> backoff_end_ ABSL_GUARDED_BY(mu_);
  int64_t leased_since_load_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_LEASE_QUEUE_H_
