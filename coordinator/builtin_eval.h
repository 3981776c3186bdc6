// The coordinator's stand-in for EVAL tasks until an evaluator exists.
//
// hlab-train validates at the end of training (and at branch points) and
// the worker relays that as "val_loss" metric points, but nothing yet runs
// LongPPL or needle-in-a-haystack evaluations. So that runs can succeed
// and sweeps finish, the coordinator completes every leasable EVAL task
// itself: it leases it to the pseudo-worker "coordinator", records the
// run's validation loss at the evaluated step (the newest "val_loss"
// point at or before it) as the eval "val_loss", and completes it. LongPPL
// and NIAH are not measured (logged once per task). Workers are never
// handed EVAL tasks while this is on (ServiceContext::builtin_eval).
//
// Thread-safety: thread-safe (store and query engine are).
//
//   HLAB_ASSIGN_OR_RETURN(int done, CompleteEvalTasks(context));
#ifndef HLAB_COORDINATOR_BUILTIN_EVAL_H_
#define HLAB_COORDINATOR_BUILTIN_EVAL_H_

#include "absl/status/statusor.h"
#include "coordinator/context.h"

namespace hlab::coordinator {

// The lease holder of tasks the coordinator itself completes (EVAL) or
// fails (a task whose trainer task cannot be built).
inline constexpr char kBuiltinEvalWorker[] = "coordinator";

// Completes every EVAL task that is leasable now; returns how many.
absl::StatusOr<int> CompleteEvalTasks(ServiceContext& context);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_BUILTIN_EVAL_H_
