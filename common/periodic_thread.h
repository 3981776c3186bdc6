// PeriodicThread: a thread that calls a function every `interval` until
// Stop(). The coordinator's housekeeping (LeaseReaper) and automatic fits
// (FitScheduler) run on one each.
//
// The first call comes one interval after Start. Stop wakes the thread at
// once; a call in progress finishes first (make it return early if it can
// be long, as FitScheduler does by ending its child). The destructor stops.
//
// Thread-safety: Start and Stop from one thread (the owner's); the function
// runs on the periodic thread only.
//
//   PeriodicThread thread;
//   thread.Start(absl::Seconds(1), [&] { (void)Tick(); });
//   ...
//   thread.Stop();
#ifndef HLAB_COMMON_PERIODIC_THREAD_H_
#define HLAB_COMMON_PERIODIC_THREAD_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hlab {

class PeriodicThread {
 public:
  PeriodicThread() = default;
  ~PeriodicThread() { Stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Starts the thread (stopping one already running first).
  void Start(absl::Duration interval, std::function<void()> fn);
  // Wakes and joins the thread; a no-op when none runs.
  void Stop();

 private:
  std::thread thread_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hlab

#endif  // HLAB_COMMON_PERIODIC_THREAD_H_
