// On-demand evaluation of a finished run (ClientService.EvaluateRun, what
// `hlab eval` calls): adds one EVAL task that workers run with hlab-eval,
// like the EVAL tasks a sweep plans (docs/evaluation.md).
//
// The task evaluates the run's checkpoint at `step` (0: its newest) with
// the settings of the run's sweep (its first sweep when it belongs to
// several): the evaluations the sweep enables, or those listed, each with
// the sweep's settings (defaults for one the sweep does not enable). A
// LongPPL evaluation uses the sweep's reference (the run its EVAL tasks
// name, or reference.run_id / checkpoint_path); its training must have
// finished. The task id is EvalTaskId(run, step, settings) (expand.h), so
// asking again, or asking for what the sweep already evaluated, returns the
// existing task (created = false) whatever its state; with retry_failed, an
// on-demand task that FAILED or was CANCELLED is reopened first.
//
// The task it adds is on-demand (store::TaskSpec::on_demand): when it fails,
// the task says so (its state, failure_reason, a "task_failed" event), and
// the run keeps its state and results; its retries are its own
// (max_attempts), not the sweep's.
//
// Errors (each one line saying what to do): InvalidArgument for an empty
// run id, a negative step or an unknown eval name, or LongPPL without a
// reference; NotFound for an unknown run or no checkpoint at `step`;
// FailedPrecondition when the run's (or the LongPPL reference run's)
// training has not finished.
//
// Thread-safety: thread-safe (the store, query engine and catalog are).
//
//   hlab::v1::EvaluateRunResponse response;
//   HLAB_RETURN_IF_ERROR(
//       EvaluateRun(store, query, catalog, absl::Now(), request, &response));
#ifndef HLAB_COORDINATOR_PLANNING_EVALUATE_RUN_H_
#define HLAB_COORDINATOR_PLANNING_EVALUATE_RUN_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "hlab/v1/client_service.pb.h"

namespace hlab::coordinator {

// `now` stamps the task it adds or reopens.
absl::Status EvaluateRun(store::Store& store, store::QueryEngine& query,
                         SweepCatalog& catalog, absl::Time now,
                         const hlab::v1::EvaluateRunRequest& request,
                         hlab::v1::EvaluateRunResponse* response);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_PLANNING_EVALUATE_RUN_H_
