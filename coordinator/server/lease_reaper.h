// LeaseReaper: the coordinator's housekeeping thread. Each tick it
//   - requeues tasks whose lease expired (store ExpireLeases: the attempt
//     is bumped at the next lease, the old holder is fenced off),
//   - marks workers silent for a lease time as LOST,
//   - refreshes the gauges (runs/tasks per state, workers, the runs with a
//     phase of their own and their progress as the store keeps it,
//     unfinished sweeps by state and phase, the live predictions of
//     pending and running runs).
// While the store refuses writes for its storage (disk full, read-only;
// store::WriterStats::storage_failures moves), and for a lease time after
// the last refusal it saw, it neither expires leases nor marks workers
// LOST: their heartbeats were refused by the coordinator's fault, and each
// worker gets a lease time to heartbeat again once writes succeed.
// Time comes from ServiceContext::clock, so tests inject it and call Tick()
// themselves (with the thread not started).
//
// Thread-safety: Start/Stop from one thread; Tick is thread-safe.
//
//   LeaseReaper reaper(&context, absl::Seconds(1));
//   reaper.Start();
//   ...
//   reaper.Stop();  // also in the destructor
#ifndef HLAB_COORDINATOR_SERVER_LEASE_REAPER_H_
#define HLAB_COORDINATOR_SERVER_LEASE_REAPER_H_

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/periodic_thread.h"
#include "coordinator/server/context.h"

namespace hlab::coordinator {

class LeaseReaper {
 public:
  LeaseReaper(ServiceContext* context, absl::Duration interval)
      : context_(context), interval_(interval) {}
  ~LeaseReaper() { Stop(); }
  LeaseReaper(const LeaseReaper&) = delete;
  LeaseReaper& operator=(const LeaseReaper&) = delete;

  void Start();
  void Stop();

  // One round of housekeeping at context->clock(). Returns the first error
  // (the others still run).
  absl::Status Tick();

 private:
  // Requeues expired leases and marks silent workers LOST.
  absl::Status ExpireAndMarkLost(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  // hlab_run_* gauges (loss, progress ratio) of the runs on a trunk,
  // training, decaying or evaluating, from the store; drops the others.
  absl::Status RefreshRunGauges();
  // hlab_sweep_* gauges from one read-only query.
  absl::Status RefreshSweepGauges();
  // hlab_run_predicted_target and hlab_sweep_prediction_generation.
  absl::Status RefreshPredictionGauges();

  ServiceContext* const context_;
  const absl::Duration interval_;
  PeriodicThread thread_;
  absl::Mutex tick_mu_;
  // The store's storage failures at the last tick, and until when expiry
  // waits after the last one seen.
  int64_t storage_failures_seen_ ABSL_GUARDED_BY(tick_mu_) = 0;
  absl::Time expiry_paused_until_ ABSL_GUARDED_BY(tick_mu_) =
      absl::InfinitePast();
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_LEASE_REAPER_H_
