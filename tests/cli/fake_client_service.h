// A fake hlab.v1.ClientService for the CLI's tests: canned answers, every
// request recorded, the bearer token checked. It uses the synchronous API
// (simplest for canned answers in a test; the coordinator uses the callback
// API). Serve() binds 127.0.0.1:0.
//
// Thread-safe: handlers run on gRPC threads; the recorded requests are
// guarded by a mutex, the canned answers are set before the calls.
//
//   FakeClientService fake;
//   fake.list_runs.add_runs()->set_run_id("0123456789abcdef");
//   std::unique_ptr<grpc::Server> server = fake.Serve();
//   RunCli({"runs", "--address", fake.address()}, out, err);
#ifndef HLAB_TESTS_CLI_FAKE_CLIENT_SERVICE_H_
#define HLAB_TESTS_CLI_FAKE_CLIENT_SERVICE_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "hlab/v1/client_service.grpc.pb.h"

namespace hlab::cli::testing {

class FakeClientService final : public v1::ClientService::Service {
 public:
  // Canned answers.
  std::string required_token;  // non-empty: others get UNAUTHENTICATED
  grpc::Status forced_status = grpc::Status::OK;  // not OK: every call
  v1::SubmitSweepResponse submit;
  v1::GetSweepResponse get_sweep;
  v1::ListRunsResponse list_runs;
  // Non-empty: ListRuns answers page N for page_token "N" ("" is 0).
  std::vector<v1::ListRunsResponse> list_runs_pages;
  v1::QueryResponse query;
  v1::ListWorkersResponse list_workers;
  v1::CancelResponse cancel;
  v1::ResumeResponse resume;
  // Ids that Cancel/Resume answer NOT_FOUND for, as sweeps / as runs.
  std::vector<std::string> unknown_sweeps;
  std::vector<std::string> unknown_runs;
  // DrainWorker answers the named worker, draining (or alive when
  // undrained), holding these tasks; NOT_FOUND for unknown_workers.
  std::vector<std::string> drain_task_ids;
  std::vector<std::string> unknown_workers;
  // One entry per WatchSweep call: the events it streams (those after the
  // request's after_sequence); every call but the last then fails with
  // UNAVAILABLE, as a dropped stream does.
  std::vector<std::vector<v1::Event>> watch_streams;
  // Set: the last stream, after its events, calls this and stays open until
  // the client cancels it.
  std::function<void()> on_watch_held;
  // EvaluateRun: call k answers evaluate_run[k] (the last one once past the
  // end), so a test plays a task's states; evaluate_status, when not OK,
  // answers every call instead.
  std::vector<v1::EvaluateRunResponse> evaluate_run;
  grpc::Status evaluate_status = grpc::Status::OK;

  // Plaintext, or TLS with `credentials`.
  std::unique_ptr<grpc::Server> Serve(
      std::shared_ptr<grpc::ServerCredentials> credentials =
          grpc::InsecureServerCredentials()) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(this);
    return builder.BuildAndStart();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Recorded requests.
  struct Recorded {
    std::vector<std::string> authorization;  // per call, "" when absent
    std::vector<v1::SubmitSweepRequest> submits;
    std::vector<v1::ListRunsRequest> list_runs;
    std::vector<v1::QueryRequest> queries;
    std::vector<v1::WatchSweepRequest> watches;
    std::vector<v1::CancelRequest> cancels;
    std::vector<v1::ResumeRequest> resumes;
    std::vector<v1::EvaluateRunRequest> evaluates;
    std::vector<v1::DrainWorkerRequest> drains;
  };
  Recorded recorded() const {
    absl::MutexLock lock(&mu_);
    return recorded_;
  }

  grpc::Status SubmitSweep(grpc::ServerContext* context,
                           const v1::SubmitSweepRequest* request,
                           v1::SubmitSweepResponse* response) override {
    return Answer(context, &Recorded::submits, *request, submit, response);
  }
  grpc::Status GetSweep(grpc::ServerContext* context,
                        const v1::GetSweepRequest* request,
                        v1::GetSweepResponse* response) override {
    return Answer(context, nullptr, *request, get_sweep, response);
  }
  grpc::Status ListRuns(grpc::ServerContext* context,
                        const v1::ListRunsRequest* request,
                        v1::ListRunsResponse* response) override {
    if (list_runs_pages.empty()) {
      return Answer(context, &Recorded::list_runs, *request, list_runs,
                    response);
    }
    const size_t page =
        request->page_token().empty() ? 0 : std::stoul(request->page_token());
    return Answer(context, &Recorded::list_runs, *request,
                  list_runs_pages.at(page), response);
  }
  grpc::Status Query(grpc::ServerContext* context,
                     const v1::QueryRequest* request,
                     v1::QueryResponse* response) override {
    return Answer(context, &Recorded::queries, *request, query, response);
  }
  grpc::Status ListWorkers(grpc::ServerContext* context,
                           const v1::ListWorkersRequest* request,
                           v1::ListWorkersResponse* response) override {
    return Answer(context, nullptr, *request, list_workers, response);
  }
  grpc::Status Cancel(grpc::ServerContext* context,
                      const v1::CancelRequest* request,
                      v1::CancelResponse* response) override {
    grpc::Status s =
        Answer(context, &Recorded::cancels, *request, cancel, response);
    if (s.ok() && Unknown(request->sweep(), request->run_id())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such sweep or run");
    }
    return s;
  }
  grpc::Status Resume(grpc::ServerContext* context,
                      const v1::ResumeRequest* request,
                      v1::ResumeResponse* response) override {
    grpc::Status s =
        Answer(context, &Recorded::resumes, *request, resume, response);
    if (s.ok() && Unknown(request->sweep(), request->run_id())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such sweep or run");
    }
    return s;
  }
  grpc::Status DrainWorker(grpc::ServerContext* context,
                           const v1::DrainWorkerRequest* request,
                           v1::DrainWorkerResponse* response) override {
    v1::DrainWorkerResponse canned;
    v1::Worker* w = canned.mutable_worker();
    w->set_worker_id(request->worker_id());
    w->set_state(request->undrain() ? v1::WORKER_STATE_ALIVE
                                    : v1::WORKER_STATE_DRAINING);
    for (const std::string& id : drain_task_ids) w->add_task_ids(id);
    grpc::Status s =
        Answer(context, &Recorded::drains, *request, canned, response);
    for (const std::string& id : unknown_workers) {
      if (s.ok() && request->worker_id() == id) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND,
                            "no worker '" + id + "'");
      }
    }
    return s;
  }
  grpc::Status EvaluateRun(grpc::ServerContext* context,
                           const v1::EvaluateRunRequest* request,
                           v1::EvaluateRunResponse* response) override {
    size_t call = 0;
    {
      absl::MutexLock lock(&mu_);
      call = recorded_.evaluates.size();
    }
    const v1::EvaluateRunResponse canned =
        evaluate_run.empty()
            ? v1::EvaluateRunResponse()
            : evaluate_run[std::min(call, evaluate_run.size() - 1)];
    grpc::Status s =
        Answer(context, &Recorded::evaluates, *request, canned, response);
    return s.ok() ? evaluate_status : s;
  }
  grpc::Status WatchSweep(grpc::ServerContext* context,
                          const v1::WatchSweepRequest* request,
                          grpc::ServerWriter<v1::Event>* writer) override {
    size_t call = 0;
    {
      absl::MutexLock lock(&mu_);
      recorded_.authorization.push_back(Authorization(context));
      call = recorded_.watches.size();
      recorded_.watches.push_back(*request);
    }
    grpc::Status refused = Check(context);
    if (!refused.ok()) return refused;
    if (call >= watch_streams.size()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no more streams");
    }
    for (const v1::Event& e : watch_streams[call]) {
      if (e.sequence() > request->after_sequence()) writer->Write(e);
    }
    if (call + 1 < watch_streams.size()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream dropped");
    }
    if (on_watch_held) {
      on_watch_held();
      while (!context->IsCancelled()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return grpc::Status::CANCELLED;
    }
    return grpc::Status::OK;
  }

 private:
  static std::string Authorization(grpc::ServerContext* context) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("authorization");
    if (it == metadata.end()) return "";
    return std::string(it->second.data(), it->second.size());
  }

  grpc::Status Check(grpc::ServerContext* context) const {
    if (!required_token.empty() &&
        Authorization(context) != "Bearer " + required_token) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "missing or unknown bearer token");
    }
    return forced_status;
  }

  bool Unknown(const std::string& sweep, const std::string& run) const {
    for (const std::string& id : unknown_sweeps) {
      if (!sweep.empty() && sweep == id) return true;
    }
    for (const std::string& id : unknown_runs) {
      if (!run.empty() && run == id) return true;
    }
    return false;
  }

  template <typename Request, typename Response>
  grpc::Status Answer(
      grpc::ServerContext* context,
      std::vector<typename std::common_type<Request>::type> Recorded::*log,
      const Request& request, const Response& canned, Response* response) {
    {
      absl::MutexLock lock(&mu_);
      recorded_.authorization.push_back(Authorization(context));
      if (log != nullptr) (recorded_.*log).push_back(request);
    }
    grpc::Status refused = Check(context);
    if (!refused.ok()) return refused;
    *response = canned;
    return grpc::Status::OK;
  }

  int port_ = 0;
  mutable absl::Mutex mu_;
  Recorded recorded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hlab::cli::testing

#endif  // HLAB_TESTS_CLI_FAKE_CLIENT_SERVICE_H_
