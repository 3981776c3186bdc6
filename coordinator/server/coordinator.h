// Coordinator: the hlab-coordinator process minus its flags. It owns the
// store, the query engine, the sweep catalog, the metrics and their
// exposer, the gRPC server (ClientService, WorkerService, health checking,
// reflection), the lease reaper thread and the sweep fitter thread
// (automatic power-law fits of finished sweeps, live predictions of
// running ones).
//
// Start-up rebuilds everything from the database: sweeps and their plans,
// runs, tasks with their leases and attempts, workers. Leases still valid
// stay with their workers (who carry on heartbeating); expired ones are
// requeued by the reaper's first tick. There is no other in-memory state.
//
// Security: with a tokens file every RPC needs a bearer token (auth.h);
// without one the coordinator refuses to listen anywhere but loopback.
// TLS when tls_cert and tls_key are given.
//
// Thread-safety: Start, Shutdown and the accessors from one thread; the
// services run on gRPC's threads.
//
//   CoordinatorOptions options;
//   options.db_path = "hlab.db";
//   options.listen = "127.0.0.1:0";
//   HLAB_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Start(options));
//   std::cout << "listening on " << coordinator->address() << "\n";
//   coordinator->Wait();
#ifndef HLAB_COORDINATOR_SERVER_COORDINATOR_H_
#define HLAB_COORDINATOR_SERVER_COORDINATOR_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/server/client_service.h"
#include "coordinator/server/context.h"
#include "coordinator/server/fit_scheduler.h"
#include "coordinator/server/handler_pool.h"
#include "coordinator/server/lease_reaper.h"
#include "coordinator/server/metrics.h"
#include "coordinator/server/worker_service.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"

namespace hlab::coordinator {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:50151";         // host:port; port 0 picks one
  std::string db_path = "hlab.db";                // created if missing
  std::string metrics_listen = "127.0.0.1:9151";  // "none": no exposer
  std::string tokens_file;        // empty: no auth, loopback only
  std::string tls_cert, tls_key;  // PEM files; both or neither
  // This coordinator's build (BuildVersion(), set by hlab-coordinator): a
  // worker that registers with another is logged with a warning.
  std::string version;
  // Accept a --db directory on a network filesystem (common/filesystem.h).
  bool allow_network_fs = false;
  absl::Duration lease = absl::Seconds(30);
  absl::Duration reaper_interval = absl::Seconds(1);
  bool start_reaper = true;  // tests drive LeaseReaper::Tick themselves
  absl::Duration max_lease_wait = absl::Seconds(5);
  absl::Duration expiry_backoff = absl::Seconds(10);
  // Automatic power-law fits of finished sweeps (fit_scheduler.h): on/off,
  // bootstrap resamples (capped by the spec's fit.bootstrap) and threads.
  bool auto_fit = true;
  // Live predictions: refit a running sweep whenever a run finishes and
  // predict its unfinished runs (fit_scheduler.h); same resamples, threads.
  bool live_predictions = true;
  int fit_bootstrap = 200;
  int fit_threads = 1;
  absl::Duration fit_interval = absl::Seconds(5);
  std::string fit_binary;  // hlab-sweep-fit; empty: next to the executable
  Clock clock = [] { return absl::Now(); };
};

// Whether "host:port" names a loopback host (127.x, ::1, localhost).
bool IsLoopbackAddress(const std::string& address);

class Coordinator {
 public:
  // Opens the store and starts serving. InvalidArgument for bad options
  // (non-loopback listen without tokens, one of tls_cert/tls_key, a bad
  // lease, a tokens file or PEM file that is missing or malformed);
  // Unavailable if an address cannot be bound (in use); FailedPrecondition
  // for a --db directory on a network filesystem; store errors as
  // Store::Open returns them.
  static absl::StatusOr<std::unique_ptr<Coordinator>> Start(
      CoordinatorOptions options);
  ~Coordinator();

  // "host:port" actually bound (the port resolved when 0 was asked).
  std::string address() const;
  int port() const { return port_; }
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }

  // Graceful: stops taking calls, ends open streams, stops the reaper and
  // drains the store's writes. Idempotent.
  void Shutdown();
  // Blocks until Shutdown (from another thread).
  void Wait();

  store::Store* store() { return store_.get(); }
  LeaseReaper* reaper() { return reaper_.get(); }
  FitScheduler* fitter() { return fitter_.get(); }
  ServiceContext* context() { return &context_; }
  CoordinatorMetrics* metrics() { return metrics_.get(); }

 private:
  Coordinator() = default;

  CoordinatorOptions options_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::QueryEngine> query_;
  std::unique_ptr<SweepCatalog> catalog_;
  ServiceContext context_;
  // Declared before server_ so they outlive it: its shutdown waits for the
  // calls they answer.
  std::unique_ptr<HandlerPool> worker_handlers_;
  std::unique_ptr<HandlerPool> client_handlers_;
  std::unique_ptr<ClientServiceImpl> client_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<LeaseReaper> reaper_;
  std::unique_ptr<FitScheduler> fitter_;
  int port_ = 0;
  bool shut_down_ = false;
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_COORDINATOR_H_
