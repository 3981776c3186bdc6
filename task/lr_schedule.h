// Warmup-stable-decay (WSD) learning-rate schedule.
//
// Linear warmup over `warmup_steps` (factor (s+1)/warmup), constant until the
// decay phase, which takes the last `decay_fraction` of `total_steps` and
// falls to `min_lr_ratio * peak_lr` with a linear, cosine or 1-sqrt shape.
// Because warmup and the stable phase do not depend on the total, runs with
// different budgets share their stable phase exactly (WSD branching).
//
// Thread-safe (immutable after construction).
//
//   WsdConfig config;
//   config.peak_lr = 1e-3;
//   config.warmup_steps = 100;
//   config.total_steps = 2000;
//   WsdSchedule schedule(config);
//   double lr = schedule.LearningRate(step);
#ifndef HLAB_TASK_LR_SCHEDULE_H_
#define HLAB_TASK_LR_SCHEDULE_H_

#include <cstdint>

#include "absl/status/status.h"

namespace hlab::task {

enum class DecayShape { kLinear, kCosine, kOneMinusSqrt };

struct WsdConfig {
  double peak_lr = 1e-3;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double decay_fraction = 0.1;
  double min_lr_ratio = 0.1;
  DecayShape shape = DecayShape::kLinear;
};

// InvalidArgument naming the field for inconsistent schedules.
absl::Status ValidateWsdConfig(const WsdConfig& config);

class WsdSchedule {
 public:
  explicit WsdSchedule(const WsdConfig& config);
  // The learning rate for optimizer step `step` (0-based).
  double LearningRate(int64_t step) const;
  // First step of the decay phase.
  int64_t DecayStart() const { return decay_start_; }

 private:
  WsdConfig config_;
  int64_t decay_start_;
};

}  // namespace hlab::task

#endif  // HLAB_TASK_LR_SCHEDULE_H_
