// StudyData: what a study report shows about one sweep, read through a
// RowSource: every run (one row each, whatever its state) with its final
// figures, and the power-law fits per architecture and target.
//
// The Q-gradient hook's metrics: every finite q_grad_norm_* point of the
// sweep's runs; every retrieval_score eval at every step (the
// trajectories of evaluation.trajectory); each run's newest
// multiple-choice scores per task; and each run's newest RULER scores.
//
// Runs: read with fits::ReadRunFigures, the reader of the
// coordinator's fits: N = non-embedding parameters, D = planned tokens; the
// final training loss, the final validation loss (run_summary), the newest
// "log_longppl" eval (else the log of a "longppl" eval) and the newest
// "niah_acc" eval (hlab-eval's accuracy over all cells). The fitted "loss" is
// the validation loss, else the training loss, and "longppl" the log LongPPL
// (RunFigures::Target), as the coordinator's fits take them.
//
// Fits: the rows of the `fits` table for the sweep (coefficients, CIs from
// its `ci` JSON, objective, warnings and ln A, ln B from `details`; an A or
// B that overflowed is stored NULL and read as +inf with its log). When none is
// stored and the source is a database file, they are computed with
// fits::FitSweepRuns as `hlab fit --db` does, and `fits_origin` says
// so; over the Query RPC they cannot be, and `notes` says what to run.
//
// Thread-safety: ReadStudyData is reentrant; StudyData is a plain value.
//
//   HLAB_ASSIGN_OR_RETURN(auto source, DatabaseRowSource::Open(path));
//   HLAB_ASSIGN_OR_RETURN(StudyData study,
//                         ReadStudyData(*source, "demo", StudyOptions()));
//   for (const FitRow& f : study.fits) std::cout << f.arch << " " << f.E;
#ifndef HLAB_REPORT_STUDY_DATA_H_
#define HLAB_REPORT_STUDY_DATA_H_

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/fit.h"
#include "analysis/power_law.h"
#include "fits/run_figures.h"
#include "report/row_source.h"

namespace hlab::report {

// The two fitted targets, in report order, and how figures label them.
inline constexpr const char* kTargets[] = {"loss", "longppl"};
std::string TargetLabel(const std::string& target);  // "loss", "log(LongPPL)"

// A run with its final figures (fits/run_figures.h: the reader the
// coordinator's fits use too).
struct RunRow : fits::RunFigures {
  bool verify = false;  // its scale is one of the spec's verify_scales
};

// A confidence interval [lower, upper]; a bound is nullopt when it is not
// finite (an end the data do not bound, or bootstrap resamples that ran off
// to infinity; stored as null).
struct Interval {
  std::optional<double> lower;
  std::optional<double> upper;
};

struct FitRow {
  std::string arch;
  std::string target;  // "loss" or "longppl"
  bool fitted = true;
  std::string reason;  // when not fitted: why
  double E = 0, A = 0, alpha = 0, B = 0, beta = 0;
  // ln A and ln B (a stored fit's details "a", "b"; else ln of A, B). When
  // a term vanishes (alpha or beta ran off), A or B can exceed a double:
  // the fits table holds NULL, and here A (B) is +inf while log_A (log_B)
  // holds the fitted value, as in analysis::PowerLaw. NaN when unknown.
  double log_A = std::numeric_limits<double>::quiet_NaN();
  double log_B = std::numeric_limits<double>::quiet_NaN();
  // CIs by coefficient name ("E", "A", "alpha", "B", "beta"): the
  // profile-likelihood ones (ci_method "profile", analysis/profile.h), or
  // in fits stored before them the bootstrap's ("bootstrap").
  std::map<std::string, Interval> ci;
  std::string ci_method = "bootstrap";
  double confidence = 0;  // e.g. 0.95; 0 without CIs
  int resamples = 0;      // bootstrap resamples, 0 when none ran
  std::optional<double> objective;
  std::optional<double> r2_fit;
  std::optional<double> r2_verify;  // only with held-out points
  int n_points = 0;
  std::vector<std::string> warnings;
  // Findings that are not warnings (analysis::PowerLawReport::notes).
  std::vector<std::string> notes;

  analysis::PowerLaw Law() const {
    analysis::PowerLaw law{E, A, alpha, B, beta};
    law.log_A = log_A;
    law.log_B = log_B;
    return law;
  }
};

// Appendix D.4's training hook: one full-attention head's q_proj gradient
// norm at one step of a run (metrics q_grad_norm_<head>, <head> "l1h0").
struct QGradPoint {
  std::string run_id;
  std::string head;
  int64_t step = 0;
  double tokens = 0;
  double value = 0;
};

// One stored retrieval_score eval of a run at one training step (every
// step: the run's end, its branch point, evaluation.trajectory's points).
struct RetrievalPoint {
  std::string run_id;
  int64_t step = 0;
  double score = 0;
  std::string details;  // eval/retrieval_heads.h's JSON
};

// One multiple-choice task's scores of a run (eval/multiple_choice.h): its
// mc_acc/<task> and mc_acc_norm/<task> evals at the newest step that has
// them, with n and the stderrs from their details.
struct MultipleChoiceRow {
  std::string run_id, task;
  int64_t step = 0;
  std::optional<double> acc, acc_stderr, acc_norm, acc_norm_stderr;
  int64_t n = 0, num_fewshot = 0;
};

// A RULER score of a run (ruler_score or ruler_score/<task>,
// eval/ruler/ruler.h) at the newest step that has it.
struct RulerPoint {
  std::string run_id;
  std::string metric;
  int64_t step = 0;
  double value = 0;
};

struct StudyData {
  int64_t sweep_id = 0;
  std::string sweep_name;
  std::string source;  // RowSource::Describe()
  std::vector<std::string> fit_scales;
  std::vector<std::string> verify_scales;
  std::vector<RunRow> runs;  // by architecture, N, D, run id
  std::vector<FitRow> fits;  // by architecture, then target
  // The Q-gradient hook's metrics of the sweep's runs, by run, head, step
  // (empty unless the spec set analysis.q_grad_every_steps).
  std::vector<QGradPoint> q_grad;
  // Every retrieval_score eval of the sweep's runs, by run, step (empty
  // unless the spec traced retrieval heads).
  std::vector<RetrievalPoint> retrieval;
  // The multiple-choice scores of the sweep's runs, by run, task (empty
  // unless the spec evaluated evaluation.multiple_choice).
  std::vector<MultipleChoiceRow> multiple_choice;
  // The RULER scores of the sweep's runs, by run, metric (empty unless
  // the spec evaluated evaluation.ruler).
  std::vector<RulerPoint> ruler;
  // "stored" (the fits table), "computed" (FitSweepRuns, none stored) or
  // "none".
  std::string fits_origin = "none";
  std::vector<std::string> notes;  // shown at the top of the report

  // Architectures with at least one run, in run order.
  std::vector<std::string> Architectures() const;
  // The fit of (arch, target), or nullptr when there is none or it failed.
  const FitRow* FindFit(const std::string& arch,
                        const std::string& target) const;
};

struct StudyOptions {
  // Used only when fits are computed (none stored): as `hlab fit --db`.
  int bootstrap = 200;
  int threads = 0;  // <= 0: one per hardware thread
  uint64_t seed = 42;
  std::optional<analysis::StartGrid> grid;  // default: Chinchilla's 4500
};

// Reads sweep `sweep_ref` (an id, or a name: the newest sweep of that name;
// empty: the only sweep). NotFound for an unknown sweep ("no sweep 'x' in
// <source>"), or when the source has no sweeps; InvalidArgument when
// `sweep_ref` is empty and there are several, or the stored spec does not
// parse; query errors as the source returns them.
absl::StatusOr<StudyData> ReadStudyData(RowSource& source,
                                        const std::string& sweep_ref,
                                        const StudyOptions& options);

}  // namespace hlab::report

#endif  // HLAB_REPORT_STUDY_DATA_H_
