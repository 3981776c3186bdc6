#include "cli/submit_command.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/sweep/dry_run.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_parser.h"

namespace hlab::cli {

Command SubmitCommand() {
  Command c;
  c.name = "submit";
  c.summary = "validate and submit a sweep spec (--dry-run: print the plan)";
  c.usage =
      "usage: hlab submit --dry-run [--json] SPEC.yaml|SPEC.json\n\n"
      "Validates the sweep spec and expands it into runs. With --dry-run it\n"
      "prints each run's architecture, scale, N, D, D/N, steps, estimated\n"
      "FLOPs and run id, then the total training compute with and without\n"
      "WSD trunk sharing, without contacting a server. --json prints the\n"
      "plan (sweep, runs, tasks, totals) as SubmitSweepResponse JSON.\n"
      "Submitting to a coordinator is not implemented yet.\n"
      "Spec reference: docs/sweeps.md; example: examples/sweeps/demo.yaml";
  c.run = RunSubmit;
  return c;
}

int RunSubmit(const std::vector<std::string>& args, std::ostream& out,
              std::ostream& err) {
  bool dry_run = false;
  bool json = false;
  std::vector<std::string> paths;
  for (const std::string& a : args) {
    if (a == "--dry-run") {
      dry_run = true;
    } else if (a == "--json") {
      json = true;
    } else if (a.size() > 1 && a[0] == '-') {
      err << "hlab submit: error: unknown option '" << a
          << "'; run 'hlab submit --help'\n";
      return kExitUsage;
    } else {
      paths.push_back(a);
    }
  }
  if (paths.size() != 1) {
    err << "hlab submit: error: expected one spec file, got " << paths.size()
        << "; usage: hlab submit --dry-run SPEC.yaml\n";
    return kExitUsage;
  }
  absl::StatusOr<hlab::v1::SweepSpec> spec =
      hlab::sweep::LoadSweepSpec(paths[0]);
  if (!spec.ok()) {
    err << "hlab submit: error: " << spec.status().message() << "\n";
    return kExitFailed;
  }
  absl::StatusOr<hlab::sweep::SweepPlan> plan = hlab::sweep::PlanSweep(*spec);
  if (!plan.ok()) {
    err << "hlab submit: error: " << paths[0] << ": " << plan.status().message()
        << "\n";
    return kExitFailed;
  }
  if (!dry_run) {
    err << "hlab submit: error: submitting to a coordinator is not "
           "implemented yet; the spec is valid ("
        << plan->runs.size() << " runs); use --dry-run to see the plan\n";
    return kExitUsage;
  }
  out << (json ? hlab::sweep::DryRunJson(*plan)
               : hlab::sweep::RenderDryRun(*plan));
  return kExitOk;
}

}  // namespace hlab::cli
