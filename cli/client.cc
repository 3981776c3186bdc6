#include "cli/client.h"
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/store_unavailable.h"

namespace hlab::cli {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", what, " '", path, "'; check the path"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A flag's value, else the environment variable's, else "".
std::string FlagOrEnv(const ParsedArgs& args, const std::string& flag,
                      const char* env) {
  if (args.Has(flag)) return args.Get(flag);
  return Env(env);
}

// Whether `pem` holds a certificate (or, with `key`, a private key) that
// OpenSSL can read; gRPC itself only fails later, with an obscure message.
bool ValidPem(const std::string& pem, bool key) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return false;
  bool ok = false;
  if (key) {
    EVP_PKEY* k = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
    ok = k != nullptr;
    EVP_PKEY_free(k);
  } else {
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    ok = cert != nullptr;
    X509_free(cert);
  }
  BIO_free(bio);
  return ok;
}

absl::StatusOr<std::string> ReadPem(const ParsedArgs& args,
                                    const std::string& flag, const char* env,
                                    bool key) {
  const std::string path = FlagOrEnv(args, flag, env);
  if (path.empty()) return std::string();
  const std::string what =
      args.Has(flag) ? absl::StrCat("--", flag) : std::string(env);
  absl::StatusOr<std::string> pem = ReadWholeFile(path, what);
  if (!pem.ok()) return pem.status();
  if (!ValidPem(*pem, key)) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " '", path, "' holds no PEM ",
        key ? "private key" : "certificate", "; give the PEM file"));
  }
  return pem;
}

absl::StatusOr<std::string> TokenFrom(const ParsedArgs& args) {
  if (args.Has("token")) return args.Get("token");
  std::string path;
  std::string what;
  if (args.Has("token-file")) {
    path = args.Get("token-file");
    what = "--token-file";
  } else if (!Env("HLAB_TOKEN").empty()) {
    return Env("HLAB_TOKEN");
  } else if (!Env("HLAB_TOKEN_FILE").empty()) {
    path = Env("HLAB_TOKEN_FILE");
    what = "HLAB_TOKEN_FILE";
  } else {
    return std::string();
  }
  absl::StatusOr<std::string> text = ReadWholeFile(path, what);
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", path, "' is empty; put the token in it"));
  }
  return token;
}

std::string OneLine(std::string text) {
  absl::StrReplaceAll({{"\r", " "}, {"\n", " "}}, &text);
  return std::string(absl::StripAsciiWhitespace(text));
}

// Why a channel is unavailable, in a few words, from gRPC's message.
std::string UnavailableReason(const std::string& message) {
  const std::string lower = absl::AsciiStrToLower(message);
  if (absl::StrContains(lower, "connection refused")) {
    return "connection refused";
  }
  if (absl::StrContains(lower, "dns") ||
      absl::StrContains(lower, "name or service not known")) {
    return "cannot resolve the host name";
  }
  if (absl::StrContains(lower, "handshake") ||
      absl::StrContains(lower, "ssl")) {
    return "TLS handshake failed";
  }
  if (absl::StrContains(lower, "http/2") || absl::StrContains(lower, "http2")) {
    return "something that is not a gRPC server answers there";
  }
  if (absl::StrContains(lower, "timeout") ||
      absl::StrContains(lower, "timed out")) {
    return "connection timed out";
  }
  return OneLine(message);
}

}  // namespace

std::vector<FlagDef> ConnectionFlags() {
  return {{"address", true}, {"token", true},    {"token-file", true},
          {"tls-ca", true},  {"tls-cert", true}, {"tls-key", true},
          {"timeout", true}};
}

std::vector<FlagDef> WithConnectionFlags(std::vector<FlagDef> command_flags) {
  for (FlagDef& f : ConnectionFlags()) command_flags.push_back(std::move(f));
  return command_flags;
}

absl::StatusOr<ConnectionOptions> ConnectionOptionsFrom(
    const ParsedArgs& args) {
  ConnectionOptions options;
  const std::string address = FlagOrEnv(args, "address", "HLAB_ADDRESS");
  if (!address.empty()) options.address = address;
  absl::StatusOr<std::string> token = TokenFrom(args);
  if (!token.ok()) return token.status();
  options.token = *token;
  absl::StatusOr<std::string> ca =
      ReadPem(args, "tls-ca", "HLAB_TLS_CA", false);
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert =
      ReadPem(args, "tls-cert", "HLAB_TLS_CERT", false);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      ReadPem(args, "tls-key", "HLAB_TLS_KEY", true);
  if (!key.ok()) return key.status();
  if (cert->empty() != key->empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together (mutual TLS); give both or "
        "neither");
  }
  if (!cert->empty() && ca->empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert needs --tls-ca (the CA that signed the coordinator's "
        "certificate)");
  }
  options.tls_root_certs = *ca;
  options.tls_cert_chain = *cert;
  options.tls_private_key = *key;
  if (args.Has("timeout")) {
    double seconds = 0;
    if (!absl::SimpleAtod(args.Get("timeout"), &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--timeout must be a positive number of seconds, got '",
                       args.Get("timeout"), "'"));
    }
    options.timeout_seconds = seconds;
  }
  return options;
}

Client::Client(ConnectionOptions options) : options_(std::move(options)) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options_.tls_root_certs.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls_root_certs;
    ssl.pem_cert_chain = options_.tls_cert_chain;
    ssl.pem_private_key = options_.tls_private_key;
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(256 << 20);  // large query results
  channel_ =
      grpc::CreateCustomChannel(options_.address, credentials, channel_args);
  stub_ = v1::ClientService::NewStub(channel_);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const ConnectionOptions& options) {
  QuietGrpcLogging();
  return std::unique_ptr<Client>(new Client(options));
}

absl::StatusOr<std::unique_ptr<Client>> ClientFromArgs(const ParsedArgs& args) {
  absl::StatusOr<ConnectionOptions> options = ConnectionOptionsFrom(args);
  if (!options.ok()) return options.status();
  return Client::Connect(*options);
}

void Client::Prepare(grpc::ClientContext* context, bool with_deadline) const {
  if (!options_.token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.token);
  }
  if (with_deadline) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(
                              options_.timeout_seconds * 1000)));
  }
}

std::string Client::ErrorMessage(const grpc::Status& status,
                                 absl::string_view action) const {
  const std::string message = OneLine(status.error_message());
  const std::string& address = options_.address;
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      // The coordinator is up and says why it refused (disk full, ...).
      if (IsStoreNotWritableMessage(message)) return message;
      if (absl::StrContains(UnavailableReason(message), "TLS")) {
        return absl::StrCat("cannot reach the coordinator at ", address,
                            " (TLS handshake failed); check --tls-ca, or "
                            "drop it if the coordinator runs without TLS");
      }
      if (options_.tls_root_certs.empty() &&
          (absl::StrContains(absl::AsciiStrToLower(message), "socket closed") ||
           absl::StrContains(absl::AsciiStrToLower(message),
                             "connection reset"))) {
        return absl::StrCat("cannot reach the coordinator at ", address,
                            " (it closed the connection during setup); if "
                            "it runs with TLS, give --tls-ca or HLAB_TLS_CA");
      }
      return absl::StrCat(
          "cannot reach the coordinator at ", address, " (",
          UnavailableReason(message),
          "); start one with `hlab up` or `hlab-coordinator`, or set "
          "--address or HLAB_ADDRESS");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::StrCat("the coordinator at ", address,
                          " did not answer within ", options_.timeout_seconds,
                          " s; check that it is running, or raise --timeout");
    case grpc::StatusCode::UNAUTHENTICATED:
      if (options_.token.empty()) {
        return absl::StrCat("the coordinator at ", address,
                            " needs a token; give a token with --token, "
                            "--token-file or HLAB_TOKEN");
      }
      return absl::StrCat("the coordinator refused the token (", message,
                          "); give a valid token with --token, --token-file "
                          "or HLAB_TOKEN");
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::StrCat("this token's role may not ", action, " (", message,
                          "); use a token whose role may (docs/cli.md)");
    case grpc::StatusCode::INVALID_ARGUMENT:
      return message;
    case grpc::StatusCode::NOT_FOUND:
      // A message that says itself what to run next needs no other hint.
      if (absl::StrContains(message, "`hlab ")) return message;
      return absl::StrCat(message,
                          "; list sweeps with `hlab status` and runs with "
                          "`hlab runs`");
    case grpc::StatusCode::FAILED_PRECONDITION:
      return absl::StrCat(message, "; see the state with `hlab status`");
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return absl::StrCat(message,
                          "; ask for less (LIMIT, --max-rows) or "
                          "try again later");
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::StrCat("the coordinator at ", address, " cannot yet ",
                          action, " (unimplemented); update hlab-coordinator");
    default:
      return absl::StrCat("the coordinator failed to ", action, " (code ",
                          static_cast<int>(status.error_code()), ": ", message,
                          "); see its log");
  }
}

grpc::Status ListAllRuns(const Client& client, v1::ListRunsRequest request,
                         std::vector<v1::Run>* runs) {
  request.clear_page_token();
  while (true) {
    v1::ListRunsResponse response;
    grpc::Status s =
        client.Call(&v1::ClientService::Stub::ListRuns, request, &response);
    if (!s.ok()) return s;
    for (v1::Run& run : *response.mutable_runs()) {
      runs->push_back(std::move(run));
    }
    if (response.next_page_token().empty() ||
        response.next_page_token() == request.page_token()) {
      return grpc::Status::OK;
    }
    request.set_page_token(response.next_page_token());
  }
}

int ConnectionFailure(std::ostream& err, absl::string_view command,
                      const absl::Status& status) {
  if (absl::IsInvalidArgument(status)) {
    return UsageError(err, command, status.message());
  }
  return Failure(err, command, status.message());
}

bool IsRetryableStreamError(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return true;
    default:
      return false;
  }
}

void QuietGrpcLogging() {
  if (Env("HLAB_GRPC_LOG").empty()) {
    gpr_set_log_function([](gpr_log_func_args*) {});
  }
}

}  // namespace hlab::cli
