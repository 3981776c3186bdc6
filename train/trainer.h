// Trainer: runs one TrainTask to its stop point, with checkpoints, exact
// resume, WSD branch points, held-out validation and progress records.
//
// Exactness. The batch of step s is a pure function of (data seed, s)
// (data/mixture.h), the learning rate a pure function of s
// (task/lr_schedule.h), and a checkpoint holds the model, the AdamW state
// and the RNG state at a step boundary. So on CPU with a fixed thread count,
// a run killed at any point and resumed from its newest checkpoint computes
// bitwise the same losses as the uninterrupted run; and a WSD decay task
// started from a trunk's branch checkpoint ends with bitwise the same weights
// as training that budget from scratch. Both are tested
// (tests/train/trainer_test.cc).
//
// Failures come back as a Status whose code decides the exit code
// (ExitCodeFor): InvalidArgument / NotFound / DataLoss / FailedPrecondition
// are permanent, Aborted means non-finite values at the same step twice,
// Unavailable / ResourceExhausted / Cancelled (preempted) are retryable.
//
// Not thread-safe: one trainer per process (LibTorch's thread pool and RNG
// are process-wide).
//
//   RecordWriter records(stdout, RecordWriter::Human::kBar);
//   HLAB_ASSIGN_OR_RETURN(auto trainer, Trainer::Create(task, &records));
//   absl::Status done = trainer->Run(&stop_requested);
//   return ExitCodeFor(done);
#ifndef HLAB_TRAIN_TRAINER_H_
#define HLAB_TRAIN_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "task/train_plan.h"
#include "train/data_parallel.h"
#include "train/records.h"

namespace hlab::train {

// Exit code for a trainer outcome (train/exit_codes.h).
int ExitCodeFor(const absl::Status& status);

// One validation pass over held-out sequences.
struct ValidationResult {
  double loss = 0;         // mean NLL per target token (nats)
  double recall_loss = 0;  // mean NLL over long-range recall targets (nats)
  int64_t sequences = 0;
  int64_t tokens = 0;
  int64_t recall_tokens = 0;
};

// Where the wall time of Run() went.
struct TrainingTime {
  double total_seconds = 0;  // the step loop
  double data_seconds = 0;   // building batches (sampling and packing)
  int64_t steps = 0;
};

class Trainer {
 public:
  // Validates the task, builds data, model and optimizer, and loads the
  // starting state (init_from, or the newest valid checkpoint when resuming).
  // Nothing is written to the checkpoint directory before Run(). With a
  // world size above 1 this connects to the other ranks (data parallel);
  // only rank 0 writes records and checkpoints.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const task::TrainTask& task, RecordWriter* records,
      const DistributedConfig& distributed = {});
  ~Trainer();

  // Trains from the start step to the plan's stop step. When `*stop` turns
  // true (SIGTERM), writes a checkpoint at the next step boundary and
  // returns Cancelled.
  absl::Status Run(const std::atomic<bool>* stop = nullptr);

  ValidationResult Validate();

  int64_t start_step() const;
  const task::TrainPlan& plan() const;
  // Training loss of every step run by this process, in order.
  const std::vector<double>& losses() const;
  const TrainingTime& time() const;
  // Flattened copy of all parameters (for equality checks in tests).
  std::vector<float> ParameterValues() const;

 private:
  struct State;
  explicit Trainer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace hlab::train

#endif  // HLAB_TRAIN_TRAINER_H_
