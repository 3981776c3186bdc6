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
//   74  the node's storage refused a checkpoint write: the disk or quota is
//       full, the file system is read-only, the file would be too large, or
//       an I/O error (ENOSPC, EDQUOT, EROFS, EFBIG, EIO). The temporary file
//       is removed and the previous checkpoint stays valid. Not the task's
//       fault: the worker reports an infrastructure fault, retried without
//       spending the task's budget, from that previous checkpoint.
// A trainer killed by a signal (kill -9, the OOM killer) has no exit code;
// the worker treats that as retryable too.
#ifndef HLAB_TRAIN_EXIT_CODES_H_
#define HLAB_TRAIN_EXIT_CODES_H_

namespace hlab::train {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitPermanent = 2;
inline constexpr int kExitDiverged = 3;
inline constexpr int kExitStorage = 74;    // EX_IOERR
inline constexpr int kExitRetryable = 75;  // EX_TEMPFAIL

}  // namespace hlab::train

#endif  // HLAB_TRAIN_EXIT_CODES_H_
