// ThreadSanitizer annotations for Debian's uninstrumented gRPC's completion
// queues (the TSan tree of scripts/sanitize.sh). A completion passes from
// the thread that ends an operation (grpc_cq_end_op: a batch done, an
// alarm fired, a reactor's Finish) to the thread that takes it from the
// queue (grpc_completion_queue_next: gRPC C++'s callback threads, which
// then run the reactor's OnDone, OnWriteDone or alarm callback;
// grpc_completion_queue_pluck: a synchronous client call) through a
// lock-free queue inside libgrpc, which TSan cannot see. Without this file
// the CallOpSet that one thread fills and the next one finalizes, and a
// reactor's state, look like races (docs/testing.md, "Sanitizers").
//
// Like tsan_absl_sync.cc, this file defines the three functions in every
// binary of the TSan tree, which exports them (tsan_absl.cmake); libgrpc
// and libgrpc++ call them through their PLT, so they come here. Ending an
// operation releases its tag; taking the tag's event from a queue acquires
// it: exactly the edge the queue gives, per tag, and no other.
//
// Symbols of Debian 12's gRPC 1.51 (abseil's inline namespace debian3).
#include <sanitizer/tsan_interface.h>

#include <grpc/grpc.h>

#include "tests/sanitizers/tsan_next_symbol.h"

namespace {

template <typename Fn>
Fn Next(const char* symbol) {
  return hlab::tsan::NextSymbol<Fn>("tsan_grpc_cq", symbol);
}

// An event taken from a queue: the thread now sees what was done before
// its operation ended.
grpc_event Taken(grpc_event ev) {
  if (ev.type == GRPC_OP_COMPLETE) __tsan_acquire(ev.tag);
  return ev;
}

struct StatusByReference;  // absl::Status, passed as a pointer (Itanium ABI)
struct Completion;         // grpc_cq_completion

}  // namespace

extern "C" {

// void grpc_cq_end_op(grpc_completion_queue*, void* tag, absl::Status,
//                     void (*done)(void*, grpc_cq_completion*),
//                     void* done_arg, grpc_cq_completion*, bool internal)
void _Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_completionES1_S6_b(
    grpc_completion_queue* cq, void* tag, StatusByReference* error,
    void (*done)(void*, Completion*), void* done_arg, Completion* storage,
    bool internal) {
  static const auto next = Next<
      decltype(&_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_completionES1_S6_b)>(
      "_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_"
      "P18grpc_cq_completionES1_S6_b");
  __tsan_release(tag);
  next(cq, tag, error, done, done_arg, storage, internal);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq,
                                      gpr_timespec deadline, void* reserved) {
  static const auto next =
      Next<decltype(&grpc_completion_queue_next)>("grpc_completion_queue_next");
  return Taken(next(cq, deadline, reserved));
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag,
                                       gpr_timespec deadline, void* reserved) {
  static const auto next = Next<decltype(&grpc_completion_queue_pluck)>(
      "grpc_completion_queue_pluck");
  return Taken(next(cq, tag, deadline, reserved));
}

}  // extern "C"
