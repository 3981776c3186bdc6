// ServiceContext: what the coordinator's services and threads share (the
// store, the query engine, the clock, settings, metrics, authorization).
// Owned by Coordinator (coordinator.h); services hold a pointer.
//
// Thread-safety: the members are thread-safe themselves; the struct is
// immutable after the coordinator starts.
//
//   absl::Time now = context->clock();
//   HLAB_RETURN_IF_ERROR(context->auth.Check(metadata, Role::kRead));
#ifndef HLAB_COORDINATOR_SERVER_CONTEXT_H_
#define HLAB_COORDINATOR_SERVER_CONTEXT_H_

#include <functional>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "coordinator/server/auth.h"
#include "coordinator/server/metrics.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"

namespace hlab::coordinator {

class HandlerPool;
class SweepCatalog;

// The coordinator's notion of "now"; tests inject a fake one.
using Clock = std::function<absl::Time()>;

struct ServiceContext {
  store::Store* store = nullptr;
  store::QueryEngine* query = nullptr;
  SweepCatalog* catalog = nullptr;
  CoordinatorMetrics* metrics = nullptr;
  Authorizer auth = Authorizer::Disabled();
  Clock clock = [] { return absl::Now(); };
  // This coordinator's build (CoordinatorOptions::version); empty: unknown.
  std::string version;
  // Lease time; workers heartbeat every lease / 6.
  absl::Duration lease = absl::Seconds(30);
  // Longest Lease long poll, and how often it looks for work meanwhile.
  absl::Duration max_lease_wait = absl::Seconds(5);
  absl::Duration lease_poll = absl::Milliseconds(100);
  // Backoff before retrying a task whose lease expired.
  absl::Duration expiry_backoff = absl::Seconds(10);
  // Limit and default of Query's time limit.
  absl::Duration max_query_time = absl::Seconds(30);
  // Where the worker and client APIs' handlers that wait on the store run
  // (handler_pool.h); null: on gRPC's own threads (tests of one service).
  HandlerPool* worker_handlers = nullptr;
  HandlerPool* client_handlers = nullptr;
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_CONTEXT_H_
