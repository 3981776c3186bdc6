// `hlab cancel` and `hlab resume`: the same target (a sweep or one run) and
// the same answer (the runs moved), so one file.
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"

namespace hlab::cli {
namespace {

// Run ids are 16 lowercase hex digits (run.proto).
bool LooksLikeRunId(const std::string& text) {
  if (text.size() != 16) return false;
  for (char ch : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(ch))) return false;
  }
  return true;
}

struct Target {
  std::string id;
  bool is_run = false;
};

template <typename Request>
void SetTarget(const Target& target, Request* request) {
  if (target.is_run) {
    request->set_run_id(target.id);
  } else {
    request->set_sweep(target.id);
  }
}

// Runs `call` on the target; a bare id is tried as a sweep and as a run (a
// run first when it looks like a run id) until one is found.
template <typename Call>
grpc::Status OnTarget(const ParsedArgs& args, Call call, Target* used) {
  std::vector<Target> candidates;
  if (args.Has("run")) candidates.push_back({args.Get("run"), true});
  if (args.Has("sweep")) candidates.push_back({args.Get("sweep"), false});
  if (candidates.empty()) {
    const std::string& id = args.positional()[0];
    const bool run_first = LooksLikeRunId(id);
    candidates.push_back({id, run_first});
    candidates.push_back({id, !run_first});
  }
  grpc::Status status;
  for (const Target& t : candidates) {
    *used = t;
    status = call(t);
    if (status.error_code() != grpc::StatusCode::NOT_FOUND) return status;
  }
  return status;
}

int RunControl(const std::string& name, const std::vector<std::string>& argv,
               std::ostream& out, std::ostream& err) {
  const bool cancel = name == "cancel";
  std::vector<FlagDef> flags = {{"run", true}, {"sweep", true}};
  if (cancel) flags.push_back({"reason", true});
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, WithConnectionFlags(flags));
  if (!args.ok()) return UsageError(err, name, args.status().message());
  const size_t given = args->positional().size() + (args->Has("run") ? 1 : 0) +
                       (args->Has("sweep") ? 1 : 0);
  if (given != 1) {
    return UsageError(err, name, "expected one sweep or run id");
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, name, client.status());
  const Client& c = **client;
  std::vector<std::string> run_ids;
  Target target;
  grpc::Status s;
  if (cancel) {
    s = OnTarget(
        *args,
        [&](const Target& t) {
          v1::CancelRequest request;
          SetTarget(t, &request);
          request.set_reason(args->Get("reason", "cancelled with hlab cancel"));
          v1::CancelResponse response;
          grpc::Status status =
              c.Call(&v1::ClientService::Stub::Cancel, request, &response);
          run_ids.assign(response.run_ids().begin(), response.run_ids().end());
          return status;
        },
        &target);
  } else {
    s = OnTarget(
        *args,
        [&](const Target& t) {
          v1::ResumeRequest request;
          SetTarget(t, &request);
          v1::ResumeResponse response;
          grpc::Status status =
              c.Call(&v1::ClientService::Stub::Resume, request, &response);
          run_ids.assign(response.run_ids().begin(), response.run_ids().end());
          return status;
        },
        &target);
  }
  if (!s.ok()) {
    if (s.error_code() == grpc::StatusCode::NOT_FOUND &&
        args->positional().size() == 1) {
      return Failure(err, name,
                     absl::StrCat("no sweep or run '", target.id,
                                  "'; list sweeps with `hlab status` and runs "
                                  "with `hlab runs`"));
    }
    return Failure(err, name,
                   c.ErrorMessage(s, cancel ? "cancel runs" : "resume runs"));
  }
  const std::string what =
      absl::StrCat(target.is_run ? "run " : "sweep ", target.id);
  if (run_ids.empty()) {
    out << (cancel ? "nothing to cancel in " : "nothing to resume in ") << what
        << (cancel ? " (no unfinished runs)\n"
                   : " (no failed or cancelled runs)\n");
    return kExitOk;
  }
  out << (cancel ? "cancelled " : "resumed ") << run_ids.size()
      << (run_ids.size() == 1 ? " run" : " runs") << " of " << what
      << (cancel ? " (checkpoints kept; `hlab resume` continues them)"
                 : " (back to pending, from their newest checkpoints)")
      << ":\n";
  constexpr size_t kListed = 10;
  for (size_t i = 0; i < run_ids.size() && i < kListed; ++i) {
    out << "  " << run_ids[i] << "\n";
  }
  if (run_ids.size() > kListed) {
    out << "  ... and " << run_ids.size() - kListed << " more";
    if (!target.is_run) {
      out << " (hlab runs --sweep " << target.id << " --state "
          << (cancel ? "cancelled" : "pending") << ")";
    }
    out << "\n";
  }
  return kExitOk;
}

}  // namespace

Command CancelCommand() {
  Command c;
  c.name = "cancel";
  c.summary = "cancel a sweep or a run";
  c.usage =
      "usage: hlab cancel SWEEP|RUN [--reason TEXT]\n"
      "       hlab cancel --sweep SWEEP | --run RUN\n\n"
      "Cancels every unfinished run of a sweep, or one run: tasks running on\n"
      "workers are killed and their last checkpoints kept, so `hlab resume`\n"
      "continues them. Prints the runs cancelled. A bare id is looked up as\n"
      "a sweep and as a run.";
  c.run = [](const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
    return RunControl("cancel", args, out, err);
  };
  return c;
}

Command ResumeCommand() {
  Command c;
  c.name = "resume";
  c.summary = "move failed or cancelled runs back to pending";
  c.usage =
      "usage: hlab resume SWEEP|RUN\n"
      "       hlab resume --sweep SWEEP | --run RUN\n\n"
      "Moves the failed and cancelled runs of a sweep (or one run) back to\n"
      "pending; they continue from their newest verified checkpoint. A run\n"
      "stopped early as predicted (the spec's adaptive.stop_when) is trained\n"
      "only when named (--run RUN): resuming its sweep leaves it. Prints\n"
      "the runs resumed. A bare id is looked up as a sweep and as a run.";
  c.run = [](const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
    return RunControl("resume", args, out, err);
  };
  return c;
}

}  // namespace hlab::cli
