// The faults hlab-chaos injects into a LocalCluster on loopback, one at a
// time, each into a random target that exists at that moment:
//
//   kill-trainer       kill -9 of a running hlab-train
//   kill-worker        kill -9 of a worker (its trainers die of SIGPIPE);
//                      the worker is started again at once
//   kill-coordinator   kill -9 of the coordinator, started again at once
//   pause-trainer      SIGSTOP of a trainer, SIGCONT a moment later (shorter
//                      than the watchdog's stall timeout)
//   hang-trainer       SIGSTOP of a trainer until the worker's watchdog stops
//                      it (the stall timeout and the kill grace)
//   partition-worker   SIGSTOP of a whole worker past its lease (it neither
//                      heartbeats nor reports; its tasks are leased
//                      elsewhere), then SIGCONT: it learns that its leases
//                      are gone and stops its trainers
//   flip-checkpoint    one byte of a running task's newest checkpoint
//                      flipped (a retry skips it, as corrupt, and resumes
//                      from the one before)
//   disk-full          the file system the whole cluster lives on (its
//                      database, the workers' data and the checkpoints: a
//                      tmpfs that hlab-chaos mounts, FaultOptions::
//                      full_disk_dir) filled to the last byte, held full for
//                      disk_full_hold, then freed: the coordinator refuses
//                      writes, the trainers' checkpoint writes fail (exit
//                      74), and all of it recovers by itself. Skipped, with
//                      the reason, where no tmpfs could be mounted (mount(2)
//                      needs root)
//
// Thread-compatible: one injector, used from one thread.
//
//   FaultOptions options;
//   options.seed = 7;
//   options.lease = absl::Seconds(3);
//   FaultInjector faults(&cluster, options);
//   absl::StatusOr<std::string> done = faults.Inject(Fault::kKillWorker);
#ifndef HLAB_CHAOS_FAULTS_H_
#define HLAB_CHAOS_FAULTS_H_

#include <sys/types.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/local_cluster.h"

namespace hlab::chaos {

enum class Fault {
  kKillTrainer,
  kKillWorker,
  kKillCoordinator,
  kPauseTrainer,
  kHangTrainer,
  kPartitionWorker,
  kFlipCheckpoint,
  kDiskFull,
};

// Every kind, in the order above.
const std::vector<Fault>& AllFaults();
// "kill-trainer", ...
const char* FaultName(Fault fault);

struct FaultOptions {
  uint64_t seed = 1;
  absl::Duration lease = absl::Seconds(3);  // the coordinator's
  // The workers' watchdog: well above a trainer's silence at start-up on a
  // loaded 2-core machine (4 s killed healthy trainers there).
  absl::Duration stall_timeout = absl::Seconds(10);
  absl::Duration kill_grace = absl::Seconds(2);  // the workers'
  // disk-full: the mounted file system the cluster lives on (empty: none,
  // and disk-full fails with full_disk_unavailable), and how long it stays
  // full.
  std::string full_disk_dir;
  std::string full_disk_unavailable =
      "no file system of its own for the cluster";
  absl::Duration disk_full_hold = absl::Seconds(3);
};

class FaultInjector {
 public:
  FaultInjector(cli::LocalCluster* cluster, FaultOptions options);

  // Injects `fault` into a random target. Returns what it did ("kill -9 of
  // hlab-train 1234 (task trunk-...)"); NotFound when no target exists now
  // (no trainer running, no checkpoint yet: try again later);
  // FailedPrecondition for a fault this machine cannot inject (the reason
  // says why); Unavailable when a restart failed.
  absl::StatusOr<std::string> Inject(Fault fault);

 private:
  // Running hlab-train processes of this cluster.
  std::vector<pid_t> Trainers() const;
  template <typename T>
  const T& Pick(const std::vector<T>& from) {
    return from[std::uniform_int_distribution<size_t>(0,
                                                      from.size() - 1)(rng_)];
  }

  cli::LocalCluster* const cluster_;
  const FaultOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace hlab::chaos

#endif  // HLAB_CHAOS_FAULTS_H_
