// ParallelFor: runs fn(i) for i in [0, n) on up to `threads` threads.
//
// Private to analysis/. Each index runs exactly once; which thread runs it is
// unspecified, so fn must write only to slot i of its output for the result
// to be independent of the thread count. threads <= 0 means one per hardware
// thread. Blocks until every call has returned.
//
//   std::vector<double> out(n);
//   ParallelFor(n, threads, [&](size_t i) { out[i] = Work(i); });
#ifndef HLAB_ANALYSIS_INTERNAL_PARALLEL_H_
#define HLAB_ANALYSIS_INTERNAL_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace hlab::analysis::internal {

// The number of threads `threads` stands for (<= 0: hardware concurrency).
inline int ResolveThreads(int threads) {
  if (threads > 0) return threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

template <typename Fn>
void ParallelFor(size_t n, int threads, const Fn& fn) {
  const size_t workers =
      std::min(n, static_cast<size_t>(ResolveThreads(threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(run);
  run();
  for (std::thread& t : pool) t.join();
}

}  // namespace hlab::analysis::internal

#endif  // HLAB_ANALYSIS_INTERNAL_PARALLEL_H_
