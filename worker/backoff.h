// Backoff: exponential delays with jitter for retrying RPCs to the
// coordinator: min, 2*min, 4*min, ... capped at max, each multiplied by a
// random factor in [0.5, 1.0] so many workers do not retry in step after a
// coordinator restart.
//
// Not thread-safe: one per retrying loop.
//
//   Backoff backoff(absl::Milliseconds(100), absl::Seconds(10));
//   while (!Send().ok()) Sleep(backoff.Next());
//   backoff.Reset();
#ifndef HLAB_WORKER_BACKOFF_H_
#define HLAB_WORKER_BACKOFF_H_

#include <algorithm>
#include <random>

#include "absl/time/time.h"

namespace hlab::worker {

class Backoff {
 public:
  Backoff(absl::Duration min, absl::Duration max)
      : min_(min), max_(max), next_(min), rng_(std::random_device{}()) {}

  // The delay before the next try; doubles the one after.
  absl::Duration Next() {
    const absl::Duration base = next_;
    next_ = std::min(next_ * 2, max_);
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    return base * jitter(rng_);
  }
  void Reset() { next_ = min_; }

 private:
  absl::Duration min_, max_, next_;
  std::mt19937 rng_;
};

}  // namespace hlab::worker

#endif  // HLAB_WORKER_BACKOFF_H_
