#include "task/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace hlab::task {

absl::Status ValidateWsdConfig(const WsdConfig& c) {
  if (!(c.peak_lr > 0) || !std::isfinite(c.peak_lr)) {
    return absl::InvalidArgumentError("lr: must be a positive number");
  }
  if (c.total_steps <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("total_steps: must be > 0, got ", c.total_steps));
  }
  if (c.warmup_steps < 0 || c.warmup_steps >= c.total_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "warmup_steps: must be in [0, total_steps = ", c.total_steps, "), got ",
        c.warmup_steps));
  }
  if (!(c.decay_fraction >= 0 && c.decay_fraction <= 1)) {
    return absl::InvalidArgumentError("decay_fraction: must be in [0, 1]");
  }
  if (!(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1)) {
    return absl::InvalidArgumentError("min_lr_ratio: must be in [0, 1]");
  }
  return absl::OkStatus();
}

WsdSchedule::WsdSchedule(const WsdConfig& config)
    : config_(config),
      decay_start_(config.total_steps -
                   static_cast<int64_t>(
                       std::llround(config.decay_fraction *
                                    static_cast<double>(config.total_steps)))) {
  decay_start_ = std::max(decay_start_, config_.warmup_steps);
}

double WsdSchedule::LearningRate(int64_t step) const {
  const double peak = config_.peak_lr;
  if (step < config_.warmup_steps) {
    return peak * static_cast<double>(step + 1) /
           static_cast<double>(config_.warmup_steps);
  }
  if (step < decay_start_) return peak;
  const int64_t decay_steps = config_.total_steps - decay_start_;
  // Progress in (0, 1]: the last step reaches the minimum.
  const double p =
      std::min(1.0, static_cast<double>(step - decay_start_ + 1) /
                        static_cast<double>(std::max<int64_t>(decay_steps, 1)));
  double factor = 1.0 - p;  // linear
  if (config_.shape == DecayShape::kCosine) {
    factor = 0.5 * (1.0 + std::cos(M_PI * p));
  } else if (config_.shape == DecayShape::kOneMinusSqrt) {
    factor = 1.0 - std::sqrt(p);
  }
  const double min_ratio = config_.min_lr_ratio;
  return peak * (min_ratio + (1.0 - min_ratio) * factor);
}

}  // namespace hlab::task
