#include "common/periodic_thread.h"

#include <utility>

namespace hlab {

void PeriodicThread::Start(absl::Duration interval, std::function<void()> fn) {
  Stop();
  {
    absl::MutexLock lock(&mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this, interval, fn = std::move(fn)] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_;
        };
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping), interval)) {
          return;
        }
      }
      fn();
    }
  });
}

void PeriodicThread::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace hlab
