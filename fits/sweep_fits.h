// Sweep fits: the power laws L(N, D) = E + A/N^alpha + B/D^beta of a sweep's
// succeeded runs, one per architecture and target of the spec's `fit`
// section, read straight from the store's database with SQL (the runs with
// ReadRunFigures, run_figures.h, as `hlab report` reads them).
//
// Points: N = the run's non-embedding parameters, D = its planned tokens,
// and the target's final value: "loss" is the final validation loss (the
// newest "val_loss" eval or metric), else the final training loss;
// "longppl" the newest "log_longppl" eval (or the log of a "longppl" eval),
// and a run without one is left out. Runs of fit_scales are fitted, runs of
// verify_scales give R^2 on held-out points. Failed and cancelled runs are
// left out, and so are PREDICTED ones (early stop, docs/sweeps.md): never
// trained, they have no measured value, and a prediction never enters a
// fit as data. Each SweepFit names them (predicted_runs), and its stored
// details say how many points were measured.
//
// An architecture with fewer than kMinFitPoints fit points is not fitted;
// its SweepFit says why (`reason`), it is not an error.
//
// Used by the coordinator (FitScheduler: automatic fits when a sweep
// finishes, and live predictions of its unfinished runs while it runs,
// SweepFitOptions::predict_unfinished) and by `hlab fit --db FILE`
// (offline, on a read-only database).
//
// Thread-safety: reentrant (the query engine is thread-safe).
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<SweepFit> fits,
//                         FitSweepRuns(*query, sweep_id, spec.fit(), {}));
//   for (const SweepFit& f : fits)
//     if (f.fitted) HLAB_RETURN_IF_ERROR(store->RecordFit(ToFitRecord(f),
//     now));
#ifndef HLAB_FITS_SWEEP_FITS_H_
#define HLAB_FITS_SWEEP_FITS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/analyze.h"
#include "coordinator/store/query.h"
#include "coordinator/store/types.h"
#include "hlab/v1/sweep.pb.h"

namespace hlab::fits {

// Fewer fit points than this for an architecture: no fit (FitPowerLaw's own
// minimum; five parameters).
inline constexpr int kMinFitPoints = 5;

struct SweepFitOptions {
  // Bootstrap resamples: min(this, the spec's fit.bootstrap); 0 = none.
  int bootstrap = 200;
  int threads = 1;  // <= 0: one per hardware thread
  uint64_t seed = 42;
  // L-BFGS starts; Chinchilla's 4500 unless set (tests use fewer).
  std::optional<analysis::StartGrid> grid;
  std::string arch;    // empty: every architecture
  std::string target;  // empty: every target of the spec
  // Live predictions (the coordinator, while a sweep runs): each fit also
  // predicts the target of every PENDING and RUNNING run of its
  // architecture (SweepFit::predictions) with the profile-likelihood
  // prediction interval; with fewer than 6 fit points (no profile
  // intervals) with the bootstrap's percentile interval; without either,
  // the fit's point alone. The bootstrap then runs only where there are no
  // profile intervals.
  bool predict_unfinished = false;
};

struct SweepFit {
  int64_t sweep_id = 0;
  std::string arch;
  std::string target;  // "loss" or "longppl"
  int n_fit = 0;       // runs with the target in fit scales
  int n_verify = 0;    // runs with the target in verify scales
  // The architecture's PREDICTED runs (early stop): not points, by id.
  std::vector<std::string> predicted_runs;
  bool fitted = false;
  std::string reason;               // why not fitted (or why fitting failed)
  analysis::PowerLawReport report;  // when fitted
  // With predict_unfinished, when fitted: one per PENDING or RUNNING run
  // of the architecture, by N, D, run id. Never a measurement.
  std::vector<store::Prediction> predictions;
};

// One SweepFit per (architecture with a succeeded run, target), sorted by
// architecture then target order. InvalidArgument for an unknown target
// name; query errors as QueryEngine::Run returns them.
absl::StatusOr<std::vector<SweepFit>> FitSweepRuns(
    store::QueryEngine& query, int64_t sweep_id, const hlab::v1::FitSpec& fit,
    const SweepFitOptions& options);

// The sweep `ref` of a database (its id, or its name: the newest sweep of
// that name; empty: the only sweep): its id and stored spec. NotFound when
// no sweep matches (or the database has none); InvalidArgument when `ref` is
// empty and the database has several sweeps; query errors as Run returns
// them.
absl::Status FindStoredSweep(store::QueryEngine& query, const std::string& ref,
                             int64_t* id, std::string* spec);

// The fits-table row of a fitted SweepFit: coefficients, R^2 (r2_verify NaN
// without held-out points: stored NULL), CIs as JSON {"E": [lo, hi], ...,
// "resamples", "confidence"} and the whole report as details, with
// "measured_points" (n_fit + n_verify: every point is a measured run) and
// "predicted_runs" (the ids of PREDICTED runs left out).
store::FitRecord ToFitRecord(const SweepFit& fit);

// One line per SweepFit for the sweep's event log: "loss/swa: alpha=...,
// R^2 fit ..." or the reason it was not fitted, then "; 2 runs predicted
// (stopped early), not fitted" when it has PREDICTED runs.
std::string DescribeSweepFit(const SweepFit& fit);

}  // namespace hlab::fits

#endif  // HLAB_FITS_SWEEP_FITS_H_
