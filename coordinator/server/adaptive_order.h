// The adaptive order (docs/sweeps.md, "Adaptive order"; issue #24 point 3):
// a sweep with `schedule_policy: adaptive` trains its pending runs in the
// order that pins its fitted laws down fastest where they matter, the
// target region (adaptive.target: by default the verify scales at the
// largest budget), per FLOP.
//
// The criterion is run_selection.h's, the one `hlab replay --policy
// adaptive` measures offline (docs/analysis.md, "Choosing the next run"):
// a candidate run c of architecture a scores
//   dU(c) / cost(c),
// dU the expected reduction of the summed variance of ln L-hat over a's
// target runs when c is measured (the law linearised at its newest live
// fit, sigma^2 units), cost its training FLOPs still to spend: its own
// TRAIN or DECAY task plus the shared trunk it branches from while that
// trunk has not started; of a trunk in segments (sweep/expand.h), each
// segment up to c's branch point that has not started. Measuring c at its
// predicted value moves no
// coefficient, so its effect on the others' dU is its gradient added to
// the design: the order is built greedily, each pick added to its law's
// design points (and its trunk paid for) before the next is chosen.
//
// Before an architecture's measured runs can determine a law (Identifiable:
// 5 runs, 3 scales or all it has, 2 budgets) it is seeded as replay
// seeds: the cheapest run that adds a missing scale or budget, else the
// cheapest; seeds of every such architecture come before any scored run.
// Runs that cannot narrow a law (not at a fit scale: verify runs are never
// fitted; an architecture without a law yet after its seeds, or without
// target runs) come last, cheapest first.
//
// A trunk or segment is not a unit of its own: it takes the place of the
// first decay in the order that needs it, just before it (segments in
// chain order): a later segment is trained only once a run at or past its
// branch point is worth its cost, segments included. The order becomes each
// task's order_key: the sweep's own ranked tasks' cost_flops, sorted (equal
// costs moved up by an ulp, so that the keys strictly increase), handed out in
// rank order, so beside other sweeps of the same priority the sweep keeps the
// places its tasks held by cost (Store::SetTaskOrder).
//
// Thread-safety: RankAdaptive is pure; OrderAdaptiveSweep is thread-safe
// (the store serialises writes). The coordinator calls it at submit, and
// from the fit thread after each run that finishes and each prediction
// generation (fit_scheduler.h).
//
//   HLAB_ASSIGN_OR_RETURN(int ordered, OrderAdaptiveSweep(*context, id));
#ifndef HLAB_COORDINATOR_SERVER_ADAPTIVE_ORDER_H_
#define HLAB_COORDINATOR_SERVER_ADAPTIVE_ORDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "analysis/power_law.h"
#include "analysis/run_selection.h"
#include "coordinator/server/context.h"
#include "coordinator/store/types.h"

namespace hlab::coordinator {

// One pending training task of the sweep: a run's TRAIN or DECAY task.
struct OrderCandidate {
  std::string task_id;
  std::string run_id;
  std::string arch;
  std::string scale;
  double n = 0;      // non-embedding parameters
  double d = 0;      // tokens
  double flops = 0;  // the task's own cost_flops
  // The PENDING TRUNK tasks it branches from, in training order: its
  // trunk, or the segments of its trunk up to its branch point; those
  // leased or done are paid for and not listed.
  std::vector<std::string> trunk_tasks;
  bool fit_scale = false;  // its scale is one of the fit's
};

// What the order of one architecture rests on.
struct OrderArch {
  std::vector<analysis::DesignPoint> measured;  // SUCCEEDED, at fit scales
  std::vector<analysis::DesignPoint> targets;   // its target-region runs
  std::optional<analysis::PowerLaw> law;        // newest live fit, if any
  int n_levels = 0;  // distinct N among its runs at fit scales
};

struct OrderInput {
  std::vector<OrderCandidate> candidates;
  std::map<std::string, double> trunk_flops;  // pending TRUNK -> cost_flops
  std::map<std::string, OrderArch> archs;
};

// The order above: one TaskOrder per candidate and per pending trunk task
// one of them branches from, in lease order (rank 1 first; a trunk task
// shares the rank, score and reason of the first candidate that needs it,
// and comes just before it, in the candidate's trunk_tasks order), keys
// strictly ascending. Ties go to the cheaper, then the
// smaller task id. Pure.
std::vector<store::TaskOrder> RankAdaptive(const OrderInput& input);

// Reads sweep `sweep_id`'s runs, tasks and newest prediction generation,
// ranks its pending training tasks (RankAdaptive) and stores the order
// (Store::SetTaskOrder). Returns the number of tasks ordered: 0 for a
// sweep without schedule_policy: adaptive (nothing is written then).
// NotFound for an unknown sweep; the store's errors.
absl::StatusOr<int> OrderAdaptiveSweep(ServiceContext& context,
                                       int64_t sweep_id);

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_ADAPTIVE_ORDER_H_
