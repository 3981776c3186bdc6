// ThreadSanitizer annotations for Debian's uninstrumented abseil (the TSan
// tree of scripts/sanitize.sh). libabsl_synchronization is not compiled with
// -fsanitize=thread, so TSan does not see absl::Mutex, absl::CondVar or
// absl::Notification synchronize (their fast paths are plain atomics and
// futexes inside the library) and would report every ABSL_GUARDED_BY member
// as a race. The TSan tree links every binary with -Wl,--wrap=<symbol> for
// the functions below (tests/sanitizers/CMakeLists.txt): a call from hlab's
// code goes to __wrap_<symbol>, which tells TSan about the lock, unlock,
// release or acquire around the real function (__real_<symbol>), as abseil
// itself does when it is built with TSan (ABSL_TSAN_MUTEX_* in mutex.cc).
// Between pre_lock and post_lock TSan ignores memory accesses, so the
// Conditions that abseil evaluates inside Lock, Unlock and Await are not
// reported either (they run with the mutex held). Calls from inside gRPC
// (uninstrumented) are not wrapped and need none: TSan sees no accesses
// there.
//
// The symbols are those of Debian 12's abseil 20220623 (inline namespace
// debian3); on another abseil the link fails on the __real_ names.
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Notification;
using absl::Time;

void PreLock(Mutex* mu, unsigned flags) { __tsan_mutex_pre_lock(mu, flags); }
void PostLock(Mutex* mu, unsigned flags) {
  __tsan_mutex_post_lock(mu, flags, 0);
}
// An unlock as TSan sees it (Await and CondVar::Wait release the mutex).
void Released(Mutex* mu, unsigned flags) {
  __tsan_mutex_pre_unlock(mu, flags);
  __tsan_mutex_post_unlock(mu, flags);
}

constexpr unsigned kRead = __tsan_mutex_read_lock;

}  // namespace

#define HLAB_MUTEX(name) _ZN4absl7debian35Mutex##name
#define HLAB_CONDVAR(name) _ZN4absl7debian37CondVar##name
#define HLAB_PASTE2(a, b) a##b
#define HLAB_PASTE(a, b) HLAB_PASTE2(a, b)
#define HLAB_REAL(sym) HLAB_PASTE(__real_, sym)
#define HLAB_WRAP(sym) HLAB_PASTE(__wrap_, sym)

// Declares __real_<sym> and defines __wrap_<sym>: a lock-like function.
#define HLAB_LOCKING(sym, flags, ret, params, args) \
  ret HLAB_REAL(sym) params;                        \
  ret HLAB_WRAP(sym) params {                       \
    PreLock(mu, flags);                             \
    ret r = HLAB_REAL(sym) args;                    \
    PostLock(mu, flags);                            \
    return r;                                       \
  }

extern "C" {

// void Mutex::Lock(), ReaderLock(), Unlock(), ReaderUnlock().
void HLAB_REAL(HLAB_MUTEX(4LockEv))(Mutex* mu);
void HLAB_WRAP(HLAB_MUTEX(4LockEv))(Mutex* mu) {
  PreLock(mu, 0);
  HLAB_REAL(HLAB_MUTEX(4LockEv))(mu);
  PostLock(mu, 0);
}
void HLAB_REAL(HLAB_MUTEX(10ReaderLockEv))(Mutex* mu);
void HLAB_WRAP(HLAB_MUTEX(10ReaderLockEv))(Mutex* mu) {
  PreLock(mu, kRead);
  HLAB_REAL(HLAB_MUTEX(10ReaderLockEv))(mu);
  PostLock(mu, kRead);
}
void HLAB_REAL(HLAB_MUTEX(6UnlockEv))(Mutex* mu);
void HLAB_WRAP(HLAB_MUTEX(6UnlockEv))(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  HLAB_REAL(HLAB_MUTEX(6UnlockEv))(mu);
  __tsan_mutex_post_unlock(mu, 0);
}
void HLAB_REAL(HLAB_MUTEX(12ReaderUnlockEv))(Mutex* mu);
void HLAB_WRAP(HLAB_MUTEX(12ReaderUnlockEv))(Mutex* mu) {
  __tsan_mutex_pre_unlock(mu, kRead);
  HLAB_REAL(HLAB_MUTEX(12ReaderUnlockEv))(mu);
  __tsan_mutex_post_unlock(mu, kRead);
}

// bool Mutex::TryLock(), ReaderTryLock().
bool HLAB_REAL(HLAB_MUTEX(7TryLockEv))(Mutex* mu);
bool HLAB_WRAP(HLAB_MUTEX(7TryLockEv))(Mutex* mu) {
  __tsan_mutex_pre_lock(mu, __tsan_mutex_try_lock);
  bool locked = HLAB_REAL(HLAB_MUTEX(7TryLockEv))(mu);
  __tsan_mutex_post_lock(
      mu, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
      0);
  return locked;
}
bool HLAB_REAL(HLAB_MUTEX(13ReaderTryLockEv))(Mutex* mu);
bool HLAB_WRAP(HLAB_MUTEX(13ReaderTryLockEv))(Mutex* mu) {
  const unsigned flags = kRead | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(mu, flags);
  bool locked = HLAB_REAL(HLAB_MUTEX(13ReaderTryLockEv))(mu);
  __tsan_mutex_post_lock(
      mu, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

// void Mutex::LockWhen(const Condition&), ReaderLockWhen(const Condition&).
void HLAB_REAL(HLAB_MUTEX(8LockWhenERKNS0_9ConditionE))(Mutex* mu,
                                                        const Condition& c);
void HLAB_WRAP(HLAB_MUTEX(8LockWhenERKNS0_9ConditionE))(Mutex* mu,
                                                        const Condition& c) {
  PreLock(mu, 0);
  HLAB_REAL(HLAB_MUTEX(8LockWhenERKNS0_9ConditionE))(mu, c);
  PostLock(mu, 0);
}
void HLAB_REAL(HLAB_MUTEX(14ReaderLockWhenERKNS0_9ConditionE))(
    Mutex* mu, const Condition& c);
void HLAB_WRAP(HLAB_MUTEX(14ReaderLockWhenERKNS0_9ConditionE))(
    Mutex* mu, const Condition& c) {
  PreLock(mu, kRead);
  HLAB_REAL(HLAB_MUTEX(14ReaderLockWhenERKNS0_9ConditionE))(mu, c);
  PostLock(mu, kRead);
}

// bool Mutex::LockWhenWith{Timeout,Deadline}(const Condition&, ...): the
// mutex is held on return either way.
HLAB_LOCKING(HLAB_MUTEX(19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE),
             0, bool, (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
HLAB_LOCKING(HLAB_MUTEX(20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE), 0,
             bool, (Mutex * mu, const Condition& c, Time t), (mu, c, t))
HLAB_LOCKING(
    HLAB_MUTEX(25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE),
    kRead, bool, (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
HLAB_LOCKING(
    HLAB_MUTEX(26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE), kRead,
    bool, (Mutex * mu, const Condition& c, Time t), (mu, c, t))

// Mutex::Await*(const Condition&, ...): called with the mutex held, which
// abseil releases while it waits and holds again on return.
void HLAB_REAL(HLAB_MUTEX(5AwaitERKNS0_9ConditionE))(Mutex* mu,
                                                     const Condition& c);
void HLAB_WRAP(HLAB_MUTEX(5AwaitERKNS0_9ConditionE))(Mutex* mu,
                                                     const Condition& c) {
  Released(mu, 0);
  PreLock(mu, 0);
  HLAB_REAL(HLAB_MUTEX(5AwaitERKNS0_9ConditionE))(mu, c);
  PostLock(mu, 0);
}
bool HLAB_REAL(HLAB_MUTEX(16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE))(
    Mutex* mu, const Condition& c, Duration d);
bool HLAB_WRAP(HLAB_MUTEX(16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE))(
    Mutex* mu, const Condition& c, Duration d) {
  Released(mu, 0);
  PreLock(mu, 0);
  bool r = HLAB_REAL(
      HLAB_MUTEX(16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE))(mu, c, d);
  PostLock(mu, 0);
  return r;
}
bool HLAB_REAL(HLAB_MUTEX(17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE))(
    Mutex* mu, const Condition& c, Time t);
bool HLAB_WRAP(HLAB_MUTEX(17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE))(
    Mutex* mu, const Condition& c, Time t) {
  Released(mu, 0);
  PreLock(mu, 0);
  bool r = HLAB_REAL(
      HLAB_MUTEX(17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE))(mu, c, t);
  PostLock(mu, 0);
  return r;
}

// Mutex::~Mutex(): forget the mutex (its memory may hold another later).
void HLAB_REAL(HLAB_MUTEX(D1Ev))(Mutex* mu);
void HLAB_WRAP(HLAB_MUTEX(D1Ev))(Mutex* mu) {
  __tsan_mutex_destroy(mu, 0);
  HLAB_REAL(HLAB_MUTEX(D1Ev))(mu);
}

// CondVar::Wait*(Mutex*, ...): the mutex is released while waiting.
void HLAB_REAL(HLAB_CONDVAR(4WaitEPNS0_5MutexE))(CondVar* cv, Mutex* mu);
void HLAB_WRAP(HLAB_CONDVAR(4WaitEPNS0_5MutexE))(CondVar* cv, Mutex* mu) {
  Released(mu, 0);
  PreLock(mu, 0);
  HLAB_REAL(HLAB_CONDVAR(4WaitEPNS0_5MutexE))(cv, mu);
  PostLock(mu, 0);
}
bool HLAB_REAL(HLAB_CONDVAR(15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE))(
    CondVar* cv, Mutex* mu, Duration d);
bool HLAB_WRAP(HLAB_CONDVAR(15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE))(
    CondVar* cv, Mutex* mu, Duration d) {
  Released(mu, 0);
  PreLock(mu, 0);
  bool r = HLAB_REAL(
      HLAB_CONDVAR(15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE))(cv, mu, d);
  PostLock(mu, 0);
  return r;
}
bool HLAB_REAL(HLAB_CONDVAR(16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE))(
    CondVar* cv, Mutex* mu, Time t);
bool HLAB_WRAP(HLAB_CONDVAR(16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE))(
    CondVar* cv, Mutex* mu, Time t) {
  Released(mu, 0);
  PreLock(mu, 0);
  bool r = HLAB_REAL(HLAB_CONDVAR(16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE))(
      cv, mu, t);
  PostLock(mu, 0);
  return r;
}

// Notification::Notify() releases what WaitForNotification*() acquires.
void __real__ZN4absl7debian312Notification6NotifyEv(Notification* n);
void __wrap__ZN4absl7debian312Notification6NotifyEv(Notification* n) {
  __tsan_release(n);
  __real__ZN4absl7debian312Notification6NotifyEv(n);
}
void __real__ZNK4absl7debian312Notification19WaitForNotificationEv(
    const Notification* n);
void __wrap__ZNK4absl7debian312Notification19WaitForNotificationEv(
    const Notification* n) {
  __real__ZNK4absl7debian312Notification19WaitForNotificationEv(n);
  __tsan_acquire(const_cast<Notification*>(n));
}
bool __real__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const Notification* n, Duration d);
bool __wrap__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const Notification* n, Duration d) {
  bool notified =
      __real__ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
          n, d);
  if (notified) __tsan_acquire(const_cast<Notification*>(n));
  return notified;
}

}  // extern "C"
