// RunFigures: a sweep's runs with the final figures its power-law fits take
// (and `hlab report` tabulates), read with one SQL query over the store's
// run_summary view and evals table. The one reader of these rows, for the
// coordinator's fits (sweep_fits.h) and the report (report/study_data.h).
//
// Figures: N = non-embedding parameters, D = planned tokens; the final
// training loss and final validation loss (run_summary: the newest
// "val_loss" eval, else metric); the newest "log_longppl" eval, else the log
// of the newest positive "longppl" eval; the newest "niah_acc" eval; the
// newest receptive-field changes (rf_<full|efficient>_delta_<val_loss|
// log_longppl>, appendix D.1); the newest gradient profile (grad_reach and
// its details, appendix D.3); the newest layer probes (probe_acc and its
// details, appendix D.2); the newest retrieval-head trace (retrieval_score
// and its details, appendix D.4).
//
// Thread-safety: ReadRunFigures is reentrant (as thread-safe as `query`).
//
//   HLAB_ASSIGN_OR_RETURN(
//       std::vector<RunFigures> runs,
//       ReadRunFigures([&](const std::string& sql) {
//         return engine.Run(sql, {});
//       }, sweep_id));
//   for (const RunFigures& r : runs) std::optional<double> loss =
//       r.Target("loss");
#ifndef HLAB_FITS_RUN_FIGURES_H_
#define HLAB_FITS_RUN_FIGURES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/store/query.h"

namespace hlab::fits {

struct RunFigures {
  std::string run_id;
  std::string arch;
  std::string scale;
  // PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, PREDICTED (early stop).
  std::string state;
  double n = 0;      // non-embedding parameters
  double d = 0;      // planned tokens
  int64_t seed = 0;  // the training seed
  std::optional<double> train_loss;
  std::optional<double> val_loss;
  std::optional<double> log_longppl;
  std::optional<double> niah_accuracy;
  // Appendix D.1: restricted minus unrestricted, with the full layers
  // restricted and with the efficient layers restricted.
  std::optional<double> rf_full_delta_loss, rf_full_delta_log_longppl;
  std::optional<double> rf_efficient_delta_loss, rf_efficient_delta_log_longppl;
  // Appendix D.3: the newest grad_reach and its details (the JSON of the
  // binned profile, eval/gradient_profile.h); "" without one.
  std::optional<double> grad_reach;
  std::string grad_profile;
  // Appendix D.2: the newest probe_acc (the peak layer's test accuracy) and
  // its details (every layer's, eval/probing.h); "" without one.
  std::optional<double> probe_accuracy;
  std::string probe_layers;
  // Appendix D.4: the newest retrieval_score (the top head's) and its
  // details (every head's, eval/retrieval_heads.h); "" without one.
  std::optional<double> retrieval_score;
  std::string retrieval_heads;

  bool succeeded() const { return state == "SUCCEEDED"; }
  // The value fitted for `target` ("loss": validation, else training loss;
  // "longppl": log LongPPL), if known; nullopt for another target.
  std::optional<double> Target(const std::string& target) const;
};

// Runs one read-only SQL query: QueryEngine::Run, or a report's RowSource.
using RunQuery =
    std::function<absl::StatusOr<store::QueryResult>(const std::string& sql)>;

// Every run of sweep `sweep_id`, whatever its state, by architecture, N, D,
// then run id. Errors are the query's.
absl::StatusOr<std::vector<RunFigures>> ReadRunFigures(const RunQuery& query,
                                                       int64_t sweep_id);

}  // namespace hlab::fits

#endif  // HLAB_FITS_RUN_FIGURES_H_
