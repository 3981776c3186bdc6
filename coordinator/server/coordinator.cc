#include "coordinator/server/coordinator.h"
#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/filesystem.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/server/grpc_metrics.h"

namespace hlab::coordinator {
namespace {

// Threads of the handler pools (handler_pool.h). The worker API's wait on
// the store's group commits: at 2,000 workers heartbeating every 5 s, 400
// heartbeats a second of a few milliseconds each. The client API's reads
// can take up to the query time limit.
constexpr int kWorkerHandlerThreads = 16;
constexpr int kClientHandlerThreads = 8;

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const char* what) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Reads a PEM file and checks that it holds a `kind` block ("CERTIFICATE",
// "PRIVATE KEY"), so a wrong or empty file is named at start-up instead of
// failing inside gRPC as an unbindable address.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag,
                                    const char* kind) {
  HLAB_ASSIGN_OR_RETURN(std::string text, ReadFile(path, flag));
  const size_t begin = text.find("-----BEGIN ");
  const size_t end = text.find("-----END ");
  const size_t label = text.find(kind);
  if (begin == std::string::npos || end == std::string::npos ||
      label == std::string::npos || label < begin) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": not a PEM file with a ", kind,
                     " block (-----BEGIN ... ", kind, "-----)"));
  }
  return text;
}

// "host" of "host:port" / "[v6]:port".
std::string HostOf(const std::string& address) {
  if (absl::StartsWith(address, "[")) {
    return address.substr(1, address.find(']') - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

// Binds `address` once to report a clear error before gRPC or civetweb
// log theirs: Unavailable if in use or not an address of this host,
// InvalidArgument if it does not resolve. Port 0 always passes.
absl::Status CheckCanListen(const std::string& address, const char* flag) {
  const size_t colon = address.rfind(':');
  const std::string host = HostOf(address);
  const std::string port = address.substr(colon + 1);
  if (port == "0") return absl::OkStatus();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints,
                  &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": cannot resolve '", address, "'; expected HOST:PORT"));
  }
  int error = 0;
  const int fd = socket(found->ai_family, found->ai_socktype, 0);
  if (fd >= 0) {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) error = errno;
    close(fd);
  }
  freeaddrinfo(found);
  if (error == EADDRINUSE) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address, ": address already in use (", flag, ")"));
  }
  if (error != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address, ": ", strerror(error), " (", flag, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  const std::string host = HostOf(address);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Start(
    CoordinatorOptions options) {
  if (options.lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--lease-seconds: must be > 0");
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key: give both or neither");
  }
  if (options.listen.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: expected HOST:PORT, got '", options.listen, "'"));
  }
  HLAB_RETURN_IF_ERROR(CheckCanListen(options.listen, "--listen"));
  const bool serve_metrics =
      options.metrics_listen != "none" && !options.metrics_listen.empty();
  if (serve_metrics) {
    HLAB_RETURN_IF_ERROR(
        CheckCanListen(options.metrics_listen, "--metrics-listen"));
  }
  if (!options.allow_network_fs) {
    const std::string dir =
        std::filesystem::absolute(options.db_path).parent_path().string();
    HLAB_RETURN_IF_ERROR(CheckLocalFilesystem(dir, "--db"));
  }
  std::string tls_cert, tls_key;
  if (!options.tls_cert.empty()) {
    HLAB_ASSIGN_OR_RETURN(
        tls_cert, ReadPem(options.tls_cert, "--tls-cert", "CERTIFICATE"));
    HLAB_ASSIGN_OR_RETURN(tls_key,
                          ReadPem(options.tls_key, "--tls-key", "PRIVATE KEY"));
  }
  std::unique_ptr<Coordinator> c(new Coordinator());
  c->options_ = options;
  Authorizer auth = Authorizer::Disabled();
  if (!options.tokens_file.empty()) {
    HLAB_ASSIGN_OR_RETURN(auth, Authorizer::FromFile(options.tokens_file));
  } else if (!IsLoopbackAddress(options.listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", options.listen,
        " is not loopback: without --tokens-file anyone could submit and "
        "run tasks; give a tokens file or listen on 127.0.0.1"));
  } else {
    HLAB_LOG(INFO) << "no --tokens-file: authentication off, listening on "
                      "loopback only ("
                   << options.listen << ")";
  }

  c->metrics_ = std::make_unique<CoordinatorMetrics>();
  store::StoreOptions store_options;
  CoordinatorMetrics* metrics = c->metrics_.get();
  store_options.writer.on_commit = [metrics](double seconds, int) {
    metrics->ObserveCommit(seconds);
  };
  store_options.writer.on_storage = [metrics](bool writable) {
    metrics->ObserveStoreWritable(writable);
  };
  HLAB_ASSIGN_OR_RETURN(c->store_,
                        store::Store::Open(options.db_path, store_options));
  HLAB_ASSIGN_OR_RETURN(c->query_, store::QueryEngine::Open(options.db_path));
  c->catalog_ =
      std::make_unique<SweepCatalog>(c->store_.get(), c->query_.get());

  ServiceContext& ctx = c->context_;
  ctx.store = c->store_.get();
  ctx.query = c->query_.get();
  ctx.catalog = c->catalog_.get();
  ctx.metrics = c->metrics_.get();
  ctx.auth = std::move(auth);
  ctx.clock = options.clock;
  ctx.lease = options.lease;
  ctx.version = options.version;
  ctx.max_lease_wait = options.max_lease_wait;
  ctx.expiry_backoff = options.expiry_backoff;
  // Handlers wait on group commits, so more threads than cores: each waits
  // most of the time, and the waiting ones join one commit.
  c->worker_handlers_ =
      std::make_unique<HandlerPool>(kWorkerHandlerThreads, "worker-api");
  c->client_handlers_ =
      std::make_unique<HandlerPool>(kClientHandlerThreads, "client-api");
  ctx.worker_handlers = c->worker_handlers_.get();
  ctx.client_handlers = c->client_handlers_.get();

  // What the database holds decides the state; log what was found.
  HLAB_ASSIGN_OR_RETURN(store::RecoveredState recovered,
                        c->store_->LoadState());
  HLAB_LOG(INFO) << "store " << options.db_path << ": "
                 << recovered.leased.size() << " leased tasks, "
                 << recovered.pending.size() << " pending, "
                 << recovered.workers.size() << " workers, event seq "
                 << recovered.last_event_seq;

  if (serve_metrics) {
    HLAB_RETURN_IF_ERROR(c->metrics_->Serve(options.metrics_listen));
  }

  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::InsecureServerCredentials();
  if (!options.tls_cert.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({tls_key, tls_cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  c->client_service_ = std::make_unique<ClientServiceImpl>(&c->context_);
  c->worker_service_ = std::make_unique<WorkerServiceImpl>(&c->context_);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, creds, &c->port_);
  builder.RegisterService(c->client_service_.get());
  builder.RegisterService(c->worker_service_.get());
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(HandledCallsCounter(c->metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  // Workers ping every 20-30 s; allow that without GOAWAY.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // SO_REUSEPORT would let a second coordinator share the port silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  c->server_ = builder.BuildAndStart();
  if (c->server_ == nullptr || c->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen,
                     ": address in use or not valid for this host"));
  }
  c->reaper_ =
      std::make_unique<LeaseReaper>(&c->context_, options.reaper_interval);
  if (options.start_reaper) c->reaper_->Start();
  FitSchedulerOptions fitter_options;
  fitter_options.interval = options.fit_interval;
  fitter_options.bootstrap = options.fit_bootstrap;
  fitter_options.threads = options.fit_threads;
  fitter_options.binary = options.fit_binary;
  fitter_options.fit_finished = options.auto_fit;
  fitter_options.predict = options.live_predictions;
  fitter_options.predict_busy_fraction = 0.25;
  c->fitter_ = std::make_unique<FitScheduler>(&c->context_, fitter_options);
  if ((options.auto_fit || options.live_predictions) && options.start_reaper) {
    c->fitter_->Start();
  }
  return c;
}

Coordinator::~Coordinator() { Shutdown(); }

std::string Coordinator::address() const {
  const std::string& listen = options_.listen;
  const size_t colon = listen.rfind(':');
  return absl::StrCat(listen.substr(0, colon), ":", port_);
}

void Coordinator::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_) {
    // Unary calls get a second to finish; streams are cancelled then.
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
  }
  if (reaper_) reaper_->Stop();
  if (fitter_) fitter_->Stop();
}

void Coordinator::Wait() {
  if (server_) server_->Wait();
}

}  // namespace hlab::coordinator
