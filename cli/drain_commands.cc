// `hlab drain` and `hlab undrain`: take workers out of the lease rotation
// (their running tasks go on to their end) and put them back. One file: the
// same request with the flag the other way.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"

namespace hlab::cli {
namespace {

// What the operator does next, for a worker as the coordinator now has it.
std::string Outcome(const v1::Worker& w, bool undrain) {
  const std::string id = w.worker_id();
  if (undrain) {
    return w.state() == v1::WORKER_STATE_LOST
               ? absl::StrCat("worker ", id,
                              ": undrained; it is lost (no heartbeat): it "
                              "takes tasks once it registers again")
               : absl::StrCat("worker ", id, ": alive; it takes tasks again");
  }
  if (w.state() == v1::WORKER_STATE_LOST) {
    return absl::StrCat("worker ", id,
                        ": drained; it is lost (no heartbeat): if it "
                        "registers again it is leased nothing until `hlab "
                        "undrain ",
                        id, "`");
  }
  if (w.task_ids().empty()) {
    return absl::StrCat("worker ", id,
                        ": draining; it holds no task, so it can be stopped "
                        "now (SIGTERM: it deregisters); `hlab undrain ",
                        id, "` puts it back");
  }
  const bool one = w.task_ids_size() == 1;
  return absl::StrCat(
      "worker ", id, ": draining; it is leased nothing new and runs its ",
      w.task_ids_size(), one ? " task (" : " tasks (",
      absl::StrJoin(w.task_ids(), ", "),
      one ? ") to its end" : ") to their end",
      "; stop it once `hlab workers` shows it holding 0 tasks (SIGTERM: it "
      "deregisters), or `hlab undrain ",
      id, "` to put it back");
}

int RunDrain(const std::string& name, bool undrain,
             const std::vector<std::string>& argv, std::ostream& out,
             std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, WithConnectionFlags({}));
  if (!args.ok()) return UsageError(err, name, args.status().message());
  if (args->positional().empty()) {
    return UsageError(err, name,
                      "expected one or more worker ids (see `hlab workers`)");
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, name, client.status());
  // Each worker in turn; a failure stops the rest, and says which were done.
  for (const std::string& id : args->positional()) {
    v1::DrainWorkerRequest request;
    request.set_worker_id(id);
    request.set_undrain(undrain);
    v1::DrainWorkerResponse response;
    grpc::Status s = (*client)->Call(&v1::ClientService::Stub::DrainWorker,
                                     request, &response);
    if (!s.ok()) {
      return Failure(err, name,
                     (*client)->ErrorMessage(s, absl::StrCat(name, " ", id)));
    }
    out << Outcome(response.worker(), undrain) << "\n";
  }
  return kExitOk;
}

}  // namespace

Command DrainCommand() {
  Command c;
  c.name = "drain";
  c.summary = "stop leasing tasks to workers; their running tasks go on";
  c.usage =
      "usage: hlab drain WORKER [WORKER...]\n\n"
      "Takes workers out of the lease rotation, as for maintenance: a\n"
      "draining worker keeps heartbeating and runs the tasks it holds to\n"
      "their end, but is leased nothing new, across its restarts and the\n"
      "coordinator's, until `hlab undrain`. `hlab workers` shows it as\n"
      "draining with the tasks it still holds; once it holds none, stop it\n"
      "(SIGTERM: it deregisters). Needs the admin role.";
  c.run = [](const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
    return RunDrain("drain", /*undrain=*/false, args, out, err);
  };
  return c;
}

Command UndrainCommand() {
  Command c;
  c.name = "undrain";
  c.summary = "lease tasks to drained workers again";
  c.usage =
      "usage: hlab undrain WORKER [WORKER...]\n\n"
      "Puts drained workers (`hlab drain`) back in the lease rotation. Needs\n"
      "the admin role.";
  c.run = [](const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
    return RunDrain("undrain", /*undrain=*/true, args, out, err);
  };
  return c;
}

}  // namespace hlab::cli
