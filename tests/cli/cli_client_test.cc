// hlab's client commands against a fake ClientService on 127.0.0.1:0:
// what they send (spec, request id, filters) and what they print (tables,
// JSON, CSV, one-line errors). Connection, tokens and TLS:
// cli_connection_test.cc; watch: cli_watch_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "tests/cli/cli_test_util.h"

namespace hlab::cli {
namespace {

using testing::CliClientTest;
using testing::Example;
using testing::Lines;
using testing::Result;

TEST_F(CliClientTest, SubmitSendsTheParsedSpecAndRequestId) {
  fake_.submit.mutable_sweep()->set_sweep_id("sw-123");
  fake_.submit.mutable_sweep()->set_name("demo");
  fake_.submit.set_created(true);
  for (int i = 0; i < 3; ++i) fake_.submit.add_runs();
  fake_.submit.add_reused_run_ids("0123456789abcdef");
  const Result r = Hlab({"submit", Example("demo.yaml"), "--request-id",
                         "req-1", "--priority", "7"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("sweep sw-123 \"demo\": submitted (new)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("3 runs (1 already trained in another sweep"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hlab watch sw-123"), std::string::npos);
  const auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.submits.size(), 1u);
  EXPECT_EQ(recorded.submits[0].request_id(), "req-1");
  EXPECT_EQ(recorded.submits[0].spec().name(), "demo");
  EXPECT_GT(recorded.submits[0].spec().architectures_size(), 0);
  EXPECT_EQ(recorded.submits[0].spec().priority(), 7);
  EXPECT_FALSE(recorded.submits[0].dry_run());
  EXPECT_EQ(recorded.authorization[0], "");  // no token given

  fake_.submit.set_created(false);
  const Result again = Hlab({"submit", Example("demo.yaml")});
  ASSERT_EQ(again.code, kExitOk) << again.err;
  EXPECT_NE(again.out.find("already submitted"), std::string::npos);
  // Without --request-id: a fresh UUID.
  const std::string id = fake_.recorded().submits[1].request_id();
  EXPECT_EQ(id.size(), 36u) << id;
  EXPECT_NE(id, "req-1");
}

TEST_F(CliClientTest, SubmitJsonPrintsTheResponse) {
  fake_.submit.mutable_sweep()->set_sweep_id("sw-9");
  const Result r = Hlab({"submit", Example("demo.yaml"), "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["sweep"]["sweep_id"], "sw-9");
}

TEST_F(CliClientTest, InvalidArgumentPassesTheServersMessage) {
  fake_.forced_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "scales[1].d_model: must be positive");
  const Result r = Hlab({"submit", Example("demo.yaml")});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(r.err, "hlab submit: error: scales[1].d_model: must be positive\n");
}

void AddRuns(v1::ListRunsResponse* response) {
  v1::Run* a = response->add_runs();
  a->set_run_id("0123456789abcdef");
  a->add_sweep_ids("sw-1");
  a->set_architecture("gdn");
  a->set_scale("S1");
  a->set_non_embedding_params(1000000);
  a->set_tokens(20000000);
  a->set_tokens_per_param(20);
  a->set_state(v1::RUN_STATE_SUCCEEDED);
  a->set_tokens_done(20000000);
  a->set_final_loss(3.25);
  a->set_final_val_loss(3.5);
  // The last live prediction before it finished, to read against 3.5.
  v1::RunPrediction* p = a->add_predictions();
  p->set_sweep_id("sw-1");
  p->set_generation(2);
  p->set_target("loss");
  p->set_predicted(3.4);
  p->set_lower(3.3);
  p->set_upper(3.5);
  p->set_method("profile");
  v1::Run* b = response->add_runs();
  b->set_run_id("fedcba9876543210");
  b->add_sweep_ids("sw-1");
  b->set_architecture("mix,ed");
  b->set_scale("S2");
  b->set_seed(1);
  b->set_non_embedding_params(2000000);
  b->set_tokens(40000000);
  b->set_state(v1::RUN_STATE_FAILED);
  b->set_tokens_done(10000000);
  b->set_error("oom, \"cuda\" failed");
}

TEST_F(CliClientTest, RunsPrintsCsvWithQuoting) {
  AddRuns(&fake_.list_runs);
  const Result r =
      Hlab({"runs", "--sweep", "sw-1", "--state", "succeeded,failed", "--arch",
            "gdn", "--format", "csv"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "run_id,sweep,architecture,scale,seed,params,tokens,"
            "tokens_per_param,state,progress,final_loss,final_val_loss,"
            "final_log_longppl,predicted_loss,predicted_loss_lo,"
            "predicted_loss_hi,predicted_log_longppl,prediction_generation,"
            "order_rank,order_score,order_reason,error\n"
            "0123456789abcdef,sw-1,gdn,S1,0,1000000,20000000,20,succeeded,1,"
            "3.25,3.5,,3.4,3.3,3.5,,2,,,,\n"
            "fedcba9876543210,sw-1,\"mix,ed\",S2,1,2000000,40000000,20,failed,"
            "0.25,,,,,,,,,,,,\"oom, \"\"cuda\"\" failed\"\n");
  const auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.list_runs.size(), 1u);
  const v1::ListRunsRequest& request = recorded.list_runs[0];
  EXPECT_EQ(request.sweep(), "sw-1");
  EXPECT_EQ(request.architecture(), "gdn");
  ASSERT_EQ(request.states_size(), 2);
  EXPECT_EQ(request.states(0), v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(request.states(1), v1::RUN_STATE_FAILED);
}

TEST_F(CliClientTest, RunsPrintsJsonAndTable) {
  AddRuns(&fake_.list_runs);
  const Result json = Hlab({"runs", "--format", "json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["run_id"], "0123456789abcdef");
  EXPECT_EQ(j[0]["params"], 1000000);
  EXPECT_EQ(j[0]["final_loss"], 3.25);
  EXPECT_TRUE(j[0]["error"].is_null());
  EXPECT_TRUE(j[1]["final_loss"].is_null());
  EXPECT_EQ(j[1]["architecture"], "mix,ed");
  EXPECT_EQ(j[1]["error"], "oom, \"cuda\" failed");
  EXPECT_EQ(j[1]["progress"], 0.25);

  const Result table = Hlab({"runs"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_EQ(Lines(table.out), 3);
  EXPECT_EQ(table.out.substr(0, table.out.find('\n')),
            "run_id            sweep  architecture  scale  seed   params  "
            "  tokens  tokens_per_param  state      progress  final_loss  "
            "final_val_loss  final_log_longppl  predicted_loss  "
            "predicted_loss_lo  predicted_loss_hi  predicted_log_longppl  "
            "prediction_generation  order_rank  order_score  order_reason  "
            "error");
  EXPECT_EQ(j[0]["predicted_loss"], 3.4);
  EXPECT_EQ(j[0]["prediction_generation"], 2);
  EXPECT_TRUE(j[1]["predicted_loss"].is_null());
}

TEST_F(CliClientTest, RunsFetchesEveryPage) {
  AddRuns(&fake_.list_runs);
  fake_.list_runs_pages.resize(2);
  *fake_.list_runs_pages[0].add_runs() = fake_.list_runs.runs(0);
  fake_.list_runs_pages[0].set_next_page_token("1");
  *fake_.list_runs_pages[1].add_runs() = fake_.list_runs.runs(1);
  const Result r = Hlab({"runs", "--format", "csv"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(Lines(r.out), 3) << r.out;
  const auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.list_runs.size(), 2u);
  EXPECT_EQ(recorded.list_runs[0].page_token(), "");
  EXPECT_EQ(recorded.list_runs[1].page_token(), "1");
}

TEST_F(CliClientTest, QueryPrintsTypedValuesInEveryFormat) {
  fake_.query.add_columns("name");
  fake_.query.add_columns("n");
  fake_.query.add_columns("loss");
  v1::QueryRow* row = fake_.query.add_rows();
  row->add_values()->set_text_value("say \"hi\", then");
  row->add_values()->set_int_value(42);
  row->add_values()->set_double_value(0.1);
  row = fake_.query.add_rows();
  row->add_values()->set_text_value("plain");
  row->add_values();  // NULL
  row->add_values()->set_double_value(2.5);
  const std::string sql = "SELECT name, n, loss FROM t";

  Result r = Hlab({"query", sql, "--format", "csv"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "name,n,loss\n"
            "\"say \"\"hi\"\", then\",42,0.1\n"
            "plain,,2.5\n");
  EXPECT_EQ(fake_.recorded().queries[0].sql(), sql);

  r = Hlab({"query", sql, "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "[\n"
            "  {\n"
            "    \"name\": \"say \\\"hi\\\", then\",\n"
            "    \"n\": 42,\n"
            "    \"loss\": 0.1\n"
            "  },\n"
            "  {\n"
            "    \"name\": \"plain\",\n"
            "    \"n\": null,\n"
            "    \"loss\": 2.5\n"
            "  }\n"
            "]\n");

  r = Hlab({"query", sql});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "name             n  loss\n"
            "say \"hi\", then  42   0.1\n"
            "plain                2.5\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(CliClientTest, TableKeepsLongTextOnOneShortLine) {
  fake_.query.add_columns("config_json");
  fake_.query.add_rows()->add_values()->set_text_value(
      "{\n  \"model\": \"" + std::string(100, 'x') + "\"\n}");
  Result r = Hlab({"query", "SELECT config_json FROM runs"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "config_json\n{\\n  \"model\": \"" + std::string(42, 'x') +
                       "...\n");
  EXPECT_EQ(r.out.size(), std::string("config_json\n").size() + 60 + 1);
  r = Hlab({"query", "SELECT config_json FROM runs", "--format", "json"});
  EXPECT_NE(r.out.find(std::string(100, 'x')), std::string::npos);
}

TEST_F(CliClientTest, QuerySaysWhenTheResultWasCut) {
  fake_.query.add_columns("x");
  fake_.query.add_rows()->add_values()->set_int_value(1);
  fake_.query.set_truncated(true);
  const Result r = Hlab({"query", "SELECT x FROM t", "--max-rows", "1"});
  ASSERT_EQ(r.code, kExitOk);
  EXPECT_EQ(fake_.recorded().queries[0].max_rows(), 1);
  EXPECT_NE(r.err.find("cut at 1 rows"), std::string::npos) << r.err;
}

TEST_F(CliClientTest, CancelAndResumeFindTheTarget) {
  fake_.cancel.add_run_ids("0123456789abcdef");
  fake_.unknown_sweeps = {"0123456789abcdef"};
  Result r = Hlab({"cancel", "0123456789abcdef"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("cancelled 1 run of run 0123456789abcdef"),
            std::string::npos)
      << r.out;
  auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.cancels.size(), 1u);
  EXPECT_EQ(recorded.cancels[0].run_id(), "0123456789abcdef");

  // A name that is not a run id: a sweep.
  fake_.resume.add_run_ids("aaaa");
  fake_.resume.add_run_ids("bbbb");
  r = Hlab({"resume", "demo"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("resumed 2 runs of sweep demo"), std::string::npos);
  EXPECT_EQ(fake_.recorded().resumes[0].sweep(), "demo");

  // Long lists are cut after 10 ids.
  for (int i = 0; i < 12; ++i)
    fake_.cancel.add_run_ids("id" + std::to_string(i));
  fake_.unknown_sweeps = {};
  r = Hlab({"cancel", "--sweep", "big"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(Lines(r.out), 12) << r.out;
  EXPECT_NE(r.out.find("  ... and 3 more (hlab runs --sweep big --state "
                       "cancelled)\n"),
            std::string::npos)
      << r.out;

  fake_.unknown_sweeps = {"nope"};
  fake_.unknown_runs = {"nope"};
  r = Hlab({"resume", "nope"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(r.err,
            "hlab resume: error: no sweep or run 'nope'; list sweeps with "
            "`hlab status` and runs with `hlab runs`\n");
}

TEST_F(CliClientTest, DrainAndUndrainSayWhatToDoNext) {
  fake_.drain_task_ids = {"trunk-1", "decay-2"};
  Result r = Hlab({"drain", "w1", "w2"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "worker w1: draining; it is leased nothing new and runs its 2 "
            "tasks (trunk-1, decay-2) to their end; stop it once `hlab "
            "workers` shows it holding 0 tasks (SIGTERM: it deregisters), or "
            "`hlab undrain w1` to put it back\n"
            "worker w2: draining; it is leased nothing new and runs its 2 "
            "tasks (trunk-1, decay-2) to their end; stop it once `hlab "
            "workers` shows it holding 0 tasks (SIGTERM: it deregisters), or "
            "`hlab undrain w2` to put it back\n");
  fake_.drain_task_ids.clear();
  r = Hlab({"drain", "w1"});
  EXPECT_EQ(r.out,
            "worker w1: draining; it holds no task, so it can be stopped now "
            "(SIGTERM: it deregisters); `hlab undrain w1` puts it back\n");
  r = Hlab({"undrain", "w1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "worker w1: alive; it takes tasks again\n");
  const auto drains = fake_.recorded().drains;
  ASSERT_EQ(drains.size(), 4u);
  EXPECT_EQ(drains[1].worker_id(), "w2");
  EXPECT_FALSE(drains[2].undrain());
  EXPECT_TRUE(drains[3].undrain());

  // An unknown worker stops the list there, naming it.
  fake_.unknown_workers = {"nope"};
  r = Hlab({"drain", "w1", "nope", "w3"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_NE(r.err.find("hlab drain: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;
  EXPECT_EQ(fake_.recorded().drains.size(), 6u);
  r = Hlab({"drain"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("expected one or more worker ids"), std::string::npos)
      << r.err;
}

TEST_F(CliClientTest, WorkersAndStatus) {
  v1::Worker* w = fake_.list_workers.add_workers();
  w->set_worker_id("w1");
  w->set_hostname("node1");
  w->set_state(v1::WORKER_STATE_ALIVE);
  for (int i = 0; i < 2; ++i) {
    v1::Device* d = w->add_devices();
    d->set_kind("cuda");
    d->set_index(i);
    d->set_name("H100");
  }
  w->add_task_ids("trunk-1");
  Result r = Hlab({"workers", "--format", "csv"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "worker_id,hostname,state,devices,tasks,version,"
            "last_heartbeat_unix_ms\n"
            "w1,node1,alive,2x cuda (H100),1,,0\n");

  v1::Sweep* sweep = fake_.get_sweep.mutable_sweep();
  sweep->set_sweep_id("sw-1");
  sweep->set_name("demo");
  sweep->set_state(v1::SWEEP_STATE_RUNNING);
  sweep->set_runs_total(2);
  sweep->set_runs_succeeded(1);
  sweep->set_runs_failed(1);
  AddRuns(&fake_.list_runs);
  r = Hlab({"status", "sw-1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("sweep sw-1 \"demo\": running\n"
                       "runs: 2 total, 1 succeeded, 0 on trunk, 0 training, "
                       "0 decaying, 0 evaluating, 0 waiting, 1 failed, "
                       "0 cancelled\n"
                       "progress: 50.0% of tokens (30.0M of 60.0M)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fedcba9876543210  mix,ed  S2  oom"), std::string::npos)
      << r.out;

  r = Hlab({"status", "sw-1", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["sweep"]["runs_failed"], "1")
      << r.out;  // int64 fields are JSON strings in proto3 JSON

  r = Hlab({"status"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("sw-1      demo  running"), std::string::npos) << r.out;
}

// A shared trunk at 120K tokens with runs of budgets 100K < 200K < 400K
// (branch points 90K, 180K, 360K): each shows the tokens of its own budget.
TEST_F(CliClientTest, StatusCountsRunsByPhaseAndShowsTheirOwnProgress) {
  v1::Sweep* sweep = fake_.get_sweep.mutable_sweep();
  sweep->set_sweep_id("sw-1");
  sweep->set_name("demo");
  sweep->set_state(v1::SWEEP_STATE_RUNNING);
  sweep->set_runs_total(4);
  sweep->set_runs_pending(3);  // their trunk is not their own task
  sweep->set_runs_running(1);  // trained, its evaluation waits
  sweep->set_runs_on_trunk(3);
  sweep->set_runs_waiting(1);
  struct Row {
    const char* id;
    int64_t budget, done, step;
    v1::RunPhase phase;
  };
  for (const Row& r :
       {Row{"aaaaaaaaaaaaaaaa", 100000, 90000, 90, v1::RUN_PHASE_TRUNK},
        Row{"bbbbbbbbbbbbbbbb", 200000, 120000, 120, v1::RUN_PHASE_TRUNK},
        Row{"cccccccccccccccc", 400000, 120000, 120, v1::RUN_PHASE_TRUNK},
        Row{"dddddddddddddddd", 100000, 100000, 100, v1::RUN_PHASE_WAITING}}) {
    v1::Run* run = fake_.list_runs.add_runs();
    run->set_run_id(r.id);
    run->add_sweep_ids("sw-1");
    run->set_architecture("full");
    run->set_scale("S1");
    run->set_tokens(r.budget);
    run->set_tokens_done(r.done);
    run->set_steps_done(r.step);
    run->set_final_loss(3.25);
    run->set_phase(r.phase);
    run->set_state(r.phase == v1::RUN_PHASE_TRUNK ? v1::RUN_STATE_PENDING
                                                  : v1::RUN_STATE_RUNNING);
  }
  const Result r = Hlab({"status", "sw-1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "sweep sw-1 \"demo\": running\n"
            "runs: 4 total, 0 succeeded, 3 on trunk, 0 training, 0 decaying, "
            "0 evaluating, 1 waiting, 0 failed, 0 cancelled\n"
            "progress: 53.8% of tokens (430K of 800K), 0.0% of FLOPs (0 of "
            "0)\n"
            "active:\n"
            "  aaaaaaaaaaaaaaaa  full  S1  on trunk     90%  90.0K/100K tokens"
            "  step 90  loss 3.2500\n"
            "  bbbbbbbbbbbbbbbb  full  S1  on trunk     60%  120K/200K tokens"
            "  step 120  loss 3.2500\n"
            "  cccccccccccccccc  full  S1  on trunk     30%  120K/400K tokens"
            "  step 120  loss 3.2500\n"
            "next: hlab watch sw-1\n");
  const Result table = Hlab({"status"});
  ASSERT_EQ(table.code, kExitOk) << table.err;
  EXPECT_NE(table.out.find("on_trunk  training  decaying  evaluating  waiting"),
            std::string::npos)
      << table.out;
}

// With live predictions: a line with their generation and coverage, and
// each active run's predicted final loss.
TEST_F(CliClientTest, StatusShowsLivePredictions) {
  v1::Sweep* sweep = fake_.get_sweep.mutable_sweep();
  sweep->set_sweep_id("sw-1");
  sweep->set_name("demo");
  sweep->set_state(v1::SWEEP_STATE_RUNNING);
  sweep->set_runs_total(3);
  sweep->set_runs_succeeded(1);
  sweep->set_runs_pending(1);
  sweep->set_runs_running(1);
  sweep->set_runs_training(1);
  sweep->set_runs_waiting(1);
  sweep->set_prediction_generation(4);
  sweep->set_runs_predicted(2);
  v1::Run* run = fake_.list_runs.add_runs();
  run->set_run_id("aaaaaaaaaaaaaaaa");
  run->add_sweep_ids("sw-1");
  run->set_architecture("full");
  run->set_scale("S4");
  run->set_tokens(100000);
  run->set_tokens_done(50000);
  run->set_steps_done(50);
  run->set_phase(v1::RUN_PHASE_TRAINING);
  run->set_state(v1::RUN_STATE_RUNNING);
  v1::RunPrediction* p = run->add_predictions();
  p->set_sweep_id("sw-1");
  p->set_generation(4);
  p->set_target("loss");
  p->set_predicted(2.851);
  p->set_lower(2.802);
  p->set_upper(2.903);
  Result r = Hlab({"status", "sw-1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("predictions: generation 4, 2 of 2 unfinished runs "
                       "predicted (hlab runs --sweep sw-1)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  aaaaaaaaaaaaaaaa  full  S4  training     50%  "
                       "50.0K/100K tokens  step 50  predicted final 2.851 "
                       "[2.802, 2.903]\n"),
            std::string::npos)
      << r.out;

  // Finished (or cancelled): no "0 of 0", but where the last ones are.
  sweep->set_runs_pending(0);
  sweep->set_runs_running(0);
  sweep->set_runs_succeeded(3);
  sweep->set_state(v1::SWEEP_STATE_SUCCEEDED);
  r = Hlab({"status", "sw-1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("predictions: generation 4, no unfinished run; each "
                       "finished run's last, beside what it measured: hlab "
                       "runs --sweep sw-1\n"),
            std::string::npos)
      << r.out;
  r = Hlab({"status"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("cancelled  stopped  predicted  generation"),
            std::string::npos)
      << r.out;
}

// The adaptive order: a ranked pending run shows its rank, score and
// reason in `hlab runs`; `hlab status` names the policy and the next runs.
TEST_F(CliClientTest, RunsAndStatusShowTheAdaptiveOrder) {
  for (int rank : {2, 1}) {
    v1::Run* run = fake_.list_runs.add_runs();
    run->set_run_id(rank == 1 ? "1111111111111111" : "2222222222222222");
    run->add_sweep_ids("sw-1");
    run->set_architecture("gdn");
    run->set_scale(rank == 1 ? "S2" : "S4");
    run->set_tokens(786432);
    run->set_state(v1::RUN_STATE_PENDING);
    run->set_phase(v1::RUN_PHASE_WAITING);
    run->set_order_rank(rank);
    if (rank == 1) run->set_order_score(125000);
    run->set_order_reason(rank == 1 ? "narrows gdn's target predictions"
                                    : "scale S4 is not fitted");
  }
  Result r = Hlab({"runs", "--format", "json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["order_rank"], 2);
  EXPECT_TRUE(j[0]["order_score"].is_null());
  EXPECT_EQ(j[0]["order_reason"], "scale S4 is not fitted");
  EXPECT_EQ(j[1]["order_rank"], 1);
  EXPECT_EQ(j[1]["order_score"], 125000);

  v1::Sweep* sweep = fake_.get_sweep.mutable_sweep();
  sweep->set_sweep_id("sw-1");
  sweep->set_name("demo");
  sweep->set_state(v1::SWEEP_STATE_RUNNING);
  sweep->mutable_spec()->set_schedule_policy("adaptive");
  r = Hlab({"status", "sw-1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("order: adaptive, 2 pending runs ranked (hlab runs "
                       "--sweep sw-1: order_rank); next:\n"
                       "  #1  1111111111111111  gdn  S2  786K tokens  "
                       "score 1.25e+05/PFLOP  narrows gdn's target "
                       "predictions\n"
                       "  #2  2222222222222222  gdn  S4  786K tokens  "
                       "scale S4 is not fitted\n"),
            std::string::npos)
      << r.out;
}

// Early stop: a PREDICTED run is listed as "predicted" with the
// prediction that stopped it and no measured figure; --state predicted
// asks for it; status counts the sweep's stopped runs.
TEST_F(CliClientTest, PredictedRunsAreShownAsPredicted) {
  v1::Run* run = fake_.list_runs.add_runs();
  run->set_run_id("0123456789abcdef");
  run->add_sweep_ids("sw-1");
  run->set_architecture("full");
  run->set_scale("S4");
  run->set_non_embedding_params(1000000);
  run->set_tokens(20000000);
  run->set_state(v1::RUN_STATE_PREDICTED);
  run->set_phase(v1::RUN_PHASE_PREDICTED);
  v1::RunPrediction* p = run->add_predictions();
  p->set_sweep_id("sw-1");
  p->set_generation(4);
  p->set_target("loss");
  p->set_predicted(2.31);
  p->set_lower(2.30);
  p->set_upper(2.32);
  Result r = Hlab({"runs", "--state", "predicted", "--format", "csv"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("0123456789abcdef,sw-1,full,S4,0,1000000,20000000,20,"
                       "predicted,0,,,,2.31,2.3,2.32,,4,,,,\n"),
            std::string::npos)
      << r.out;
  const auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.list_runs.size(), 1u);
  ASSERT_EQ(recorded.list_runs[0].states_size(), 1);
  EXPECT_EQ(recorded.list_runs[0].states(0), v1::RUN_STATE_PREDICTED);

  v1::Sweep* sweep = fake_.get_sweep.mutable_sweep();
  sweep->set_sweep_id("sw-1");
  sweep->set_name("demo");
  sweep->set_state(v1::SWEEP_STATE_SUCCEEDED);
  sweep->set_runs_total(2);
  sweep->set_runs_succeeded(1);
  sweep->set_runs_stopped(1);
  r = Hlab({"status", "sw-1"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("0 failed, 0 cancelled, 1 predicted (stopped early)\n"),
            std::string::npos)
      << r.out;
}

// Runs of two architectures whose val loss follows known laws exactly.
TEST_F(CliClientTest, FitSweepFitsEachArchitectureFromTheCoordinator) {
  struct Law {
    const char* arch;
    double E, A, alpha, B, beta;
  };
  for (const Law& law : {Law{"gdn", 1.7, 400, 0.34, 410, 0.28},
                         Law{"full", 1.9, 300, 0.30, 500, 0.30}}) {
    for (double n : {1e6, 2e6, 4e6, 8e6}) {
      for (double ratio : {5.0, 10.0, 20.0, 40.0}) {
        v1::Run* run = fake_.list_runs.add_runs();
        run->set_architecture(law.arch);
        run->set_non_embedding_params(static_cast<int64_t>(n));
        run->set_tokens(static_cast<int64_t>(n * ratio));
        run->set_state(v1::RUN_STATE_SUCCEEDED);
        const double d = static_cast<double>(run->tokens());
        run->set_final_val_loss(law.E + law.A / std::pow(n, law.alpha) +
                                law.B / std::pow(d, law.beta));
      }
    }
  }
  fake_.list_runs.add_runs()->set_architecture("gdn");  // no loss: skipped
  const Result r = Hlab({"fit", "--sweep", "sw-1", "--bootstrap", "0",
                         "--threads", "2", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("gdn") && j.contains("full")) << r.out;
  EXPECT_NEAR(j["gdn"]["E"].get<double>(), 1.7, 0.05);
  EXPECT_NEAR(j["gdn"]["alpha"].get<double>(), 0.34, 0.02);
  EXPECT_NEAR(j["full"]["E"].get<double>(), 1.9, 0.05);
  EXPECT_NEAR(j["full"]["beta"].get<double>(), 0.30, 0.02);
  const auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.list_runs.size(), 1u);
  EXPECT_EQ(recorded.list_runs[0].sweep(), "sw-1");
  ASSERT_EQ(recorded.list_runs[0].states_size(), 1);
  EXPECT_EQ(recorded.list_runs[0].states(0), v1::RUN_STATE_SUCCEEDED);

  const Result none = Hlab({"fit", "--sweep", "sw-1", "--target", "longppl"});
  EXPECT_EQ(none.code, kExitFailed);
  EXPECT_NE(none.err.find("has no succeeded runs with longppl"),
            std::string::npos)
      << none.err;
}

TEST_F(CliClientTest, FitDelegatesToTheFitter) {
  const char* shared = std::getenv("HLAB_SHARED_DIR");
  const std::string path =
      std::string(shared != nullptr
                      ? shared
                      : std::string(HLAB_SOURCE_DIR) + "/../shared") +
      "/data/scaling_law/chinchilla_fig4_points.csv";
  if (!std::ifstream(path).good()) {
    GTEST_SKIP() << path << " not found; set HLAB_SHARED_DIR";
  }
  std::ostringstream out, err;
  ASSERT_EQ(RunCli({"fit", "--chinchilla", path, "--bootstrap", "0",
                    "--threads", "2", "--json"},
                   out, err),
            kExitOk)
      << err.str();
  const nlohmann::json j = nlohmann::json::parse(out.str());
  for (const char* key : {"E", "A", "alpha", "B", "beta"}) {
    ASSERT_TRUE(j.contains(key)) << key;
  }
  // Epoch's replication: E ~ 1.82, alpha ~ 0.35, beta ~ 0.37.
  EXPECT_NEAR(j["E"].get<double>(), 1.82, 0.1);
  EXPECT_NEAR(j["alpha"].get<double>(), 0.35, 0.05);
  EXPECT_NEAR(j["beta"].get<double>(), 0.37, 0.05);

  std::ostringstream db_out, db_err;
  EXPECT_EQ(RunCli({"fit", "--db", "/nonexistent/hlab.db"}, db_out, db_err),
            kExitFailed);
  EXPECT_NE(db_err.str().find("cannot read /nonexistent/hlab.db"),
            std::string::npos)
      << db_err.str();
}

// An EvaluateRun answer: task `state` of run 0123456789abcdef at step 40.
v1::EvaluateRunResponse EvalAnswer(v1::TaskState state, bool created) {
  v1::EvaluateRunResponse r;
  r.set_created(created);
  r.set_checkpoint_path("/ckpt/step-40.ckpt");
  v1::Task* t = r.mutable_task();
  t->set_task_id("eval-abc");
  t->set_kind(v1::TASK_KIND_EVAL);
  t->set_eval_step(40);
  t->add_evals("val_loss");
  t->add_evals("niah");
  t->set_state(state);
  t->set_attempt(state == v1::TASK_STATE_LEASED ? 1 : 0);
  t->set_worker_id(state == v1::TASK_STATE_LEASED ? "w1" : "");
  return r;
}

TEST_F(CliClientTest, EvalWaitsForTheTaskThenPrintsItsResults) {
  fake_.evaluate_run = {EvalAnswer(v1::TASK_STATE_PENDING, true),
                        EvalAnswer(v1::TASK_STATE_LEASED, false),
                        EvalAnswer(v1::TASK_STATE_SUCCEEDED, false)};
  for (const char* c : {"metric", "step", "value", "details"}) {
    fake_.query.add_columns(c);
  }
  auto add = [&](const std::string& metric, double value,
                 const std::string& details) {
    v1::QueryRow* row = fake_.query.add_rows();
    row->add_values()->set_text_value(metric);
    row->add_values()->set_int_value(40);
    row->add_values()->set_double_value(value);
    row->add_values()->set_text_value(details);
  };
  add("log_longppl", 1.5, "{}");  // another evaluation's: not printed
  add("niah_acc", 0.75, R"({"cells":[]})");
  add("niah_acc/single", 0.5, "{}");
  add("val_loss", 2.25, R"({"tokens":4096})");
  const Result r = Hlab({"eval", "0123456789abcdef", "--evals", "niah,val_loss",
                         "--step", "40", "--poll", "0.01", "--format", "csv"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "metric,step,value,details\n"
            "niah_acc,40,0.75,\"{\"\"cells\"\":[]}\"\n"
            "niah_acc/single,40,0.5,{}\n"
            "val_loss,40,2.25,\"{\"\"tokens\"\":4096}\"\n");
  // Progress on stderr: what is evaluated, then each state once.
  EXPECT_NE(r.err.find("new evaluation of run 0123456789abcdef at step 40 "
                       "(val_loss,niah on /ckpt/step-40.ckpt): task eval-abc"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("eval-abc: PENDING (waiting for a worker)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("eval-abc: LEASED (attempt 1 on w1)"), std::string::npos)
      << r.err;
  const auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.evaluates.size(), 3u);  // the same request, polled
  for (const auto& e : recorded.evaluates) {
    EXPECT_EQ(e.run_id(), "0123456789abcdef");
    ASSERT_EQ(e.evals_size(), 2);
    EXPECT_EQ(e.evals(0), "niah");
    EXPECT_EQ(e.evals(1), "val_loss");
    EXPECT_EQ(e.step(), 40);
  }
  // Only the first call asks to retry a failed on-demand evaluation.
  EXPECT_TRUE(recorded.evaluates[0].retry_failed());
  EXPECT_FALSE(recorded.evaluates[1].retry_failed());
  EXPECT_FALSE(recorded.evaluates[2].retry_failed());
  ASSERT_EQ(recorded.queries.size(), 1u);
  EXPECT_NE(recorded.queries[0].sql().find(
                "run_id = '0123456789abcdef' AND step = 40"),
            std::string::npos)
      << recorded.queries[0].sql();
}

TEST_F(CliClientTest, EvalSendsItsMultipleChoiceTasksAndPrintsOnlyTheirs) {
  v1::EvaluateRunResponse done = EvalAnswer(v1::TASK_STATE_SUCCEEDED, true);
  done.mutable_task()->clear_evals();
  done.mutable_task()->add_evals("multiple_choice");
  fake_.evaluate_run = {done};
  for (const char* c : {"metric", "step", "value", "details"}) {
    fake_.query.add_columns(c);
  }
  for (const char* metric :
       {"mc_acc/arc", "mc_acc/sweeps_own", "mc_acc_norm/arc", "val_loss"}) {
    v1::QueryRow* row = fake_.query.add_rows();
    row->add_values()->set_text_value(metric);
    row->add_values()->set_int_value(40);
    row->add_values()->set_double_value(0.5);
    row->add_values()->set_text_value("{}");
  }
  const Result r =
      Hlab({"eval", "0123456789abcdef", "--mc-tasks", "data/arc.jsonl",
            "--mc-fewshot", "3", "--mc-limit", "50", "--format", "csv"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  // Another task's and another evaluation's rows are not printed.
  EXPECT_EQ(r.out,
            "metric,step,value,details\n"
            "mc_acc/arc,40,0.5,{}\n"
            "mc_acc_norm/arc,40,0.5,{}\n");
  const auto recorded = fake_.recorded();
  ASSERT_EQ(recorded.evaluates.size(), 1u);
  const v1::EvaluateRunRequest& e = recorded.evaluates[0];
  EXPECT_EQ(e.evals_size(), 0);  // the coordinator runs multiple_choice
  ASSERT_EQ(e.multiple_choice().tasks_size(), 1);
  const v1::MultipleChoiceTask& task = e.multiple_choice().tasks(0);
  const std::string absolute =
      (std::filesystem::current_path() / "data/arc.jsonl").string();
  EXPECT_EQ(task.file(), absolute);
  EXPECT_EQ(task.fewshot_file(), absolute);
  EXPECT_EQ(task.num_fewshot(), 3);
  EXPECT_EQ(task.limit(), 50);

  // The few-shot and limit flags need task files; nothing is asked.
  const Result alone = Hlab({"eval", "0123456789abcdef", "--mc-limit", "5"});
  EXPECT_EQ(alone.code, kExitUsage);
  EXPECT_NE(alone.err.find("--mc-tasks FILE"), std::string::npos) << alone.err;
  const Result empty = Hlab({"eval", "0123456789abcdef", "--mc-tasks", ","});
  EXPECT_EQ(empty.code, kExitUsage);
  EXPECT_NE(empty.err.find("--mc-tasks: names no file"), std::string::npos)
      << empty.err;
  EXPECT_EQ(fake_.recorded().evaluates.size(), 1u);
}

TEST_F(CliClientTest, EvalNoWaitReturnsAtOnce) {
  fake_.evaluate_run = {EvalAnswer(v1::TASK_STATE_PENDING, true)};
  const Result r = Hlab({"eval", "0123456789abcdef", "--no-wait"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "task eval-abc is PENDING; run the same `hlab eval` again to wait "
            "for its results\n");
  EXPECT_EQ(fake_.recorded().evaluates.size(), 1u);
  EXPECT_TRUE(fake_.recorded().queries.empty());
}

TEST_F(CliClientTest, EvalErrorsAreOneLineSayingWhatToDo) {
  v1::EvaluateRunResponse failed = EvalAnswer(v1::TASK_STATE_FAILED, false);
  failed.mutable_task()->set_error("exit code 2: checkpoint missing");
  failed.set_on_demand(true);
  fake_.evaluate_run = {failed};
  Result r = Hlab({"eval", "0123456789abcdef"});
  EXPECT_EQ(r.code, kExitFailed);
  // The line saying what is evaluated, then the error as the last line: an
  // on-demand evaluation's failure is not the run's, and asking again
  // retries it.
  const std::string failure =
      "hlab eval: error: evaluation eval-abc of run 0123456789abcdef FAILED: "
      "exit code 2: checkpoint missing; the run itself is unchanged. Fix the "
      "cause, then run the same `hlab eval` again to retry it\n";
  ASSERT_GE(r.err.size(), failure.size()) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - failure.size()), failure) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  // A failed EVAL task of the sweep's plan failed the run: resume it.
  failed.set_on_demand(false);
  fake_.evaluate_run = {failed};
  r = Hlab({"eval", "0123456789abcdef"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_NE(r.err.find("evaluation of the run's sweep, so the run failed "
                       "with it. Fix the cause, then `hlab resume --run "
                       "0123456789abcdef` retries it\n"),
            std::string::npos)
      << r.err;

  fake_.evaluate_status =
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                   "run 0123456789abcdef is RUNNING: its training has not "
                   "finished; evaluate it once it has succeeded (hlab watch)");
  r = Hlab({"eval", "0123456789abcdef"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_NE(r.err.find("its training has not finished"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  r = Hlab({"eval", "not-a-run"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("is not a run id"), std::string::npos) << r.err;
  r = Hlab({"eval", "0123456789abcdef", "--step", "x"});
  EXPECT_EQ(r.code, kExitUsage);
}

}  // namespace
}  // namespace hlab::cli
