// SweepCatalog: stored sweeps as the client API shows them. It keeps the
// expanded plan of every sweep (re-planned from the stored canonical spec
// after a restart), so a run's planned figures (steps, FLOPs, pattern, D/N)
// and a sweep's retry policy need no extra tables, and it joins them with
// the store's live state (run states, final losses from run_summary).
//
// Thread-safety: thread-safe (the plan cache is under a mutex; plans are
// immutable once cached).
//
//   SweepCatalog catalog(store, query);
//   HLAB_ASSIGN_OR_RETURN(store::Sweep sweep, catalog.Resolve("demo"));
//   HLAB_ASSIGN_OR_RETURN(hlab::v1::Sweep proto, catalog.SweepProto(sweep));
#ifndef HLAB_COORDINATOR_PLANNING_SWEEP_CATALOG_H_
#define HLAB_COORDINATOR_PLANNING_SWEEP_CATALOG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "coordinator/sweep/expand.h"
#include "hlab/v1/run.pb.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::coordinator {

class SweepCatalog {
 public:
  SweepCatalog(store::Store* store, store::QueryEngine* query)
      : store_(store), query_(query) {}

  // The plan of a stored sweep. DataLoss if its stored spec no longer
  // plans (an older hlab wrote it); NotFound for an unknown sweep.
  absl::StatusOr<std::shared_ptr<const sweep::SweepPlan>> Plan(
      int64_t sweep_id);
  void Remember(int64_t sweep_id, std::shared_ptr<const sweep::SweepPlan> plan);

  // A sweep by id ("12") or by name (the newest of that name). NotFound
  // naming the reference; InvalidArgument if empty.
  absl::StatusOr<store::Sweep> Resolve(absl::string_view ref);

  // The sweep with its run counts, state and planned FLOPs.
  absl::StatusOr<hlab::v1::Sweep> SweepProto(const store::Sweep& sweep);
  // Runs as protos: the planned figures, the live state and final losses,
  // the sweeps they belong to.
  absl::StatusOr<std::vector<hlab::v1::Run>> RunProtos(
      const std::vector<store::Run>& runs);

  // Whether every run of the sweep is finished (or the sweep cancelled).
  absl::StatusOr<bool> Finished(int64_t sweep_id);

  // Backoff before attempt k + 1 after k failures, by the sweep's policy:
  // min(base * 2^(k-1), max).
  absl::Duration Backoff(int64_t sweep_id, int failures);

 private:
  store::Store* const store_;
  store::QueryEngine* const query_;
  absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<const sweep::SweepPlan>> plans_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_PLANNING_SWEEP_CATALOG_H_
