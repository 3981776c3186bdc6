// ReadProcessUsage: a running process's CPU time and memory from
// /proc/PID/stat and /proc/PID/status (Linux), for benchmarks and soaks
// that watch a child daemon (hlab-bench-coordinator's churn profile,
// hlab-chaos).
//
// Thread-safety: thread-safe (reads files only).
//
//   ProcessUsage before = ReadProcessUsage(pid);
//   ...
//   double cores = (ReadProcessUsage(pid).cpu_seconds - before.cpu_seconds)
//                  / seconds;
#ifndef HLAB_COMMON_PROCESS_USAGE_H_
#define HLAB_COMMON_PROCESS_USAGE_H_

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace hlab {

struct ProcessUsage {
  double cpu_seconds = 0;  // user + system, all threads
  // User + system of its children that have ended and been waited for.
  double children_cpu_seconds = 0;
  int64_t rss_bytes = 0;       // resident now (VmRSS)
  int64_t peak_rss_bytes = 0;  // high-water mark (VmHWM)
  int threads = 0;
};

// The rest of `in`, an opened /proc file, or what was read of it before its
// process went away: a read of /proc/<pid>/... once the process is reaped
// fails with ESRCH, which libstdc++'s file buffer throws, so a reader racing
// the process's exit would otherwise end in an exception.
std::string ReadRestOfProcFile(std::ifstream& in);

// Zeros when the process does not exist (or /proc cannot be read).
ProcessUsage ReadProcessUsage(pid_t pid);

}  // namespace hlab

#endif  // HLAB_COMMON_PROCESS_USAGE_H_
