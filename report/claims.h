// The paper's claims beside a sweep's measurements (#21, point 5): each claim
// is computed from the study's runs and fits by the rule stated with it, and
// gets a verdict: reproduced, not reproduced, inconclusive, or not tested
// (with what the sweep would need). Nothing here is typed by hand: a verdict
// is the rule applied to the stored figures.
//
// Intervals are percentile bootstraps of a mean over matched cells: runs of
// two architectures at the same scale, the same seed and D/N within 5%. In
// the loss comparisons (claims 2 and 4), where the second architecture has
// no run in the first's cell, its loss is interpolated in log D/N between
// its neighbouring budgets. With several seeds the rules' per-scale figures
// are per scale and seed. The bootstrap resamples the cells with
// replacement (ClaimOptions: 1000 resamples, 95%, a fixed seed, so a report
// is reproducible). "Overlap" means a mean difference inside +-overlap_nats
// (0.05).
//
// Thread-safety: pure functions.
//
//   for (const ClaimResult& c : EvaluateClaims(study))
//     std::cout << c.number << " " << VerdictName(c.verdict) << "\n";
#ifndef HLAB_REPORT_CLAIMS_H_
#define HLAB_REPORT_CLAIMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "report/study_data.h"
#include "report/tables.h"

namespace hlab::report {

enum class Verdict { kReproduced, kNotReproduced, kInconclusive, kNotTested };

// "reproduced", "not reproduced", "inconclusive", "not tested".
std::string VerdictName(Verdict verdict);

struct ClaimResult {
  int number = 0;        // the numbering, 1-9
  std::string claim;     // the paper's claim, one line
  std::string rule;      // how the verdict follows from the figures
  std::string measured;  // hlab's figures, with intervals; "" if not tested
  Verdict verdict = Verdict::kNotTested;
  std::string needs;  // when not tested: what the sweep lacks
};

struct ClaimOptions {
  int resamples = 1000;
  double confidence = 0.95;
  uint64_t seed = 7;
  double overlap_nats = 0.05;
};

// The nine claims, in order.
std::vector<ClaimResult> EvaluateClaims(const StudyData& study,
                                        const ClaimOptions& options = {});

// claim, verdict, hlab's figures, rule (and "needs" for the untested).
Table ClaimsTable(const std::vector<ClaimResult>& claims);

}  // namespace hlab::report

#endif  // HLAB_REPORT_CLAIMS_H_
