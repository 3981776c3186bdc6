// Text rendering of a sweep plan for `hlab submit --dry-run`.
//
// One table row per run (architecture, scale, N, D, D/N, steps, estimated
// FLOPs, seed, run id), one per model (architecture, scale, N, N / Full and
// what appendix-B matching set: model/config/param_count.h DescribeMatch),
// a task summary, and the total training compute with and without WSD trunk
// sharing and the saving, e.g.
//
//   total training compute: 1.234e+15 FLOPs with trunk sharing (used),
//   2.000e+15 without; sharing saves 7.660e+14 FLOPs (38.3%)
//
// Thread-safe (pure function).
//
//   HLAB_ASSIGN_OR_RETURN(SweepPlan plan, PlanSweep(spec));
//   std::cout << RenderDryRun(plan);   // or DryRunJson(plan)
#ifndef HLAB_COORDINATOR_SWEEP_DRY_RUN_H_
#define HLAB_COORDINATOR_SWEEP_DRY_RUN_H_

#include <string>

#include "coordinator/sweep/expand.h"
#include "hlab/v1/client_service.pb.h"

namespace hlab::sweep {

std::string RenderDryRun(const SweepPlan& plan);

// The plan as SubmitSweep answers a dry run: the sweep (spec with defaults,
// spec hash, run counts, planned FLOPs; no id), its runs and tasks, and the
// totals. `hlab submit --dry-run --json` prints it.
hlab::v1::SubmitSweepResponse DryRunResponse(const SweepPlan& plan);

// DryRunResponse as indented JSON with proto field names.
std::string DryRunJson(const SweepPlan& plan);

// "1.234e+15": FLOPs and other large counts in the dry run.
std::string FormatScientific(double value);

}  // namespace hlab::sweep

#endif  // HLAB_COORDINATOR_SWEEP_DRY_RUN_H_
