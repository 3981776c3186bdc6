// ThreadSanitizer annotations for Debian's uninstrumented abseil (the TSan
// tree of scripts/sanitize.sh). libabsl_synchronization is not compiled with
// -fsanitize=thread, so TSan does not see absl::Mutex, absl::CondVar or
// absl::Notification synchronize (their fast paths are plain atomics and
// futexes inside the library) and would report every ABSL_GUARDED_BY member
// as a race.
//
// This file defines those functions, under their mangled names, in every
// binary of the TSan tree, which exports them (tests/sanitizers/
// tsan_absl.cmake): the dynamic linker looks a symbol up in the executable
// first, so every call, hlab's and those that Debian's libgrpc, libgrpc++
// and libgpr make through their PLT (gpr_mu_lock, grpc_core::Mutex and
// CondVar, gRPC's executor, thread pool and timer queues) comes here. Each
// tells TSan about the lock, unlock, release or acquire around the real
// function, found with dlsym(RTLD_NEXT) in libabsl_synchronization, as
// abseil itself does when it is built with TSan (ABSL_TSAN_MUTEX_* in
// mutex.cc). So TSan sees the happens-before edges of gRPC's own locks: a
// reactor's state handed from one of gRPC's threads to another through a
// locked queue (docs/testing.md, "Sanitizers").
//
// Between pre_lock and post_lock TSan ignores memory accesses, so the
// Conditions that abseil evaluates inside Lock, Unlock and Await are not
// reported either (they run with the mutex held).
//
// This file does not include absl/synchronization/mutex.h: it would declare
// the same names as C++ members. Mutex, CondVar, Condition and Notification
// are opaque here. The symbols are those of Debian 12's abseil 20220623
// (inline namespace debian3); on another abseil the real functions are not
// found and the first call aborts with a message.
#include <sanitizer/tsan_interface.h>

#include "absl/time/time.h"
#include "tests/sanitizers/tsan_next_symbol.h"

namespace {

// The linker's bounds of this executable's code (GNU ld's default script).
extern "C" char __executable_start[], etext[];
// The dynamic annotations of TSan's runtime (tsan_interface_ann.cpp).
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);

bool CalledFromThisBinary(const void* pc) {
  return pc >= __executable_start && pc < etext;
}

struct Mutex;
struct CondVar;
struct Condition;
struct Notification;
using absl::Duration;
using absl::Time;

// The definition that `symbol` has after this binary's:
// libabsl_synchronization's.
template <typename Fn>
Fn Next(const char* symbol) {
  return hlab::tsan::NextSymbol<Fn>("tsan_absl_sync", symbol);
}

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

// Calls that abseil makes to these functions from inside one of them
// (CondVar::WaitWithTimeout calls WaitWithDeadline, Notification::Notify
// locks its mutex) only forward: the outermost call tells TSan, once.
thread_local int depth = 0;
class Nested {
 public:
  Nested() : inner_(depth++ > 0) {}
  ~Nested() { --depth; }
  Nested(const Nested&) = delete;
  Nested& operator=(const Nested&) = delete;
  explicit operator bool() const { return inner_; }

 private:
  const bool inner_;
};

}  // namespace

// `next`: the real function, looked up on the first call; `nested`: whether
// this call comes from inside another of this file's functions.
#define HLAB_NEXT(sym, args)                           \
  static const auto next = Next<decltype(&sym)>(#sym); \
  const Nested nested;                                 \
  if (nested) return next args

// Defines sym, a lock-like function (the mutex is held on return).
#define HLAB_LOCKING(sym, flags, ret, params, args) \
  ret sym params {                                  \
    HLAB_NEXT(sym, args);                           \
    PreLock(mu, flags);                             \
    ret r = next args;                              \
    PostLock(mu, flags);                            \
    return r;                                       \
  }

// Defines sym, a wait that releases the mutex and holds it again on return.
#define HLAB_WAITING(sym, ret, params, args) \
  ret sym params {                           \
    HLAB_NEXT(sym, args);                    \
    Released(mu, 0);                         \
    PreLock(mu, 0);                          \
    ret r = next args;                       \
    PostLock(mu, 0);                         \
    return r;                                \
  }

extern "C" {

// void Mutex::Lock(), ReaderLock(), Unlock(), ReaderUnlock().
void _ZN4absl7debian35Mutex4LockEv(Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian35Mutex4LockEv, (mu));
  PreLock(mu, 0);
  next(mu);
  PostLock(mu, 0);
}
void _ZN4absl7debian35Mutex10ReaderLockEv(Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian35Mutex10ReaderLockEv, (mu));
  PreLock(mu, kRead);
  next(mu);
  PostLock(mu, kRead);
}
void _ZN4absl7debian35Mutex6UnlockEv(Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian35Mutex6UnlockEv, (mu));
  __tsan_mutex_pre_unlock(mu, 0);
  next(mu);
  __tsan_mutex_post_unlock(mu, 0);
}
void _ZN4absl7debian35Mutex12ReaderUnlockEv(Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian35Mutex12ReaderUnlockEv, (mu));
  __tsan_mutex_pre_unlock(mu, kRead);
  next(mu);
  __tsan_mutex_post_unlock(mu, kRead);
}

// bool Mutex::TryLock(), ReaderTryLock().
bool _ZN4absl7debian35Mutex7TryLockEv(Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian35Mutex7TryLockEv, (mu));
  __tsan_mutex_pre_lock(mu, __tsan_mutex_try_lock);
  bool locked = next(mu);
  __tsan_mutex_post_lock(
      mu, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
      0);
  return locked;
}
bool _ZN4absl7debian35Mutex13ReaderTryLockEv(Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian35Mutex13ReaderTryLockEv, (mu));
  const unsigned flags = kRead | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(mu, flags);
  bool locked = next(mu);
  __tsan_mutex_post_lock(
      mu, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

// void Mutex::LockWhen(const Condition&), ReaderLockWhen(const Condition&).
void _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(Mutex* mu,
                                                       const Condition& c) {
  HLAB_NEXT(_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE, (mu, c));
  PreLock(mu, 0);
  next(mu, c);
  PostLock(mu, 0);
}
void _ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE(
    Mutex* mu, const Condition& c) {
  HLAB_NEXT(_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE, (mu, c));
  PreLock(mu, kRead);
  next(mu, c);
  PostLock(mu, kRead);
}

// bool Mutex::LockWhenWith{Timeout,Deadline}(const Condition&, ...): the
// mutex is held on return either way.
HLAB_LOCKING(
    _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE,
    0, bool, (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
HLAB_LOCKING(
    _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE, 0,
    bool, (Mutex * mu, const Condition& c, Time t), (mu, c, t))
HLAB_LOCKING(
    _ZN4absl7debian35Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE,
    kRead, bool, (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
HLAB_LOCKING(
    _ZN4absl7debian35Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE,
    kRead, bool, (Mutex * mu, const Condition& c, Time t), (mu, c, t))

// Mutex::Await*(const Condition&, ...): called with the mutex held, which
// abseil releases while it waits and holds again on return.
void _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(Mutex* mu,
                                                    const Condition& c) {
  HLAB_NEXT(_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE, (mu, c));
  Released(mu, 0);
  PreLock(mu, 0);
  next(mu, c);
  PostLock(mu, 0);
}
HLAB_WAITING(
    _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE,
    bool, (Mutex * mu, const Condition& c, Duration d), (mu, c, d))
HLAB_WAITING(
    _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE, bool,
    (Mutex * mu, const Condition& c, Time t), (mu, c, t))

// Mutex::~Mutex(): forget the mutex (its memory may hold another later).
// TSan counts a destroy as a write to the mutex, to catch an unlock racing
// with it. Not for gRPC's own mutexes, destroyed by gRPC: the last unlock
// and the destroy are ordered by a reference count inside libgrpc that TSan
// cannot see (ThreadPool::State, held by a shared_ptr of each of its
// threads), and hlab code never touches a gRPC mutex.
void _ZN4absl7debian35MutexD1Ev(Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian35MutexD1Ev, (mu));
  if (CalledFromThisBinary(__builtin_return_address(0))) {
    __tsan_mutex_destroy(mu, 0);
  } else {
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    __tsan_mutex_destroy(mu, 0);
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
  }
  next(mu);
}

// CondVar::Wait*(Mutex*, ...): the mutex is released while waiting.
void _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(CondVar* cv, Mutex* mu) {
  HLAB_NEXT(_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE, (cv, mu));
  Released(mu, 0);
  PreLock(mu, 0);
  next(cv, mu);
  PostLock(mu, 0);
}
HLAB_WAITING(
    _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE, bool,
    (CondVar * cv, Mutex* mu, Duration d), (cv, mu, d))
HLAB_WAITING(_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE,
             bool, (CondVar * cv, Mutex* mu, Time t), (cv, mu, t))

// Notification::Notify() releases what WaitForNotification*() acquires.
void _ZN4absl7debian312Notification6NotifyEv(Notification* n) {
  HLAB_NEXT(_ZN4absl7debian312Notification6NotifyEv, (n));
  __tsan_release(n);
  next(n);
}
void _ZNK4absl7debian312Notification19WaitForNotificationEv(
    const Notification* n) {
  HLAB_NEXT(_ZNK4absl7debian312Notification19WaitForNotificationEv, (n));
  next(n);
  __tsan_acquire(const_cast<Notification*>(n));
}
bool _ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE(
    const Notification* n, Duration d) {
  HLAB_NEXT(
      _ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE,
      (n, d));
  bool notified = next(n, d);
  if (notified) __tsan_acquire(const_cast<Notification*>(n));
  return notified;
}

}  // extern "C"
