// The report's figures, drawn by gnuplot in the style of the paper's
// scaling-law figures. First the paper-style comparisons across
// architectures (report/comparison_figures.h: longppl_vs_dn, loss_overlaid,
// nope), then, for each target ("loss", then "longppl"):
//   <target>_vs_tokens            the target against tokens D (log x), one
//                                 panel per architecture, one colour per
//                                 scale (N), with the fitted L(N, D) drawn
//                                 as a line for each scale's N;
//   <target>_observed_vs_predicted observed against fitted values, fit
//                                 points filled, held-out (verify) points
//                                 open, and the line y = x;
//   <target>_residuals            relative residuals (observed/predicted - 1,
//                                 in %) against D, fit and held-out points
//                                 marked as above.
// and the mechanism figures (report/mechanism_figures.cc), for a sweep that
// profiled gradients (appendix D.3):
//   gradient_profile              G(d) / G_base against distance d (log-log),
//                                 one line per architecture, from its
//                                 largest profiled run (data/gradient_<arch>
//                                 .dat: d_mid ratio).
// and, for a sweep that probed layers (appendix D.2):
//   probing                       probe test accuracy against layer (0: the
//                                 embeddings) with its 95% interval, one
//                                 line per architecture, from its largest
//                                 probed run, chance dashed
//                                 (data/probing_<arch>.dat: layer accuracy
//                                 lo hi).
// and, for a sweep that traced retrieval heads (appendix D.4):
//   retrieval_heads               the top full-attention head's
//                                 Retrieval_Head score against D, one line
//                                 per architecture at its largest traced
//                                 scale, the formation D (the first with a
//                                 score >= kRetrievalFormation) circled
//                                 (data/retrieval_<arch>.dat: D score
//                                 top_layer top_head; a second block holds
//                                 the formation point);
//   retrieval_formation           with retrieval_score evaluated at three or
//                                 more steps of a run (evaluation.trajectory,
//                                 branch points): the top head's score
//                                 against training step along that run,
//                                 one line per architecture (its largest
//                                 scale's run with the most points), the
//                                 Q-gradient norm of the best trace's top
//                                 head on the right axis when the hook
//                                 logged it, the formation step dotted
//                                 (data/formation_<arch>.dat: step score;
//                                 a second block: step norm);
// and, for a sweep whose training logged the Q-gradient hook:
//   q_grad                        one full-attention head's q_proj gradient
//                                 norm against training tokens, one line per
//                                 architecture from its largest hooked run
//                                 (its top retrieval head when traced, else
//                                 the head with the largest mean norm), the
//                                 retrieval figure's formation D dotted
//                                 (data/q_grad_<arch>.dat: tokens norm).
// and, for a sweep that evaluated multiple-choice tasks
// (report/multiple_choice_figures.h), one figure per task:
//   mc_<task>                     acc_norm with its standard error and acc
//                                 (dashed) against D (log x), one pair of
//                                 lines per architecture at its largest
//                                 scale with the task scored
//                                 (data/mc_<task>_<arch>.dat: D acc
//                                 acc_stderr acc_norm acc_norm_stderr).
// and, for a sweep that ran RULER (report/ruler_figures.h):
//   ruler_score                   RULER's score against D (log x), one line
//                                 per architecture at its largest scale
//                                 with it (data/ruler_<arch>.dat: D score).
// Each figure is a gnuplot script <name>.gp in the report directory, over
// data files data/<target>_<arch>.dat (whitespace columns: N D observed
// predicted rel_residual held_out scale run_id; one block per scale), so a
// user can restyle and re-run it: `gnuplot <name>.gp` writes <name>.svg,
// `gnuplot -e 'fmt="png"' <name>.gp` writes <name>.png.
//
// A figure without data (no run has the target yet; no fit for the
// observed/predicted and residual plots) gets no script; its Plot says why
// in `note`, and the report shows that in its place.
//
// Thread-safety: reentrant (no shared state); RenderPlots runs gnuplot as a
// child process per figure.
//
//   HLAB_ASSIGN_OR_RETURN(std::vector<Plot> plots,
//                         WritePlotScripts(study, "report"));
//   absl::Status drawn = RenderPlots("report", PlotOptions(), &plots);
#ifndef HLAB_REPORT_PLOTS_H_
#define HLAB_REPORT_PLOTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "report/study_data.h"

namespace hlab::report {

// The Retrieval_Head score at which a model's retrieval head counts as
// formed (the retrieval figure's threshold, appendix D.4).
inline constexpr double kRetrievalFormation = 0.5;

struct Plot {
  std::string name;       // file stem: "loss_vs_tokens"
  std::string target;     // "loss" or "longppl"
  std::string title;      // "Loss against tokens D"
  std::string caption;    // what is drawn, for the report
  bool scripted = false;  // <name>.gp and its data were written
  std::string note;       // when not scripted: why (shown in its place)
  bool svg = false;       // <name>.svg was drawn
  bool png = false;       // <name>.png was drawn
};

struct PlotOptions {
  // The gnuplot binary: a name looked up in PATH, or a path.
  std::string gnuplot = "gnuplot";
  bool png = true;  // also draw PNGs when gnuplot has a PNG terminal
};

// Writes the data files and scripts of every figure that has data into
// `dir` (which must exist; data/ is created). Internal (naming the file)
// when a file cannot be written.
absl::StatusOr<std::vector<Plot>> WritePlotScripts(const StudyData& study,
                                                   const std::string& dir);

// Runs gnuplot on every scripted figure in `dir`, setting svg/png. Returns
//   FailedPrecondition - gnuplot is not installed (the message says to
//                        install gnuplot-nox; nothing was drawn);
//   Internal           - gnuplot failed on a script (its output quoted) or
//                        wrote no SVG; the other figures are still drawn.
// A missing PNG terminal is not an error: png stays false.
absl::Status RenderPlots(const std::string& dir, const PlotOptions& options,
                         std::vector<Plot>* plots);

}  // namespace hlab::report

#endif  // HLAB_REPORT_PLOTS_H_
