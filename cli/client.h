// The CLI's connection to hlab-coordinator's ClientService: where it is
// (--address, HLAB_ADDRESS, default 127.0.0.1:50151), the bearer token
// (--token, --token-file, HLAB_TOKEN, HLAB_TOKEN_FILE), TLS (--tls-ca with
// optional --tls-cert/--tls-key for mutual TLS, or HLAB_TLS_CA,
// HLAB_TLS_CERT, HLAB_TLS_KEY) and the per-call deadline (--timeout
// SECONDS, default 30; streams have none). It also turns a failed call into
// the one line a user reads: what went wrong and what to do.
//
// Thread-safety: a Client is thread-safe after construction (the gRPC stub
// is).
//
//   HLAB_ASSIGN_OR_RETURN(ConnectionOptions options,
//                         ConnectionOptionsFrom(parsed_args));
//   HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
//                         Client::Connect(options));
//   v1::GetSweepResponse response;
//   grpc::Status s = client->Call(&v1::ClientService::Stub::GetSweep, req,
//                                 &response);
//   if (!s.ok()) err << client->ErrorMessage(s, "read sweeps");
#ifndef HLAB_CLI_CLIENT_H_
#define HLAB_CLI_CLIENT_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/flags.h"
#include "hlab/v1/client_service.grpc.pb.h"

namespace hlab::cli {

inline constexpr char kDefaultAddress[] = "127.0.0.1:50151";

struct ConnectionOptions {
  std::string address = kDefaultAddress;
  // Empty: no authorization metadata is sent.
  std::string token;
  // PEM contents (not paths). Empty root_certs: plaintext.
  std::string tls_root_certs;
  std::string tls_cert_chain;
  std::string tls_private_key;
  double timeout_seconds = 30;
};

// The connection flags every client command accepts: address, token,
// token-file, tls-ca, tls-cert, tls-key, timeout.
std::vector<FlagDef> ConnectionFlags();

// `command_flags` plus ConnectionFlags().
std::vector<FlagDef> WithConnectionFlags(std::vector<FlagDef> command_flags);

// Options from parsed flags, then the environment, then defaults. Flags win
// over the environment; --token over --token-file over HLAB_TOKEN over
// HLAB_TOKEN_FILE. InvalidArgument for a bad flag value (--timeout,
// --tls-cert without --tls-key); FailedPrecondition for an unreadable token
// or certificate file, an empty token file or a file without PEM. The
// message names the flag or variable.
absl::StatusOr<ConnectionOptions> ConnectionOptionsFrom(const ParsedArgs& args);

class Client;

// ConnectionOptionsFrom(args), then Client::Connect.
absl::StatusOr<std::unique_ptr<Client>> ClientFromArgs(const ParsedArgs& args);

class Client {
 public:
  // Creates the channel (it connects lazily, on the first call). Never
  // fails today; StatusOr leaves room for credential errors.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const ConnectionOptions& options);

  // Adds the authorization metadata and, when `with_deadline`, the call
  // deadline to `context`.
  void Prepare(grpc::ClientContext* context, bool with_deadline = true) const;

  // One unary call with a fresh prepared context.
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::ClientService::Stub::*method)(
                        grpc::ClientContext*, const Request&, Response*),
                    const Request& request, Response* response) const {
    grpc::ClientContext context;
    Prepare(&context);
    return (stub_.get()->*method)(&context, request, response);
  }

  v1::ClientService::Stub* stub() const { return stub_.get(); }
  const ConnectionOptions& options() const { return options_; }

  // "what went wrong; what to do" for a failed call. `action` says what the
  // call was for, in a role's words ("submit sweeps", "read runs").
  std::string ErrorMessage(const grpc::Status& status,
                           absl::string_view action) const;

 private:
  explicit Client(ConnectionOptions options);

  ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ClientService::Stub> stub_;
};

// Prints a ConnectionOptionsFrom/ClientFromArgs error as one line and
// returns its exit code: kExitUsage for InvalidArgument, else kExitFailed.
int ConnectionFailure(std::ostream& err, absl::string_view command,
                      const absl::Status& status);

// Every page of ListRuns for `request` (its page_token is overwritten).
// Stops, with what it has, if the server repeats a page token.
grpc::Status ListAllRuns(const Client& client, v1::ListRunsRequest request,
                         std::vector<v1::Run>* runs);

// Whether a failed stream may be retried from its last sequence number
// (the server or network dropped it), as opposed to a refusal that repeats.
bool IsRetryableStreamError(const grpc::Status& status);

// Silences gRPC's own log lines on stderr (errors reach the user as one
// line from ErrorMessage instead). HLAB_GRPC_LOG=1 keeps them.
void QuietGrpcLogging();

}  // namespace hlab::cli

#endif  // HLAB_CLI_CLIENT_H_
