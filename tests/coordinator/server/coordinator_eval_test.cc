// Evaluation orchestration against an in-process coordinator: EVAL tasks
// leased to workers with hlab-eval's task file (checkpoint, resolved LongPPL
// reference), their results and details stored from Complete, a reference
// run that has not finished failing the task for good, submit-time checks
// of evaluation.longppl.reference.run_id, and EvaluateRun (`hlab eval`).
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "coordinator/server/coordinator.h"
#include "coordinator/sweep/expand.h"
#include "hlab/v1/client_service.grpc.pb.h"
#include "hlab/v1/worker_service.grpc.pb.h"
#include "tests/coordinator/server/coordinator_test_util.h"

namespace hlab::coordinator {
namespace {

using nlohmann::json;
using testing::FakeClock;
using testing::TempDir;

// TinySpecYaml with evaluation settings `evaluation` (a YAML flow map).
std::string SpecWith(const std::string& name, const std::string& budgets,
                     const std::string& evaluation) {
  std::string yaml = testing::TinySpecYaml(name, budgets);
  const std::string off = "evaluation: {validation_loss: {enabled: false}}";
  yaml.replace(yaml.find(off), off.size(), "evaluation: " + evaluation);
  return yaml;
}

constexpr char kAllEvals[] =
    "{validation_loss: {enabled: true}, longppl: {enabled: true}, niah: "
    "{enabled: true, context_lengths: [128], samples: 4}}";

class EvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator_ = testing::StartOrDie(
        testing::TestOptions(dir_.File("hlab.db"), &clock_));
    ASSERT_NE(coordinator_, nullptr);
    auto channel = testing::Connect(*coordinator_);
    client_ = hlab::v1::ClientService::NewStub(channel);
    worker_ = hlab::v1::WorkerService::NewStub(channel);
    grpc::ClientContext ctx;
    hlab::v1::RegisterRequest request;
    request.set_worker_id("w1");
    *request.add_devices() = testing::Cpu();
    hlab::v1::RegisterResponse response;
    ASSERT_TRUE(worker_->Register(&ctx, request, &response).ok());
  }

  grpc::Status Submit(const std::string& yaml,
                      hlab::v1::SubmitSweepResponse* response) {
    grpc::ClientContext ctx;
    hlab::v1::SubmitSweepRequest request;
    *request.mutable_spec() = testing::Spec(yaml);
    return client_->SubmitSweep(&ctx, request, response);
  }

  hlab::v1::LeaseResponse Lease() {
    grpc::ClientContext ctx;
    hlab::v1::LeaseRequest request;
    request.set_worker_id("w1");
    *request.add_free_devices() = testing::Cpu();
    hlab::v1::LeaseResponse response;
    EXPECT_TRUE(worker_->Lease(&ctx, request, &response).ok());
    return response;
  }

  // Trains the leased TRAIN task: a checkpoint at its last step, Complete.
  // Returns the checkpoint path.
  std::string Train(const hlab::v1::Task& task) {
    EXPECT_EQ(task.kind(), hlab::v1::TASK_KIND_TRAIN);
    const std::string path = "/ckpt/" + task.run_ids(0) + "/step-" +
                             std::to_string(task.end_step()) + ".ckpt";
    {
      grpc::ClientContext ctx;
      hlab::v1::ReportCheckpointRequest request;
      request.set_task_id(task.task_id());
      request.set_attempt(task.attempt());
      request.set_worker_id("w1");
      request.mutable_checkpoint()->set_run_id(task.run_ids(0));
      request.mutable_checkpoint()->set_step(task.end_step());
      request.mutable_checkpoint()->set_path(path);
      request.mutable_checkpoint()->set_sha256("ab");
      hlab::v1::ReportCheckpointResponse response;
      EXPECT_TRUE(worker_->ReportCheckpoint(&ctx, request, &response).ok());
    }
    EXPECT_TRUE(Complete(task, {}).ok());
    return path;
  }

  grpc::Status Complete(const hlab::v1::Task& task,
                        const std::vector<hlab::v1::MetricPoint>& results) {
    grpc::ClientContext ctx;
    hlab::v1::CompleteRequest request;
    request.set_task_id(task.task_id());
    request.set_attempt(task.attempt());
    request.set_worker_id("w1");
    for (const auto& r : results) *request.add_results() = r;
    hlab::v1::CompleteResponse response;
    return worker_->Complete(&ctx, request, &response);
  }

  grpc::Status Evaluate(const std::string& run_id,
                        const std::vector<std::string>& evals, int64_t step,
                        hlab::v1::EvaluateRunResponse* response,
                        bool retry_failed = false) {
    grpc::ClientContext ctx;
    hlab::v1::EvaluateRunRequest request;
    request.set_run_id(run_id);
    for (const auto& e : evals) request.add_evals(e);
    request.set_step(step);
    request.set_retry_failed(retry_failed);
    return client_->EvaluateRun(&ctx, request, response);
  }

  grpc::Status Evaluate(const hlab::v1::EvaluateRunRequest& request,
                        hlab::v1::EvaluateRunResponse* response) {
    grpc::ClientContext ctx;
    return client_->EvaluateRun(&ctx, request, response);
  }

  grpc::Status Fail(const hlab::v1::Task& task, const std::string& error,
                    bool retryable) {
    grpc::ClientContext ctx;
    hlab::v1::FailRequest request;
    request.set_task_id(task.task_id());
    request.set_attempt(task.attempt());
    request.set_worker_id("w1");
    request.set_error(error);
    request.set_retryable(retryable);
    hlab::v1::FailResponse response;
    return worker_->Fail(&ctx, request, &response);
  }

  hlab::v1::QueryResponse Query(const std::string& sql) {
    grpc::ClientContext ctx;
    hlab::v1::QueryRequest request;
    request.set_sql(sql);
    hlab::v1::QueryResponse response;
    grpc::Status status = client_->Query(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  int64_t Count(const std::string& table) {
    hlab::v1::QueryResponse r = Query("SELECT count(*) FROM " + table);
    return r.rows_size() == 1 ? r.rows(0).values(0).int_value() : -1;
  }

  store::Run Run(const std::string& id) {
    auto run = coordinator_->store()->GetRun(id);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *run : store::Run();
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<hlab::v1::ClientService::Stub> client_;
  std::unique_ptr<hlab::v1::WorkerService::Stub> worker_;
};

TEST_F(EvalTest, WorkersGetTheEvaluatorTaskAndResultsLandInEvals) {
  hlab::v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(SpecWith("evals", "[5]", kAllEvals), &sweep).ok());
  const hlab::v1::LeaseResponse train = Lease();
  ASSERT_TRUE(train.has_task());
  const std::string run_id = train.task().run_ids(0);
  const std::string checkpoint = Train(train.task());

  // The EVAL task goes to the worker like a training task.
  const hlab::v1::LeaseResponse lease = Lease();
  ASSERT_TRUE(lease.has_task());
  const hlab::v1::Task& eval = lease.task();
  EXPECT_EQ(eval.kind(), hlab::v1::TASK_KIND_EVAL);
  EXPECT_EQ(eval.eval_step(), train.task().end_step());
  const json file = json::parse(eval.task_json());
  EXPECT_EQ(file["kind"], "eval");
  EXPECT_EQ(file["task_id"], eval.task_id());
  EXPECT_EQ(file["run_id"], run_id);
  EXPECT_EQ(file["step"], train.task().end_step());
  EXPECT_EQ(file["checkpoint"], checkpoint);
  EXPECT_EQ(file["config"]["seq_len"], 128);
  EXPECT_EQ(file["cache_dir"], "");
  EXPECT_EQ(file["threads"], 0);
  EXPECT_EQ(file["allow_extrapolation"], false);
  EXPECT_EQ(file["evals"]["val_loss"]["tokens"], 0);
  EXPECT_EQ(file["evals"]["niah"]["samples"], 4);
  EXPECT_EQ(file["evals"]["longppl"]["trunc_len"], 32);
  // The only full-attention run is its own reference, resolved to its
  // newest checkpoint (its training finished; the run is RUNNING).
  const json& ref = file["evals"]["longppl"]["reference"];
  EXPECT_EQ(ref["run_id"], run_id);
  EXPECT_EQ(ref["checkpoint"], checkpoint);
  EXPECT_EQ(Run(run_id).state, store::RunState::kRunning);

  std::vector<hlab::v1::MetricPoint> results(3);
  results[0].set_run_id(run_id);
  results[0].set_name("val_loss");
  results[0].set_value(2.5);
  results[0].set_details_json(R"({"tokens":4096,"source":"synthetic"})");
  results[1].set_run_id(run_id);
  results[1].set_name("log_longppl");
  results[1].set_step(eval.eval_step());
  results[1].set_value(1.25);
  results[1].set_details_json(R"({"key_tokens":17})");
  results[2].set_run_id(run_id);
  results[2].set_name("niah_acc/single");
  results[2].set_value(0.5);
  // Details that are not a JSON object are refused, and nothing is stored.
  std::vector<hlab::v1::MetricPoint> bad = results;
  bad[2].set_details_json("[1, 2]");
  EXPECT_EQ(Complete(eval, bad).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Count("evals"), 0);
  ASSERT_TRUE(Complete(eval, results).ok());

  const hlab::v1::QueryResponse rows =
      Query("SELECT metric, step, value, details FROM evals ORDER BY metric");
  ASSERT_EQ(rows.rows_size(), 3);
  auto text = [&](int row, int col) {
    return rows.rows(row).values(col).text_value();
  };
  EXPECT_EQ(text(0, 0), "log_longppl");
  EXPECT_EQ(json::parse(text(0, 3))["key_tokens"], 17);
  EXPECT_EQ(text(1, 0), "niah_acc/single");
  EXPECT_EQ(text(1, 3), "{}");
  EXPECT_EQ(text(2, 0), "val_loss");
  EXPECT_EQ(rows.rows(2).values(1).int_value(), eval.eval_step());
  EXPECT_DOUBLE_EQ(rows.rows(2).values(2).double_value(), 2.5);
  EXPECT_EQ(json::parse(text(2, 3))["source"], "synthetic");
  EXPECT_EQ(Run(run_id).state, store::RunState::kSucceeded);
  // ListRuns (hlab runs, hlab fit --target longppl over the RPC) carries
  // the results.
  {
    grpc::ClientContext ctx;
    hlab::v1::ListRunsResponse listed;
    ASSERT_TRUE(
        client_->ListRuns(&ctx, hlab::v1::ListRunsRequest(), &listed).ok());
    ASSERT_EQ(listed.runs_size(), 1);
    ASSERT_EQ(listed.runs(0).run_id(), run_id);
    EXPECT_DOUBLE_EQ(listed.runs(0).final_val_loss(), 2.5);
    ASSERT_TRUE(listed.runs(0).has_final_log_longppl());
    EXPECT_DOUBLE_EQ(listed.runs(0).final_log_longppl(), 1.25);
  }

  // `hlab eval` with the sweep's settings is the same task.
  hlab::v1::EvaluateRunResponse again;
  ASSERT_TRUE(Evaluate(run_id, {}, 0, &again).ok());
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.task().task_id(), eval.task_id());
  EXPECT_EQ(again.task().state(), hlab::v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(again.checkpoint_path(), checkpoint);
}

TEST_F(EvalTest, AReferenceRunThatHasNotFinishedFailsTheEvalForGood) {
  hlab::v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(SpecWith("ref", "[5, 10]", kAllEvals), &sweep).ok());
  ASSERT_EQ(sweep.runs_size(), 2);
  // The cheaper run trains first; the other is still PENDING.
  const hlab::v1::LeaseResponse train = Lease();
  ASSERT_TRUE(train.has_task());
  const std::string run_id = train.task().run_ids(0);
  const std::string other = sweep.runs(0).run_id() == run_id
                                ? sweep.runs(1).run_id()
                                : sweep.runs(0).run_id();
  Train(train.task());
  // An EVAL of it measured against the unfinished run (as one planned
  // against a run that was resumed after submission would be).
  store::TaskSpec task;
  task.id = "eval-against-unfinished";
  task.sweep_id = 1;
  task.run_id = run_id;
  task.kind = store::TaskKind::kEval;
  task.priority = 100;
  task.payload = json{
      {"draft",
       {{"kind", "eval"},
        {"run_id", run_id},
        {"step", train.task().end_step()},
        {"config",
         json::parse(coordinator_->store()->GetRun(run_id)->spec.config)},
        {"evals", {{"longppl", {{"reference", {{"run_id", other}}}}}}}}},
      {"eval_step", train.task().end_step()},
      {"run_ids",
       {run_id}}}.dump();
  ASSERT_TRUE(coordinator_->store()->AddTasks({task}, clock_.Now()).ok());

  const hlab::v1::LeaseResponse next = Lease();
  ASSERT_TRUE(next.has_task());
  EXPECT_NE(next.task().task_id(), task.id);  // never handed out
  auto failed = coordinator_->store()->GetTask(task.id);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state, store::TaskState::kFailed);
  EXPECT_EQ(failed->attempt, 1);  // no retry
  const std::string& why = failed->failure_reason;
  EXPECT_NE(why.find("LongPPL reference run " + other + " is PENDING"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("hlab resume --run"), std::string::npos) << why;
  EXPECT_EQ(Run(run_id).state, store::RunState::kFailed);
}

TEST_F(EvalTest, SubmitChecksTheReferenceRunAndChangesNothingWhenRefused) {
  auto with_reference = [](const std::string& run_id) {
    return SpecWith(
        "uses-ref", "[5]",
        "{longppl: {enabled: true, reference: {run_id: '" + run_id + "'}}}");
  };
  hlab::v1::SubmitSweepResponse response;
  grpc::Status unknown = Submit(with_reference("00000000deadbeef"), &response);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unknown.error_message().find(
                "evaluation.longppl.reference.run_id: run 00000000deadbeef is "
                "not in the database"),
            std::string::npos)
      << unknown.error_message();
  EXPECT_EQ(Count("sweeps"), 0);
  EXPECT_EQ(Count("runs"), 0);
  EXPECT_EQ(Count("tasks"), 0);

  hlab::v1::SubmitSweepResponse reference;
  ASSERT_TRUE(Submit(testing::TinySpecYaml("reference"), &reference).ok());
  const std::string ref_id = reference.runs(0).run_id();
  grpc::Status unfinished = Submit(with_reference(ref_id), &response);
  EXPECT_EQ(unfinished.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(
      unfinished.error_message().find(
          "evaluation.longppl.reference.run_id: run " + ref_id + " is PENDING"),
      std::string::npos)
      << unfinished.error_message();
  EXPECT_NE(unfinished.error_message().find("submit again"), std::string::npos);
  EXPECT_EQ(Count("sweeps"), 1);
  EXPECT_EQ(Count("runs"), 1);
  EXPECT_EQ(Count("tasks"), 1);

  const hlab::v1::LeaseResponse train = Lease();
  ASSERT_TRUE(train.has_task());
  const std::string checkpoint = Train(train.task());
  ASSERT_EQ(Run(ref_id).state, store::RunState::kSucceeded);
  ASSERT_TRUE(Submit(with_reference(ref_id), &response).ok());
  EXPECT_EQ(Count("sweeps"), 2);
}

TEST_F(EvalTest, EvaluateRunAddsOneTaskPerRunStepAndEvals) {
  hlab::v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(
      Submit(testing::TinySpecYaml("ondemand", "[5, 10]"), &sweep).ok());
  const hlab::v1::LeaseResponse train = Lease();
  ASSERT_TRUE(train.has_task());
  const std::string run_id = train.task().run_ids(0);
  const std::string other = sweep.runs(0).run_id() == run_id
                                ? sweep.runs(1).run_id()
                                : sweep.runs(0).run_id();
  const std::string checkpoint = Train(train.task());
  ASSERT_EQ(Run(run_id).state, store::RunState::kSucceeded);
  const int64_t tasks_before = Count("tasks");

  hlab::v1::EvaluateRunResponse r;
  // The sweep evaluates nothing: say what to list.
  grpc::Status none = Evaluate(run_id, {}, 0, &r);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(none.error_message().find("--evals"), std::string::npos);
  EXPECT_EQ(Evaluate(run_id, {"perplexity"}, 0, &r).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // LongPPL without a reference in the sweep.
  EXPECT_EQ(Evaluate(run_id, {"longppl"}, 0, &r).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Multiple choice without tasks in the sweep: where they go.
  grpc::Status no_tasks = Evaluate(run_id, {"multiple_choice"}, 0, &r);
  EXPECT_EQ(no_tasks.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(no_tasks.error_message().find("evaluation.multiple_choice.tasks"),
            std::string::npos)
      << no_tasks.error_message();
  grpc::Status unknown = Evaluate("00000000deadbeef", {"val_loss"}, 0, &r);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.error_message().find("no such run"), std::string::npos);
  grpc::Status pending = Evaluate(other, {"val_loss"}, 0, &r);
  EXPECT_EQ(pending.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(pending.error_message().find("is PENDING"), std::string::npos)
      << pending.error_message();
  grpc::Status no_step = Evaluate(run_id, {"val_loss"}, 7, &r);
  EXPECT_EQ(no_step.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(no_step.error_message().find(
                "no checkpoint at step 7 (checkpoints at steps " +
                std::to_string(train.task().end_step()) + ")"),
            std::string::npos)
      << no_step.error_message();
  EXPECT_EQ(Count("tasks"), tasks_before);

  hlab::v1::EvaluateRunResponse first;
  ASSERT_TRUE(Evaluate(run_id, {"niah", "val_loss"}, 0, &first).ok());
  EXPECT_TRUE(first.created());
  EXPECT_EQ(first.checkpoint_path(), checkpoint);
  EXPECT_EQ(first.task().kind(), hlab::v1::TASK_KIND_EVAL);
  EXPECT_EQ(first.task().eval_step(), train.task().end_step());
  ASSERT_EQ(first.task().evals_size(), 2);
  EXPECT_EQ(first.task().evals(0), "val_loss");
  EXPECT_EQ(first.task().evals(1), "niah");
  EXPECT_EQ(Count("tasks"), tasks_before + 1);
  // Same run, step (explicit now) and evals in another order: same task.
  hlab::v1::EvaluateRunResponse second;
  ASSERT_TRUE(
      Evaluate(run_id, {"val_loss", "niah"}, train.task().end_step(), &second)
          .ok());
  EXPECT_FALSE(second.created());
  EXPECT_EQ(second.task().task_id(), first.task().task_id());
  EXPECT_EQ(Count("tasks"), tasks_before + 1);

  // A worker runs it; the niah defaults apply (the sweep does not set them).
  const hlab::v1::LeaseResponse lease = Lease();
  ASSERT_TRUE(lease.has_task());
  ASSERT_EQ(lease.task().task_id(), first.task().task_id());
  const json file = json::parse(lease.task().task_json());
  EXPECT_EQ(file["checkpoint"], checkpoint);
  EXPECT_EQ(file["evals"]["niah"]["samples"], 20);
  EXPECT_FALSE(file["evals"].contains("longppl"));
  hlab::v1::MetricPoint result;
  result.set_run_id(run_id);
  result.set_name("val_loss");
  result.set_value(3.5);
  ASSERT_TRUE(Complete(lease.task(), {result}).ok());
  EXPECT_EQ(Run(run_id).state, store::RunState::kSucceeded);
  hlab::v1::EvaluateRunResponse done;
  ASSERT_TRUE(Evaluate(run_id, {"val_loss", "niah"}, 0, &done).ok());
  EXPECT_EQ(done.task().state(), hlab::v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(Count("evals"), 1);
}

TEST_F(EvalTest, EvaluateRunScoresTheMultipleChoiceTasksItIsGiven) {
  hlab::v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(testing::TinySpecYaml("mc", "[5]"), &sweep).ok());
  const hlab::v1::LeaseResponse train = Lease();
  ASSERT_TRUE(train.has_task());
  const std::string run_id = train.task().run_ids(0);
  Train(train.task());
  const int64_t tasks_before = Count("tasks");

  hlab::v1::EvaluateRunRequest request;
  request.set_run_id(run_id);
  hlab::v1::MultipleChoiceTask* task =
      request.mutable_multiple_choice()->add_tasks();
  task->set_file("/data/arc_easy.jsonl");
  task->set_fewshot_file("/data/arc_easy.jsonl");
  task->set_num_fewshot(2);
  hlab::v1::EvaluateRunResponse r;
  // Refused, naming the field, and nothing added: tasks with evals that
  // leave multiple_choice out; a task without a file; few-shot without a
  // file to draw from.
  hlab::v1::EvaluateRunRequest other_evals = request;
  other_evals.add_evals("val_loss");
  grpc::Status mixed = Evaluate(other_evals, &r);
  EXPECT_EQ(mixed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(mixed.error_message().find("does not name multiple_choice"),
            std::string::npos)
      << mixed.error_message();
  hlab::v1::EvaluateRunRequest no_file = request;
  no_file.mutable_multiple_choice()->add_tasks();
  grpc::Status missing = Evaluate(no_file, &r);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(missing.error_message().find("multiple_choice.tasks[1].file"),
            std::string::npos)
      << missing.error_message();
  hlab::v1::EvaluateRunRequest no_examples = request;
  no_examples.mutable_multiple_choice()->mutable_tasks(0)->clear_fewshot_file();
  grpc::Status examples = Evaluate(no_examples, &r);
  EXPECT_EQ(examples.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(
      examples.error_message().find("multiple_choice.tasks[0].fewshot_file"),
      std::string::npos)
      << examples.error_message();
  EXPECT_EQ(Count("tasks"), tasks_before);

  // Without evals: multiple_choice alone, with the request's tasks (the
  // sweep names none), the defaults applied.
  hlab::v1::EvaluateRunResponse first;
  ASSERT_TRUE(Evaluate(request, &first).ok());
  EXPECT_TRUE(first.created());
  ASSERT_EQ(first.task().evals_size(), 1);
  EXPECT_EQ(first.task().evals(0), "multiple_choice");
  hlab::v1::EvaluateRunResponse again;
  ASSERT_TRUE(Evaluate(request, &again).ok());
  EXPECT_FALSE(again.created());
  EXPECT_EQ(again.task().task_id(), first.task().task_id());
  // Another file is another evaluation.
  hlab::v1::EvaluateRunRequest piqa = request;
  piqa.mutable_multiple_choice()->mutable_tasks(0)->set_file(
      "/data/piqa.jsonl");
  hlab::v1::EvaluateRunResponse second;
  ASSERT_TRUE(Evaluate(piqa, &second).ok());
  EXPECT_TRUE(second.created());
  EXPECT_NE(second.task().task_id(), first.task().task_id());
  EXPECT_EQ(Count("tasks"), tasks_before + 2);

  const hlab::v1::LeaseResponse lease = Lease();
  ASSERT_TRUE(lease.has_task());
  const bool arc = lease.task().task_id() == first.task().task_id();
  ASSERT_TRUE(arc || lease.task().task_id() == second.task().task_id());
  const json file = json::parse(lease.task().task_json());
  const json& mc = file["evals"]["multiple_choice"];
  ASSERT_EQ(mc["tasks"].size(), 1u) << file.dump();
  EXPECT_EQ(mc["tasks"][0]["file"],
            arc ? "/data/arc_easy.jsonl" : "/data/piqa.jsonl");
  EXPECT_EQ(mc["tasks"][0]["fewshot_file"], "/data/arc_easy.jsonl");
  EXPECT_EQ(mc["tasks"][0]["num_fewshot"], 2);
  EXPECT_EQ(mc["seed"], 1234);
  EXPECT_FALSE(file["evals"].contains("val_loss"));
}

TEST_F(EvalTest, AFailedOnDemandEvaluationLeavesTheRunAsItWas) {
  hlab::v1::SubmitSweepResponse sweep;
  ASSERT_TRUE(Submit(testing::TinySpecYaml("fails", "[5]"), &sweep).ok());
  const hlab::v1::LeaseResponse train = Lease();
  ASSERT_TRUE(train.has_task());
  const std::string run_id = train.task().run_ids(0);
  Train(train.task());
  ASSERT_EQ(Run(run_id).state, store::RunState::kSucceeded);
  const int64_t events_before = Count("events");

  hlab::v1::EvaluateRunResponse asked;
  ASSERT_TRUE(Evaluate(run_id, {"val_loss"}, 0, &asked, true).ok());
  EXPECT_TRUE(asked.created());
  EXPECT_TRUE(asked.on_demand());
  // Waiting for a worker does not make the finished run RUNNING again.
  EXPECT_EQ(Run(run_id).state, store::RunState::kSucceeded);

  // Every attempt fails: a retryable error until max_attempts, then for
  // good; the sweep's retry budget is not spent on it.
  const int max_attempts = Run(run_id).spec.max_attempts;
  ASSERT_GE(max_attempts, 2);
  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    clock_.Advance(absl::Hours(1));  // past any backoff
    const hlab::v1::LeaseResponse lease = Lease();
    ASSERT_TRUE(lease.has_task()) << "attempt " << attempt;
    ASSERT_EQ(lease.task().task_id(), asked.task().task_id());
    ASSERT_TRUE(Fail(lease.task(), "exit code 1: out of memory", true).ok());
    EXPECT_EQ(Run(run_id).state, store::RunState::kSucceeded);
  }
  const store::Run run = Run(run_id);
  EXPECT_EQ(run.state, store::RunState::kSucceeded);
  EXPECT_EQ(run.failure_reason, "");
  EXPECT_EQ(run.retries, 0);
  EXPECT_EQ(Count("evals"), 0);
  EXPECT_EQ(Query("SELECT retries FROM sweeps").rows(0).values(0).int_value(),
            0);
  // The failure is the task's, in its state and an event naming it.
  auto task = coordinator_->store()->GetTask(asked.task().task_id());
  ASSERT_TRUE(task.ok());
  EXPECT_EQ(task->state, store::TaskState::kFailed);
  EXPECT_NE(task->failure_reason.find("out of memory"), std::string::npos);
  const hlab::v1::QueryResponse failed_events = Query(
      "SELECT message FROM events WHERE kind = 'task_failed' AND run_id = '" +
      run_id + "'");
  ASSERT_EQ(failed_events.rows_size(), 1);
  EXPECT_NE(
      failed_events.rows(0).values(0).text_value().find(asked.task().task_id()),
      std::string::npos);
  // ... and never as the run's.
  const hlab::v1::QueryResponse run_events =
      Query("SELECT count(*) FROM events WHERE kind = 'run_state' AND seq > " +
            std::to_string(events_before));
  EXPECT_EQ(run_events.rows(0).values(0).int_value(), 0);

  // Polling sees the failure; asking again (retry_failed) reopens it.
  hlab::v1::EvaluateRunResponse polled;
  ASSERT_TRUE(Evaluate(run_id, {"val_loss"}, 0, &polled).ok());
  EXPECT_EQ(polled.task().state(), hlab::v1::TASK_STATE_FAILED);
  EXPECT_TRUE(polled.on_demand());
  hlab::v1::EvaluateRunResponse retried;
  ASSERT_TRUE(Evaluate(run_id, {"val_loss"}, 0, &retried, true).ok());
  EXPECT_FALSE(retried.created());
  EXPECT_EQ(retried.task().state(), hlab::v1::TASK_STATE_PENDING);
  const hlab::v1::LeaseResponse again = Lease();
  ASSERT_TRUE(again.has_task());
  EXPECT_EQ(again.task().task_id(), asked.task().task_id());
  hlab::v1::MetricPoint result;
  result.set_run_id(run_id);
  result.set_name("val_loss");
  result.set_value(3.25);
  ASSERT_TRUE(Complete(again.task(), {result}).ok());
  EXPECT_EQ(Run(run_id).state, store::RunState::kSucceeded);
  EXPECT_EQ(Count("evals"), 1);
}

}  // namespace
}  // namespace hlab::coordinator
