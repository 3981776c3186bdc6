// Exit codes of hlab-train, as the worker daemon reads them.
//
//   0   success: the task reached its stop point; its final checkpoint (if
//       any) and records are written.
//   2   permanent failure: the task cannot succeed as given (invalid task or
//       model config, missing or corrupt data, a checkpoint from another
//       config). Retrying will not help; fix the task.
//   3   permanent failure: loss or gradients were not finite at the same step
//       in two attempts (the task diverges; lower the learning rate).
//   75  retryable failure: out of memory, an I/O error, non-finite values for
//       the first time, or a SIGTERM/SIGINT that was honoured by writing a
//       checkpoint. Retry: the task resumes from its newest checkpoint.
// A trainer killed by a signal (kill -9, the OOM killer) has no exit code;
// the worker treats that as retryable too.
#ifndef HLAB_TRAIN_EXIT_CODES_H_
#define HLAB_TRAIN_EXIT_CODES_H_

namespace hlab::train {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitPermanent = 2;
inline constexpr int kExitDiverged = 3;
inline constexpr int kExitRetryable = 75;  // EX_TEMPFAIL

}  // namespace hlab::train

#endif  // HLAB_TRAIN_EXIT_CODES_H_
