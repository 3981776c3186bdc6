// Meaning checks of a sweep spec.
//
// ValidateSweepSpec applies the defaults (spec_defaults.h) and checks the
// result: the grid is non-empty and free of duplicates, every (architecture,
// scale) model is valid (model/config ValidateModelConfig, windows within
// seq_len), budgets, schedule, data, evaluation, resources, retry policy and
// fit sets are consistent, and every run has more steps than its warmup and
// a decay phase. Each problem is an InvalidArgument naming the field and
// what to do, e.g.
//   "scales[2].name: duplicate scale name 'S1'; scale names must be unique"
// Only the first problem is reported. docs/sweeps.md lists the checks.
//
// Thread-safe (pure function).
//
//   absl::Status status = ValidateSweepSpec(spec);
//   if (!status.ok()) return status;  // INVALID_ARGUMENT, nothing stored
#ifndef HLAB_COORDINATOR_SWEEP_SPEC_VALIDATOR_H_
#define HLAB_COORDINATOR_SWEEP_SPEC_VALIDATOR_H_

#include <string>

#include "absl/status/status.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::sweep {

absl::Status ValidateSweepSpec(const hlab::v1::SweepSpec& spec);

// Multiple-choice tasks as a sweep's evaluation.multiple_choice or an
// on-demand EvaluateRun request's: at most kMaxEvalPoints, each checked by
// task::ValidateMultipleChoice; errors name fields under `at`. (The files
// are read where the task runs.)
absl::Status CheckMultipleChoiceTasks(const hlab::v1::MultipleChoiceSpec& spec,
                                      const std::string& at);

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_SPEC_VALIDATOR_H_
