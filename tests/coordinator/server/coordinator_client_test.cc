// ClientService against an in-process coordinator on port 0: submit,
// idempotent resubmit, invalid specs, reads, query, cancel/resume, watch.
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "coordinator/server/coordinator.h"
#include "hlab/v1/client_service.grpc.pb.h"
#include "tests/coordinator/server/coordinator_test_util.h"

namespace hlab::coordinator {
namespace {

using testing::FakeClock;
using testing::TempDir;

class ClientServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator_ = testing::StartOrDie(
        testing::TestOptions(dir_.File("hlab.db"), &clock_));
    ASSERT_NE(coordinator_, nullptr);
    stub_ = hlab::v1::ClientService::NewStub(testing::Connect(*coordinator_));
  }

  grpc::Status Submit(const hlab::v1::SweepSpec& spec,
                      hlab::v1::SubmitSweepResponse* response,
                      const std::string& request_id = "") {
    grpc::ClientContext ctx;
    hlab::v1::SubmitSweepRequest request;
    *request.mutable_spec() = spec;
    request.set_request_id(request_id);
    return stub_->SubmitSweep(&ctx, request, response);
  }

  // Rows of a read-only query through the RPC.
  hlab::v1::QueryResponse Query(const std::string& sql) {
    grpc::ClientContext ctx;
    hlab::v1::QueryRequest request;
    request.set_sql(sql);
    hlab::v1::QueryResponse response;
    grpc::Status status = stub_->Query(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  int64_t Count(const std::string& table) {
    hlab::v1::QueryResponse r = Query("SELECT count(*) FROM " + table);
    return r.rows_size() == 1 ? r.rows(0).values(0).int_value() : -1;
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<hlab::v1::ClientService::Stub> stub_;
};

TEST_F(ClientServiceTest, SubmitStoresRunsAndTasksOnce) {
  hlab::v1::SubmitSweepResponse first;
  ASSERT_TRUE(Submit(testing::DemoSpec(), &first, "req-1").ok());
  EXPECT_TRUE(first.created());
  EXPECT_EQ(first.runs_size(), 48);
  EXPECT_EQ(first.sweep().runs_total(), 48);
  EXPECT_EQ(first.sweep().state(), hlab::v1::SWEEP_STATE_RUNNING);
  EXPECT_GT(first.flops_unshared(), first.flops_shared());
  EXPECT_EQ(Count("runs"), 48);
  // 16 trunks + 48 decays + 48 evals.
  EXPECT_EQ(Count("tasks"), 112);

  // Same request id, then a new request id with the same spec: one sweep.
  for (const char* id : {"req-1", "req-2"}) {
    hlab::v1::SubmitSweepResponse again;
    ASSERT_TRUE(Submit(testing::DemoSpec(), &again, id).ok());
    EXPECT_FALSE(again.created());
    EXPECT_EQ(again.sweep().sweep_id(), first.sweep().sweep_id());
    EXPECT_EQ(again.runs_size(), 48);
  }
  EXPECT_EQ(Count("sweeps"), 1);
  EXPECT_EQ(Count("runs"), 48);
  EXPECT_EQ(Count("tasks"), 112);
}

TEST_F(ClientServiceTest, RequestIdReusedWithAnotherSpecIsRefused) {
  hlab::v1::SubmitSweepResponse r;
  ASSERT_TRUE(Submit(testing::Spec(testing::TinySpecYaml("a")), &r, "x").ok());
  grpc::Status status =
      Submit(testing::Spec(testing::TinySpecYaml("b")), &r, "x");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(Count("sweeps"), 1);
}

TEST_F(ClientServiceTest, DryRunStoresNothing) {
  grpc::ClientContext ctx;
  hlab::v1::SubmitSweepRequest request;
  *request.mutable_spec() = testing::DemoSpec();
  request.set_dry_run(true);
  hlab::v1::SubmitSweepResponse response;
  ASSERT_TRUE(stub_->SubmitSweep(&ctx, request, &response).ok());
  EXPECT_EQ(response.runs_size(), 48);
  EXPECT_EQ(response.tasks_size(), 112);
  EXPECT_EQ(Count("sweeps"), 0);
}

TEST_F(ClientServiceTest, InvalidSpecsNameTheFieldAndChangeNothing) {
  hlab::v1::SubmitSweepResponse ok;
  ASSERT_TRUE(Submit(testing::Spec(testing::TinySpecYaml("base")), &ok).ok());
  const int64_t events = Count("events");
  struct Case {
    std::string field;
    std::function<void(hlab::v1::SweepSpec*)> mutate;
  };
  const std::vector<Case> cases = {
      {"scales", [](auto* s) { s->clear_scales(); }},
      {"seq_len", [](auto* s) { s->set_seq_len(0); }},
      {"batch_tokens", [](auto* s) { s->set_batch_tokens(1000); }},
      {"schedule.peak_lr",
       [](auto* s) { s->mutable_schedule()->set_peak_lr(-1); }},
      // The demo's hybrids carry a pattern, which a name does not override.
      {"architectures[1]",
       [](auto* s) {
         s->mutable_architectures(1)->set_name("nonsense-7");
         s->mutable_architectures(1)->clear_pattern();
       }},
      {"data.source", [](auto* s) { s->mutable_data()->set_source("tape"); }},
      {"retry.max_attempts_per_run",
       [](auto* s) { s->mutable_retry()->set_max_attempts_per_run(0); }},
      {"architectures", [](auto* s) { s->clear_architectures(); }},
      {"budgets", [](auto* s) { s->mutable_budgets()->clear_tokens(); }},
      {"budgets.tokens",
       [](auto* s) { s->mutable_budgets()->set_tokens(0, -1); }},
      {"scales[1].name",
       [](auto* s) { s->mutable_scales(1)->set_name(s->scales(0).name()); }},
      {"architectures[2]",
       [](auto* s) { *s->mutable_architectures(2) = s->architectures(0); }},
      {"window",
       [](auto* s) {
         s->mutable_architectures(1)->set_name("swa-512");
         s->mutable_architectures(1)->clear_pattern();
       }},
      {"n_kv_heads", [](auto* s) { s->mutable_scales(0)->set_n_kv_heads(3); }},
      {"schedule.decay_shape",
       [](auto* s) { s->mutable_schedule()->set_decay_shape("exp"); }},
      {"schedule.min_lr_ratio",
       [](auto* s) { s->mutable_schedule()->set_min_lr_ratio(2); }},
      {"schedule.decay_fraction",
       [](auto* s) { s->mutable_schedule()->set_decay_fraction(-0.5); }},
      {"data.long_fraction",
       [](auto* s) { s->mutable_data()->set_long_fraction(1.5); }},
      {"seeds", [](auto* s) { s->add_seeds(0); }},
      {"fit.fit_scales",
       [](auto* s) { s->mutable_fit()->add_fit_scales("S9"); }},
      {"fit.verify_scales",
       [](auto* s) { s->mutable_fit()->add_verify_scales("S1"); }},
      {"resources", [](auto* s) { s->add_resources()->set_scale("S9"); }},
      {"retry.max_retries_per_sweep",
       [](auto* s) { s->mutable_retry()->set_max_retries_per_sweep(-1); }},
      {"adaptive.stop_when: needs a fit section",
       [](auto* s) {
         s->clear_fit();
         s->mutable_adaptive()->mutable_stop_when()->set_interval_below(0.1);
       }},
      {"adaptive.stop_when.interval_below: must be > 0",
       [](auto* s) {
         s->mutable_adaptive()->mutable_stop_when()->set_interval_below(-1);
       }},
      {"adaptive.target.scales[0]: unknown scale 'S9'",
       [](auto* s) {
         s->set_schedule_policy("adaptive");
         s->mutable_adaptive()->mutable_target()->add_scales("S9");
       }},
      {"schedule_policy: unknown policy 'fastest'",
       [](auto* s) { s->set_schedule_policy("fastest"); }},
  };
  ASSERT_GE(cases.size(), 20u);
  for (const Case& c : cases) {
    hlab::v1::SweepSpec spec = testing::DemoSpec();
    spec.set_name("bad");
    c.mutate(&spec);
    hlab::v1::SubmitSweepResponse response;
    grpc::Status status = Submit(spec, &response, "bad-" + c.field);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << c.field;
    EXPECT_NE(status.error_message().find(c.field), std::string::npos)
        << c.field << ": " << status.error_message();
  }
  EXPECT_EQ(Count("sweeps"), 1);
  EXPECT_EQ(Count("runs"), 1);
  EXPECT_EQ(Count("tasks"), 1);
  EXPECT_EQ(Count("events"), events);
}

// schedule_policy: adaptive ranks the sweep's training tasks at submit
// (the seeds: no law yet); the default order ranks nothing.
TEST_F(ClientServiceTest, AdaptiveSubmitRanksItsSeedsFirst) {
  hlab::v1::SweepSpec spec = testing::DemoSpec();
  spec.set_schedule_policy("adaptive");
  hlab::v1::SubmitSweepResponse response;
  ASSERT_TRUE(Submit(spec, &response).ok());
  EXPECT_TRUE(response.created());
  // 16 trunks of 3 segments and 48 decays; its evaluations lease by cost.
  EXPECT_EQ(Count("tasks WHERE order_key IS NOT NULL"), 96);
  EXPECT_EQ(Count("tasks WHERE order_key IS NOT NULL AND kind = 'TRUNK'"), 48);
  EXPECT_EQ(Count("tasks WHERE order_key IS NOT NULL AND kind = 'EVAL'"), 0);
  hlab::v1::SubmitSweepResponse plain;
  ASSERT_TRUE(
      Submit(testing::Spec(testing::TinySpecYaml("plain")), &plain).ok());
  EXPECT_EQ(Count("tasks WHERE order_key IS NOT NULL"), 96);
  grpc::ClientContext ctx;
  hlab::v1::ListRunsRequest request;
  request.set_sweep(response.sweep().sweep_id());
  hlab::v1::ListRunsResponse runs;
  ASSERT_TRUE(stub_->ListRuns(&ctx, request, &runs).ok());
  ASSERT_EQ(runs.runs_size(), 48);
  std::set<int64_t> ranks;
  const hlab::v1::Run* first = nullptr;
  for (const hlab::v1::Run& r : runs.runs()) {
    ranks.insert(r.order_rank());
    if (r.order_rank() == 1) first = &r;
  }
  EXPECT_EQ(ranks.size(), 48u);  // every run its own rank, 1..48
  EXPECT_EQ(*ranks.begin(), 1);
  EXPECT_EQ(*ranks.rbegin(), 48);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->scale(), "S1");
  EXPECT_FALSE(first->has_order_score());  // seeding: no law yet
  EXPECT_EQ(first->order_reason().rfind("seed: adds scale S1 to ", 0), 0u)
      << first->order_reason();
}

TEST_F(ClientServiceTest, GetSweepAndListRunsFilter) {
  hlab::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(Submit(testing::DemoSpec(), &submitted).ok());
  for (const std::string& ref :
       std::vector<std::string>{submitted.sweep().sweep_id(), "demo"}) {
    grpc::ClientContext ctx;
    hlab::v1::GetSweepRequest request;
    request.set_sweep(ref);
    hlab::v1::GetSweepResponse response;
    ASSERT_TRUE(stub_->GetSweep(&ctx, request, &response).ok()) << ref;
    EXPECT_EQ(response.sweep().sweep_id(), submitted.sweep().sweep_id());
    EXPECT_EQ(response.sweep().runs_pending(), 48);
  }
  {
    grpc::ClientContext ctx;
    hlab::v1::GetSweepRequest request;
    request.set_sweep("no-such-sweep");
    hlab::v1::GetSweepResponse response;
    EXPECT_EQ(stub_->GetSweep(&ctx, request, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  grpc::ClientContext ctx;
  hlab::v1::ListRunsRequest request;
  request.set_sweep("demo");
  request.set_architecture("gdn");
  request.set_scale("S2");
  request.add_states(hlab::v1::RUN_STATE_PENDING);
  hlab::v1::ListRunsResponse response;
  ASSERT_TRUE(stub_->ListRuns(&ctx, request, &response).ok());
  ASSERT_EQ(response.runs_size(), 3);
  for (const auto& run : response.runs()) {
    EXPECT_EQ(run.architecture(), "gdn");
    EXPECT_EQ(run.scale(), "S2");
    EXPECT_GT(run.flops(), 0);
    EXPECT_EQ(run.sweep_ids(0), submitted.sweep().sweep_id());
  }
  // Paging.
  grpc::ClientContext page_ctx;
  hlab::v1::ListRunsRequest page_request;
  page_request.set_page_size(40);
  hlab::v1::ListRunsResponse page;
  ASSERT_TRUE(stub_->ListRuns(&page_ctx, page_request, &page).ok());
  EXPECT_EQ(page.runs_size(), 40);
  EXPECT_EQ(page.next_page_token(), "40");
}

TEST_F(ClientServiceTest, QueryIsReadOnly) {
  hlab::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(
      Submit(testing::Spec(testing::TinySpecYaml("q")), &submitted).ok());
  hlab::v1::QueryResponse r = Query("SELECT run_id, state FROM run_summary");
  ASSERT_EQ(r.columns_size(), 2);
  EXPECT_EQ(r.columns(0), "run_id");
  ASSERT_EQ(r.rows_size(), 1);
  EXPECT_EQ(r.rows(0).values(1).text_value(), "PENDING");
  for (const char* sql :
       {"INSERT INTO events (kind, message, time) VALUES ('x', 'y', 0)",
        "DELETE FROM runs", "DROP TABLE runs", "UPDATE runs SET state = 'x'",
        "SELECT 1; DELETE FROM runs"}) {
    grpc::ClientContext ctx;
    hlab::v1::QueryRequest request;
    request.set_sql(sql);
    hlab::v1::QueryResponse response;
    EXPECT_EQ(stub_->Query(&ctx, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << sql;
  }
  EXPECT_EQ(Count("runs"), 1);
}

TEST_F(ClientServiceTest, CancelAndResumeASweep) {
  hlab::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(
      Submit(testing::Spec(testing::TinySpecYaml("c", "[5, 10]")), &submitted)
          .ok());
  {
    grpc::ClientContext ctx;
    hlab::v1::CancelRequest request;
    request.set_run_id(submitted.runs(0).run_id());
    hlab::v1::CancelResponse response;
    ASSERT_TRUE(stub_->Cancel(&ctx, request, &response).ok());
    ASSERT_EQ(response.run_ids_size(), 1);
  }
  {
    grpc::ClientContext ctx;
    hlab::v1::CancelRequest request;
    request.set_sweep("c");
    hlab::v1::CancelResponse response;
    ASSERT_TRUE(stub_->Cancel(&ctx, request, &response).ok());
    EXPECT_EQ(response.run_ids_size(), 1);  // the other one
  }
  {
    grpc::ClientContext ctx;
    hlab::v1::GetSweepRequest request;
    request.set_sweep("c");
    hlab::v1::GetSweepResponse response;
    ASSERT_TRUE(stub_->GetSweep(&ctx, request, &response).ok());
    EXPECT_EQ(response.sweep().state(), hlab::v1::SWEEP_STATE_CANCELLED);
    EXPECT_EQ(response.sweep().runs_cancelled(), 2);
  }
  grpc::ClientContext ctx;
  hlab::v1::ResumeRequest request;
  request.set_sweep("c");
  hlab::v1::ResumeResponse response;
  ASSERT_TRUE(stub_->Resume(&ctx, request, &response).ok());
  EXPECT_EQ(response.run_ids_size(), 2);
}

TEST_F(ClientServiceTest, WatchStreamsEventsAfterASequence) {
  hlab::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(
      Submit(testing::Spec(testing::TinySpecYaml("w", "[5, 10]")), &submitted)
          .ok());
  {
    grpc::ClientContext ctx;
    hlab::v1::CancelRequest request;
    request.set_sweep("w");
    hlab::v1::CancelResponse response;
    ASSERT_TRUE(stub_->Cancel(&ctx, request, &response).ok());
  }
  // The sweep is finished (cancelled): an until_done stream replays its
  // events and ends.
  std::vector<hlab::v1::Event> events;
  {
    grpc::ClientContext ctx;
    hlab::v1::WatchSweepRequest request;
    request.set_sweep("w");
    request.set_until_done(true);
    auto reader = stub_->WatchSweep(&ctx, request);
    hlab::v1::Event event;
    while (reader->Read(&event)) events.push_back(event);
    ASSERT_TRUE(reader->Finish().ok());
  }
  ASSERT_GE(events.size(), 3u);  // submitted, 2 cancelled runs, cancelled
  EXPECT_EQ(events[0].kind(), hlab::v1::SWEEP_SUBMITTED);
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_GT(events[i].sequence(), events[i - 1].sequence());
  }
  // Resuming after the first event skips it.
  grpc::ClientContext ctx;
  hlab::v1::WatchSweepRequest request;
  request.set_sweep("w");
  request.set_after_sequence(events[0].sequence());
  request.set_until_done(true);
  auto reader = stub_->WatchSweep(&ctx, request);
  hlab::v1::Event event;
  std::vector<hlab::v1::Event> rest;
  while (reader->Read(&event)) rest.push_back(event);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(rest.size(), events.size() - 1);
  EXPECT_EQ(rest[0].sequence(), events[1].sequence());
}

TEST_F(ClientServiceTest, WatchEndsWhenTheClientCancels) {
  hlab::v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(
      Submit(testing::Spec(testing::TinySpecYaml("open")), &submitted).ok());
  grpc::ClientContext ctx;
  hlab::v1::WatchSweepRequest request;
  request.set_sweep("open");
  request.set_until_done(true);
  auto reader = stub_->WatchSweep(&ctx, request);
  hlab::v1::Event event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), hlab::v1::SWEEP_SUBMITTED);
  ctx.TryCancel();
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

}  // namespace
}  // namespace hlab::coordinator
