// FitScheduler: the coordinator's automatic power-law fits. A thread of its
// own (fits take seconds to minutes, so never a gRPC thread or the lease
// reaper) looks every `interval` for sweeps whose runs are all finished --
// none PENDING or RUNNING, at least one SUCCEEDED, the sweep not cancelled --
// and fits each once: every architecture and target of the spec's `fit`
// section, stored with Store::RecordFit (table fits, view fit_summary), then
// one "fits" event in the sweep's event log ("fits ready: ..." with a line
// per fit, or why there were none).
//
// The fit itself runs in a child process, hlab-sweep-fit (sweep_fits.h on
// the database, read-only), which prints the results as JSON: linking Ceres
// into hlab-coordinator would bring ~120 KiB of static TLS (OpenBLAS, METIS,
// glog), more than civetweb's thread stacks, and /metrics could not start.
//
// Once per sweep, also across restarts: a sweep with rows in `fits` or a
// "fits" event is skipped. An architecture with fewer than 5 points is not
// fitted; the event and the log say why.
//
// Live predictions (docs/coordinator.md, "Live predictions"): in the same
// rounds, each unfinished sweep with at least kMinPredictionRuns succeeded
// runs is refitted whenever its number of succeeded runs changed since its
// newest prediction generation (so once per finished run, or per round
// when several finish during one refit; the demo's takes ~10 s on one
// thread, docs/coordinator.md). The same child with --predict fits every
// architecture and target on the succeeded runs only and predicts the
// final target of every pending and running run with an interval
// (sweep_fits.h, SweepFitOptions::predict_unfinished), and the final train
// loss of each one that has training points from its own curve
// (fits/curve_backtest.h, PredictUnfinished). For those curves a sweep
// with a run in training is also refitted every `curve_refresh`, even
// without the 5 runs a law needs. The result is one generation, stored
// with Store::RecordPredictions (tables prediction_generations and
// predictions) and announced by a "predictions" event. A restarted
// coordinator reads the newest generation back and refits only when runs
// finished meanwhile (or the curves are due). A prediction is never a
// measurement: it is stored apart and no fit reads it.
//
// Early stop (early_stop.h): after each generation it stores, and once
// per sweep on the stored generation after a restart, the sweep's pending
// runs that the generation knows within the spec's
// adaptive.stop_when.interval_below become PREDICTED.
//
// The adaptive order (adaptive_order.h): each round, after the live
// predictions, every unfinished sweep with schedule_policy: adaptive whose
// succeeded runs or newest generation changed since it was last ordered,
// or that has a pending TRAIN or DECAY task without a place (requeued
// after a lost lease, resumed), is ranked again; after a start, each once.
//
// Stop ends a fit in progress (SIGTERM to the child); that sweep is fitted
// after the next start.
//
// Thread-safety: Start/Stop from one thread; FitFinishedSweeps is
// thread-safe (calls are serialised).
//
//   FitScheduler fitter(&context, options);
//   fitter.Start();           // or, in tests: fitter.FitFinishedSweeps();
//                             //               fitter.PredictRunningSweeps();
//   fitter.Stop();            // also in the destructor
#ifndef HLAB_COORDINATOR_SERVER_FIT_SCHEDULER_H_
#define HLAB_COORDINATOR_SERVER_FIT_SCHEDULER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/periodic_thread.h"
#include "coordinator/server/context.h"

namespace hlab::coordinator {

struct FitSchedulerOptions {
  absl::Duration interval = absl::Seconds(5);
  // Resamples (capped by the spec's fit.bootstrap) and threads; the fit
  // itself uses Chinchilla's 4500-start grid.
  int bootstrap = 200;
  int threads = 1;
  bool quick_grid = false;  // 32 starts instead of 4500 (tests)
  // The hlab-sweep-fit binary; empty: next to this executable.
  std::string binary;
  // What the thread does each round: fit finished sweeps (once each), and
  // refit running sweeps to predict their unfinished runs.
  bool fit_finished = true;
  bool predict = true;
  // A running sweep whose runs train is also refitted this long after its
  // last refit, so that the runs' own-curve predictions follow their
  // training; zero: only when a run finishes.
  absl::Duration curve_refresh = absl::Minutes(5);
  // At most about this fraction of the fit thread's time goes to one
  // sweep's live predictions: after a refit that took d, the next waits
  // until d * (1 / fraction - 1) has passed, so a sweep whose runs finish
  // faster than it refits does not keep a core busy. 0: no wait (tests);
  // the coordinator uses 0.25.
  double predict_busy_fraction = 0;
};

// A running sweep is refitted for predictions from this many succeeded
// runs on (the fewest one architecture's law needs, fits/sweep_fits.h).
inline constexpr int kMinPredictionRuns = 5;

class FitScheduler {
 public:
  FitScheduler(ServiceContext* context, FitSchedulerOptions options)
      : context_(context), options_(options) {}
  ~FitScheduler() { Stop(); }
  FitScheduler(const FitScheduler&) = delete;
  FitScheduler& operator=(const FitScheduler&) = delete;

  // Starts the thread; logs a warning and does nothing when the
  // hlab-sweep-fit binary is missing.
  void Start();
  void Stop();

  // Fits every finished sweep not fitted yet; returns how many sweeps it
  // handled (fitted, or recorded why not). A sweep whose fit fails (the
  // child failed, a store write failed) is logged and not tried again until
  // a restart; query errors end the round; Cancelled when Stop ended a fit.
  absl::StatusOr<int> FitFinishedSweeps();

  // Refits every unfinished sweep whose succeeded runs changed since its
  // newest prediction generation (after a restart: the stored one), or
  // whose newest refit is curve_refresh old while a run of it trains, and
  // stores a new generation of predictions of its pending and running
  // runs; returns how many generations it stored. A refit with nothing to
  // predict (no law, no curve) stores none. A failed refit is logged
  // and not tried again until another run of the sweep finishes; query
  // and store errors end the round; Cancelled when Stop ended a fit.
  absl::StatusOr<int> PredictRunningSweeps();

  // Ranks every unfinished adaptive sweep whose succeeded runs or newest
  // prediction generation changed since its last ranking here, or with a
  // pending TRAIN or DECAY task that has no order (each once after a
  // start); returns how many it ranked. Query and store errors end the
  // round.
  absl::StatusOr<int> OrderAdaptiveSweeps();

 private:
  // Whether the sweep has fit rows or a "fits" event already.
  absl::StatusOr<bool> AlreadyFitted(int64_t sweep_id);
  absl::Status RunSweepFit(int64_t sweep_id);
  // Runs hlab-sweep-fit on the sweep (with --predict: predictions too);
  // its JSON result. Internal if it failed or printed no result; Cancelled
  // when Stop ended it.
  absl::StatusOr<nlohmann::json> RunFitChild(int64_t sweep_id, bool predict);
  // The sweep's SUCCEEDED runs.
  absl::StatusOr<int> SucceededRuns(int64_t sweep_id);
  // One prediction generation; false when no law could be fitted yet.
  absl::StatusOr<bool> RunSweepPrediction(int64_t sweep_id, int n_succeeded);
  std::string Binary() const;

  ServiceContext* const context_;
  const FitSchedulerOptions options_;
  PeriodicThread thread_;
  absl::Mutex mu_;
  // Stop was called: a fit in progress or about to start ends.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  pid_t child_ ABSL_GUARDED_BY(mu_) = 0;  // the running hlab-sweep-fit
  absl::Mutex round_mu_;
  std::set<int64_t> done_ ABSL_GUARDED_BY(round_mu_);
  // Per running sweep: its succeeded runs and the time when it was last
  // refitted (or tried) for predictions.
  struct Refit {
    int n_succeeded = -1;  // -1: never
    absl::Time time = absl::InfinitePast();
    absl::Duration took = absl::ZeroDuration();
  };
  std::map<int64_t, Refit> predicted_at_ ABSL_GUARDED_BY(round_mu_);
  // Per adaptive sweep: (succeeded runs, newest generation) when it was
  // last ranked.
  std::map<int64_t, std::pair<int, int64_t>> ordered_at_
      ABSL_GUARDED_BY(round_mu_);
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_FIT_SCHEDULER_H_
