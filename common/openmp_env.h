// OpenMP threads that wait passively (sleep) instead of spinning.
//
// EnsurePassiveOpenMpWait makes this process's threads passive by
// re-executing the program once with OMP_WAIT_POLICY=PASSIVE when the
// variable is unset. libgomp reads its environment when it is loaded, before
// main, so setting the variable in-process would be too late. The re-exec
// is a second start of the program (LibTorch's start-up twice: costs in
// docs/performance.md), so a launcher of many short trainers puts
// kOpenMpPassiveWaitEnv in their environment instead (the worker daemon
// does: worker/task_runner.cc).
//
// Why: hlab runs several trainers per machine (one per worker slot, plus the
// daemons). With spinning threads, two trainers on 2 cores fight for them
// (measured: docs/performance.md, "Measurements behind defaults in code").
// An explicit OMP_WAIT_POLICY is respected.
//
// Call first thing in main. Not thread-safe (runs before any threads).
//
//   int main(int argc, char** argv) {
//     hlab::EnsurePassiveOpenMpWait(argv);
//     ...
#ifndef HLAB_COMMON_OPENMP_ENV_H_
#define HLAB_COMMON_OPENMP_ENV_H_

#include <unistd.h>

#include <cstdlib>

namespace hlab {

// The variable and the value that make OpenMP threads wait passively.
inline constexpr char kOpenMpWaitPolicyVar[] = "OMP_WAIT_POLICY";
inline constexpr char kOpenMpPassiveWaitEnv[] = "OMP_WAIT_POLICY=PASSIVE";

inline void EnsurePassiveOpenMpWait(char** argv) {
  if (std::getenv(kOpenMpWaitPolicyVar) != nullptr) return;
  ::setenv(kOpenMpWaitPolicyVar, "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the default policy.
}

}  // namespace hlab

#endif  // HLAB_COMMON_OPENMP_ENV_H_
