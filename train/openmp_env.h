// Makes this process's OpenMP threads wait passively (sleep) instead of
// spinning, by re-executing the program once with OMP_WAIT_POLICY=PASSIVE
// when the variable is unset. libgomp reads its environment when it is
// loaded, before main, so setting the variable in-process would be too late.
//
// Why: hlab runs several trainers per machine (one per worker slot, plus the
// daemons). With spinning threads, two trainers on 2 cores fight for them
// (measured: docs/performance.md, "Measurements behind defaults in code").
// An explicit OMP_WAIT_POLICY is respected.
//
// Call first thing in main. Not thread-safe (runs before any threads).
//
//   int main(int argc, char** argv) {
//     hlab::train::EnsurePassiveOpenMpWait(argv);
//     ...
#ifndef HLAB_TRAIN_OPENMP_ENV_H_
#define HLAB_TRAIN_OPENMP_ENV_H_

#include <unistd.h>

#include <cstdlib>

namespace hlab::train {

inline void EnsurePassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the default policy.
}

}  // namespace hlab::train

#endif  // HLAB_TRAIN_OPENMP_ENV_H_
