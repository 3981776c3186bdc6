// Trainers orphaned by a worker that died (kill -9, OOM, a crash) keep
// running in their own process groups and would share their task directory
// with a new attempt. The runner records its trainers in
// <task dir>/trainer.pids ("pid start-time" per line, the start time from
// /proc/<pid>/stat so a reused pid is never mistaken for one), and before
// starting a task stops any recorded trainer that is still alive.
//
// Thread-safe: plain functions; one runner owns a task directory at a time.
//
//   StopStaleTrainers(dir, absl::Seconds(30));
//   ... spawn ...
//   HLAB_RETURN_IF_ERROR(RecordTrainerPids(dir, {pid}));
//   ... wait ...
//   ClearTrainerPids(dir);
#ifndef HLAB_WORKER_STALE_TRAINERS_H_
#define HLAB_WORKER_STALE_TRAINERS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hlab::worker {

// The start time (clock ticks since boot) of a live process; empty when
// there is none.
std::string ProcessStartTime(pid_t pid);

// Writes <dir>/trainer.pids for `pids`. Internal on a write error.
absl::Status RecordTrainerPids(const std::string& dir,
                               const std::vector<pid_t>& pids);
void ClearTrainerPids(const std::string& dir);

// SIGTERM to the process group of each recorded trainer still alive,
// SIGKILL after `grace`; waits (up to `grace` more) for them to go. Returns
// how many were found alive.
int StopStaleTrainers(const std::string& dir, absl::Duration grace);

}  // namespace hlab::worker

#endif  // HLAB_WORKER_STALE_TRAINERS_H_
