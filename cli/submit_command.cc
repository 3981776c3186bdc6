#include "cli/submit_command.h"

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/client.h"
#include "cli/flags.h"
#include "cli/format.h"
#include "coordinator/sweep/dry_run.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_parser.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "submit";

// A random (version 4) UUID: makes a retried submit safe.
std::string NewRequestId() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device());
  const uint64_t hi = (rng() & ~0xf000ULL) | 0x4000ULL;        // version 4
  const uint64_t lo = (rng() & ~(3ULL << 62)) | (2ULL << 62);  // variant 1
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", hi >> 32,
                         (hi >> 16) & 0xffff, hi & 0xffff, lo >> 48,
                         lo & 0xffffffffffffULL);
}

int Submit(const ParsedArgs& args, const sweep::SweepPlan& plan,
           v1::SweepSpec spec, std::ostream& out, std::ostream& err) {
  if (args.Has("priority")) {
    int priority = 0;
    if (!absl::SimpleAtoi(args.Get("priority"), &priority)) {
      return UsageError(
          err, kName,
          "--priority must be an integer, got '" + args.Get("priority") + "'");
    }
    spec.set_priority(priority);
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(args);
  if (!client.ok()) return ConnectionFailure(err, kName, client.status());
  v1::SubmitSweepRequest request;
  request.set_request_id(args.Has("request-id") ? args.Get("request-id")
                                                : NewRequestId());
  *request.mutable_spec() = std::move(spec);
  v1::SubmitSweepResponse response;
  grpc::Status s = (*client)->Call(&v1::ClientService::Stub::SubmitSweep,
                                   request, &response);
  if (!s.ok()) {
    return Failure(err, kName, (*client)->ErrorMessage(s, "submit sweeps"));
  }
  if (args.Has("json")) {
    if (!WriteProtoJson(response, out)) {
      return Failure(err, kName, "cannot print the answer as JSON");
    }
    return kExitOk;
  }
  const v1::Sweep& sweep = response.sweep();
  const size_t tasks =
      response.tasks_size() > 0 ? response.tasks_size() : plan.tasks.size();
  out << "sweep " << sweep.sweep_id() << " \"" << sweep.name() << "\": "
      << (response.created() ? "submitted (new)"
                             : "already submitted (same request id or spec); "
                               "nothing changed")
      << "\n";
  out << response.runs_size() << " runs";
  if (response.reused_run_ids_size() > 0) {
    out << " (" << response.reused_run_ids_size()
        << " already trained in another sweep, reused)";
  }
  out << ", " << tasks << " tasks, "
      << sweep::FormatScientific(response.flops_shared() > 0
                                     ? response.flops_shared()
                                     : plan.flops_shared)
      << " training FLOPs\n";
  out << "request id " << request.request_id() << "\n";
  out << "watch it: hlab watch " << sweep.sweep_id() << "\n";
  return kExitOk;
}

}  // namespace

Command SubmitCommand() {
  Command c;
  c.name = kName;
  c.summary = "submit a sweep spec (--dry-run: print the plan offline)";
  c.usage =
      "usage: hlab submit SPEC.yaml|SPEC.json [--request-id ID] "
      "[--priority N] [--json]\n"
      "       hlab submit --dry-run [--json] SPEC.yaml|SPEC.json\n\n"
      "Validates the sweep spec and expands it into runs. Without --dry-run\n"
      "it submits the sweep to the coordinator and prints the sweep id,\n"
      "whether it is new or already existed (same request id, or a spec\n"
      "with the same hash: nothing changes), the number of runs (and runs\n"
      "reused from other sweeps) and tasks. --request-id makes a retried\n"
      "submit safe (default: a new random UUID); --priority overrides the\n"
      "spec's priority; --json prints SubmitSweepResponse as JSON.\n"
      "With --dry-run it prints, offline, each run's architecture, scale, N,\n"
      "D, D/N, steps, estimated FLOPs and run id, then the total training\n"
      "compute with and without WSD trunk sharing; --json prints the plan\n"
      "(sweep, runs, tasks, totals) as SubmitSweepResponse JSON.\n"
      "Connection: --address, --token, --token-file, --tls-ca, --tls-cert,\n"
      "--tls-key, --timeout (see docs/cli.md).\n"
      "Spec reference: docs/sweeps.md; example: examples/sweeps/demo.yaml";
  c.run = RunSubmit;
  return c;
}

int RunSubmit(const std::vector<std::string>& argv, std::ostream& out,
              std::ostream& err) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, WithConnectionFlags({{"dry-run", false},
                                           {"json", false},
                                           {"request-id", true},
                                           {"priority", true}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  const std::vector<std::string>& paths = args->positional();
  if (paths.size() != 1) {
    err << "hlab submit: error: expected one spec file, got " << paths.size()
        << "; usage: hlab submit [--dry-run] SPEC.yaml\n";
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
  // Workers read a prepared dataset at this very path; most often they
  // share this machine's filesystem, so a path missing here is a typo.
  const hlab::v1::DataSpec& data = plan->spec.data();
  std::error_code missing;
  if (data.source() == "prepared" &&
      !std::filesystem::exists(data.path(), missing)) {
    err << "hlab submit: warning: data.path '" << data.path()
        << "' does not exist on this machine; every worker must have it at "
           "that path (a task whose worker lacks it fails at once, naming "
           "the path)\n";
  }
  if (!args->Has("dry-run")) {
    return Submit(*args, *plan, *std::move(spec), out, err);
  }
  out << (args->Has("json") ? hlab::sweep::DryRunJson(*plan)
                            : hlab::sweep::RenderDryRun(*plan));
  return kExitOk;
}

}  // namespace hlab::cli
