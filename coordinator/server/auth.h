// Bearer-token authorization of the coordinator's RPCs.
//
// A tokens file holds one "role token" pair per line ('#' starts a comment,
// blank lines are skipped); roles are admin, submit, read and worker:
//
//   # role    token
//   admin     3f9c...
//   worker    77aa...
//
// Clients send "authorization: Bearer <token>" metadata. What each role may
// call:
//   read   - GetSweep, ListRuns, WatchSweep, Query, ListWorkers
//   submit - what read may, plus SubmitSweep, Cancel, Resume
//   worker - every WorkerService RPC
//   admin  - everything
// A missing or unknown token is UNAUTHENTICATED; a known token without the
// needed role is PERMISSION_DENIED. An Authorizer built without a tokens
// file (Disabled()) allows everything: the coordinator then listens on
// loopback only.
//
// Thread-safety: immutable after construction; thread-safe.
//
//   HLAB_ASSIGN_OR_RETURN(Authorizer auth, Authorizer::FromFile(path));
//   absl::Status ok = auth.Check(context->client_metadata(), Role::kSubmit);
#ifndef HLAB_COORDINATOR_SERVER_AUTH_H_
#define HLAB_COORDINATOR_SERVER_AUTH_H_

#include <map>
#include <string>

#include <grpcpp/support/string_ref.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hlab::coordinator {

enum class Role { kRead, kSubmit, kWorker, kAdmin };

// "read", "submit", "worker", "admin"; InvalidArgument for anything else.
absl::StatusOr<Role> ParseRole(absl::string_view name);
const char* RoleName(Role role);

class Authorizer {
 public:
  // Allows every call (no tokens file).
  static Authorizer Disabled() { return Authorizer(); }
  // Reads a tokens file. NotFound if missing; InvalidArgument naming the line
  // for a malformed line, an unknown role, a duplicate token, or a file
  // without tokens.
  static absl::StatusOr<Authorizer> FromFile(const std::string& path);
  // The same from text (tests).
  static absl::StatusOr<Authorizer> FromText(absl::string_view text);

  bool enabled() const { return enabled_; }

  // OK when the call's "authorization: Bearer <token>" names a token whose
  // role allows `needed`; UNAUTHENTICATED or PERMISSION_DENIED otherwise.
  absl::Status Check(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
      Role needed) const;

 private:
  Authorizer() = default;
  bool enabled_ = false;
  std::map<std::string, Role> tokens_;
};

}  // namespace hlab::coordinator

#endif  // HLAB_COORDINATOR_SERVER_AUTH_H_
