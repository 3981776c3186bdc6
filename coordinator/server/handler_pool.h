// HandlerPool: threads of the coordinator's own that run the RPC handlers
// which wait on the store (a write's group commit, a read), so that gRPC's
// callback threads never do. gRPC runs callback-API handlers on a few
// threads (two on a 2-core machine); a handler that waited there for a
// commit held up every other call, among them the heartbeats of hundreds
// of workers (docs/performance.md, "A fleet at realistic churn").
//
// A pool runs its work in the order it was queued, on `threads` threads;
// the destructor runs what is still queued, then joins. The coordinator
// keeps one pool for the worker API and one for the client API, so a slow
// query never delays a heartbeat.
//
// Thread-safety: thread-safe.
//
//   HandlerPool pool(16, "worker-api");
//   return AnswerOnPool(&pool, ctx, [=] { return DoComplete(*request); });
#ifndef HLAB_COORDINATOR_SERVER_HANDLER_POOL_H_
#define HLAB_COORDINATOR_SERVER_HANDLER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "proto/grpc_status.h"

namespace hlab::coordinator {

class HandlerPool {
 public:
  // `name` names the threads (at most 15 characters with the index).
  HandlerPool(int threads, std::string name);
  ~HandlerPool();
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Queues `work` for a pool thread.
  void Run(std::function<void()> work);

  // Work queued and not yet started.
  int64_t queued() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// Answers a unary call with the status `work()` returns, computed on `pool`
// (inline when `pool` is null: tests that build a service alone). `work`
// may use the call's request and response until it returns.
template <typename Work>
grpc::ServerUnaryReactor* AnswerOnPool(HandlerPool* pool,
                                       grpc::CallbackServerContext* ctx,
                                       Work work) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto answer = [reactor, work = std::move(work)]() mutable {
    const absl::Status status = work();
    reactor->Finish(ToGrpcStatus(status));
  };
  if (pool == nullptr) {
    answer();
  } else {
    pool->Run(std::move(answer));
  }
  return reactor;
}

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_HANDLER_POOL_H_
