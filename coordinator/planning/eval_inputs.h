// What the coordinator resolves from the store for evaluations: whether a
// run can be evaluated or serve as a LongPPL reference (its training has
// finished), which checkpoint file an EVAL task reads, and the submit-time
// check of a sweep's evaluation.longppl.reference.run_id.
//
// "Training finished" means the run SUCCEEDED, or every task of the run
// other than its EVAL tasks SUCCEEDED: a run of the same sweep used as the
// LongPPL reference is still RUNNING while its own evaluations wait, and an
// on-demand evaluation (`hlab eval`) makes a SUCCEEDED run RUNNING again
// until it ends.
//
// Thread-safety: pure functions over the thread-safe store and query
// engine.
//
//   HLAB_RETURN_IF_ERROR(CheckTrainingFinished(store, run_id, "run"));
//   HLAB_ASSIGN_OR_RETURN(RunCheckpoint c, FindRunCheckpoint(query, id, 0));
#ifndef HLAB_COORDINATOR_PLANNING_EVAL_INPUTS_H_
#define HLAB_COORDINATOR_PLANNING_EVAL_INPUTS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::coordinator {

// OK when `run_id`'s training has finished (see above). NotFound for an
// unknown run; FailedPrecondition naming the run's state otherwise. Messages
// start with `what` ("run", "LongPPL reference run").
absl::Status CheckTrainingFinished(store::Store& store,
                                   const std::string& run_id,
                                   const std::string& what);

struct RunCheckpoint {
  std::string path;
  int64_t step = 0;
};

// The checkpoint of `run_id` at training step `step`, or its newest one when
// `step` is 0. NotFound listing the steps that have checkpoints when there
// is none; InvalidArgument for a malformed run id.
absl::StatusOr<RunCheckpoint> FindRunCheckpoint(store::QueryEngine& query,
                                                const std::string& run_id,
                                                int64_t step);

// The reference checkpoint file of an EVAL task's LongPPL evaluation: for a
// reference run (`run_id`), its newest checkpoint, once its training has
// finished; else `checkpoint_path`. FailedPrecondition naming the reference
// run, its state and what to do otherwise (the task then fails for good).
absl::StatusOr<std::string> ResolveReferenceCheckpoint(
    store::Store& store, store::QueryEngine& query, const std::string& run_id,
    const std::string& checkpoint_path);

// Submit-time check of evaluation.longppl.reference.run_id (when LongPPL is
// enabled and a run id is given): InvalidArgument when the run is not in
// the database or FAILED / CANCELLED, FailedPrecondition when its training
// has not finished yet; each names the field and what to do.
absl::Status CheckReferenceRun(store::Store& store,
                               const hlab::v1::SweepSpec& spec);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_PLANNING_EVAL_INPUTS_H_
