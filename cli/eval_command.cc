// `hlab eval RUN_ID`: evaluates a finished run on demand. ClientService
// EvaluateRun adds (or finds) the EVAL task; the command then polls it
// until it ends, printing its state changes on stderr, and prints the
// results from the evals table (docs/evaluation.md).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/client.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "cli/format.h"
#include "coordinator/sweep/expand.h"
#include "task/eval_task.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "eval";

bool IsHex(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c));
  });
}

std::string StateName(v1::TaskState state) {
  std::string name = v1::TaskState_Name(state);
  if (absl::StartsWith(name, "TASK_STATE_")) name = name.substr(11);
  return name;
}

// Whether an evals row's metric comes from one of `evals` (val_loss ->
// val_loss, longppl -> log_longppl, niah -> niah_acc and niah_acc/<kind>,
// receptive_field -> rf_*, gradient_profile -> grad_reach, probing ->
// probe_acc and probe_acc/l<k>, retrieval_heads -> retrieval_score and
// retrieval_mass, multiple_choice -> mc_acc/<task> and mc_acc_norm/<task>,
// ruler -> ruler_score and ruler_score/<task>).
// `mc_names`, when not empty, limits the multiple-choice metrics to those
// tasks (the ones given with --mc-tasks).
bool Wanted(const std::string& metric,
            const google::protobuf::RepeatedPtrField<std::string>& evals,
            const std::set<std::string>& mc_names) {
  for (const std::string& e : evals) {
    if (e == "val_loss" && metric == "val_loss") return true;
    if (e == "longppl" && metric == "log_longppl") return true;
    if (e == "niah" && absl::StartsWith(metric, "niah_acc")) return true;
    if (e == "receptive_field" && absl::StartsWith(metric, "rf_")) return true;
    if (e == "gradient_profile" && metric == "grad_reach") return true;
    if (e == "probing" && absl::StartsWith(metric, "probe_acc")) return true;
    if (e == "retrieval_heads" && absl::StartsWith(metric, "retrieval_")) {
      return true;
    }
    if (e == "multiple_choice" && (absl::StartsWith(metric, "mc_acc/") ||
                                   absl::StartsWith(metric, "mc_acc_norm/"))) {
      if (!mc_names.empty() &&
          mc_names.count(metric.substr(metric.find('/') + 1)) == 0) {
        continue;
      }
      return true;
    }
    if (e == "ruler" && absl::StartsWith(metric, "ruler_score")) return true;
  }
  return false;
}

// One line while waiting: the task's state, its attempt and worker.
std::string Progress(const v1::Task& task) {
  std::string line =
      absl::StrCat(task.task_id(), ": ", StateName(task.state()));
  if (task.state() == v1::TASK_STATE_LEASED) {
    absl::StrAppend(&line, " (attempt ", task.attempt(), " on ",
                    task.worker_id(), ")");
  } else if (task.state() == v1::TASK_STATE_PENDING) {
    absl::StrAppend(
        &line, " (waiting for a worker",
        task.error().empty() ? "" : "; last attempt: ", task.error(), ")");
  }
  return line;
}

// --mc-tasks FILE[,FILE...] (zero-shot unless --mc-fewshot K, whose
// examples come from each task's own file; --mc-limit N questions) as the
// request's multiple-choice tasks. Paths become absolute: the workers read
// them, and `hlab up`'s run where the CLI does.
absl::Status AddMultipleChoiceTasks(const ParsedArgs& args,
                                    v1::EvaluateRunRequest* request) {
  if (!args.Has("mc-tasks")) {
    if (args.Has("mc-fewshot") || args.Has("mc-limit")) {
      return absl::InvalidArgumentError(
          "--mc-fewshot and --mc-limit go with --mc-tasks FILE[,FILE...]");
    }
    return absl::OkStatus();
  }
  int64_t fewshot = 0, limit = 0;
  if (args.Has("mc-fewshot")) {
    absl::StatusOr<long long> k =
        ParseCount("mc-fewshot", args.Get("mc-fewshot"));
    if (!k.ok()) return k.status();
    fewshot = *k;
  }
  if (args.Has("mc-limit")) {
    absl::StatusOr<long long> n = ParseCount("mc-limit", args.Get("mc-limit"));
    if (!n.ok()) return n.status();
    limit = *n;
  }
  for (absl::string_view f :
       absl::StrSplit(args.Get("mc-tasks"), ',', absl::SkipEmpty())) {
    const std::string file(absl::StripAsciiWhitespace(f));
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::absolute(file, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mc-tasks: '", file, "': ", ec.message()));
    }
    v1::MultipleChoiceTask* task =
        request->mutable_multiple_choice()->add_tasks();
    task->set_file(path.lexically_normal().string());
    if (fewshot > 0) task->set_fewshot_file(task->file());
    task->set_num_fewshot(fewshot);
    task->set_limit(limit);
  }
  if (request->multiple_choice().tasks().empty()) {
    return absl::InvalidArgumentError(
        "--mc-tasks: names no file (FILE.jsonl[,FILE.jsonl...])");
  }
  request->mutable_multiple_choice()->set_enabled(true);
  return absl::OkStatus();
}

int Run(const std::vector<std::string>& argv, std::ostream& out,
        std::ostream& err) {
  absl::StatusOr<ParsedArgs> args =
      ParseArgs(argv, WithConnectionFlags({{"evals", true},
                                           {"step", true},
                                           {"no-wait", false},
                                           {"poll", true},
                                           {"format", true},
                                           {"mc-tasks", true},
                                           {"mc-fewshot", true},
                                           {"mc-limit", true}}));
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (args->positional().size() != 1) {
    return UsageError(err, kName, "expected one run id (see `hlab runs`)");
  }
  const std::string run_id = args->positional()[0];
  if (!IsHex(run_id)) {
    return UsageError(err, kName,
                      absl::StrCat("'", run_id,
                                   "' is not a run id (hex digits; see "
                                   "`hlab runs`)"));
  }
  absl::StatusOr<OutputFormat> format =
      ParseOutputFormat(args->Get("format", "table"));
  if (!format.ok()) return UsageError(err, kName, format.status().message());
  v1::EvaluateRunRequest request;
  request.set_run_id(run_id);
  if (args->Has("evals")) {
    for (absl::string_view e :
         absl::StrSplit(args->Get("evals"), ',', absl::SkipEmpty())) {
      request.add_evals(std::string(absl::StripAsciiWhitespace(e)));
    }
  }
  if (args->Has("step")) {
    absl::StatusOr<long long> step = ParseCount("step", args->Get("step"));
    if (!step.ok()) return UsageError(err, kName, step.status().message());
    request.set_step(*step);
  }
  if (absl::Status mc = AddMultipleChoiceTasks(*args, &request); !mc.ok()) {
    return UsageError(err, kName, mc.message());
  }
  std::set<std::string> mc_names;
  for (const task::MultipleChoiceTaskSpec& t :
       sweep::MultipleChoiceSettings(request.multiple_choice()).tasks) {
    mc_names.insert(task::MultipleChoiceTaskName(t));
  }
  double poll = 2;
  if (args->Has("poll") &&
      (!absl::SimpleAtod(args->Get("poll"), &poll) || poll <= 0)) {
    return UsageError(err, kName, "--poll must be a number of seconds > 0");
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ClientFromArgs(*args);
  if (!client.ok()) return ConnectionFailure(err, kName, client.status());
  const Client& c = **client;

  v1::EvaluateRunResponse response;
  // Asking again retries an on-demand evaluation that failed; polling not.
  request.set_retry_failed(true);
  grpc::Status s =
      c.Call(&v1::ClientService::Stub::EvaluateRun, request, &response);
  request.set_retry_failed(false);
  if (!s.ok()) return Failure(err, kName, c.ErrorMessage(s, "evaluate runs"));
  const std::string evals = absl::StrJoin(response.task().evals(), ",");
  err << "hlab eval: " << (response.created() ? "new evaluation" : "evaluation")
      << " of run " << run_id << " at step " << response.task().eval_step()
      << " (" << evals << " on " << response.checkpoint_path() << "): task "
      << response.task().task_id()
      << (response.created() ? "" : " (asked before)") << "\n";
  // The same request again finds the same task: poll it until it ends.
  v1::TaskState shown = v1::TASK_STATE_UNSPECIFIED;
  while (true) {
    const v1::Task& task = response.task();
    if (task.state() == v1::TASK_STATE_SUCCEEDED) break;
    if (task.state() == v1::TASK_STATE_FAILED ||
        task.state() == v1::TASK_STATE_CANCELLED) {
      return Failure(
          err, kName,
          absl::StrCat(
              "evaluation ", task.task_id(), " of run ", run_id, " ",
              StateName(task.state()), ": ",
              task.error().empty() ? "no reason given" : task.error(),
              response.on_demand()
                  ? absl::StrCat("; the run itself is unchanged. Fix the "
                                 "cause, then run the same `hlab eval` "
                                 "again to retry it")
                  : absl::StrCat("; it is an evaluation of the run's sweep, "
                                 "so the run failed with it. Fix the cause, "
                                 "then `hlab resume --run ",
                                 run_id, "` retries it")));
    }
    if (args->Has("no-wait")) {
      out << "task " << task.task_id() << " is " << StateName(task.state())
          << "; run the same `hlab eval` again to wait for its results\n";
      return kExitOk;
    }
    if (task.state() != shown) {
      err << "hlab eval: " << Progress(task) << "\n";
      shown = task.state();
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll));
    v1::EvaluateRunResponse next;
    s = c.Call(&v1::ClientService::Stub::EvaluateRun, request, &next);
    if (!s.ok()) {
      return Failure(err, kName, c.ErrorMessage(s, "evaluate runs"));
    }
    response = std::move(next);
  }

  v1::QueryRequest query;
  query.set_sql(absl::StrCat(
      "SELECT metric, step, value, details FROM evals WHERE run_id = '", run_id,
      "' AND step = ", response.task().eval_step(), " ORDER BY metric"));
  v1::QueryResponse rows;
  s = c.Call(&v1::ClientService::Stub::Query, query, &rows);
  if (!s.ok()) return Failure(err, kName, c.ErrorMessage(s, "read results"));
  Rows table;
  table.columns = {"metric", "step", "value", "details"};
  for (const v1::QueryRow& row : rows.rows()) {
    if (row.values_size() != 4) continue;
    if (!Wanted(row.values(0).text_value(), response.task().evals(),
                mc_names)) {
      continue;
    }
    std::vector<Cell>& cells = table.rows.emplace_back();
    for (const v1::QueryValue& v : row.values()) cells.push_back(QueryCell(v));
  }
  if (table.rows.empty()) {
    return Failure(err, kName,
                   absl::StrCat("evaluation ", response.task().task_id(),
                                " succeeded but the evals table has no "
                                "results for it; check the coordinator log"));
  }
  WriteRows(table, *format, out);
  return kExitOk;
}

}  // namespace

Command EvalCommand() {
  Command c;
  c.name = kName;
  c.summary =
      "evaluate a finished run (val_loss, longppl, niah, receptive_field, "
      "gradient_profile, probing, retrieval_heads, multiple_choice, ruler)";
  c.usage =
      "usage: hlab eval RUN_ID [--evals EVALS] [--step N]\n"
      "                 [--mc-tasks FILE[,FILE...] [--mc-fewshot K]\n"
      "                 [--mc-limit N]]\n"
      "                 [--no-wait] [--poll SECONDS] [--format "
      "table|json|csv]\n\n"
      "EVALS: a comma-separated list of val_loss, longppl, niah,\n"
      "receptive_field, gradient_profile, probing, retrieval_heads,\n"
      "multiple_choice (the sweep's evaluation.multiple_choice tasks, or\n"
      "--mc-tasks), ruler.\n\n"
      "--mc-tasks: multiple-choice JSONL files (docs/evaluation.md) to\n"
      "score instead of the sweep's, each a task named by its base name;\n"
      "paths as the workers see them (made absolute here). Without\n"
      "--evals it runs multiple_choice only. --mc-fewshot K: K examples\n"
      "before each question, drawn from the same file; --mc-limit N: the\n"
      "first N questions.\n\n"
      "Evaluates a run whose training has finished: the coordinator adds an\n"
      "EVAL task that a worker runs with hlab-eval, and the results go to\n"
      "the evals table. By default the evaluations and settings of the\n"
      "run's sweep, on its newest checkpoint; --evals picks some (the\n"
      "sweep's settings, or defaults), --step another checkpoint. Asking\n"
      "again for the same run, step and evals finds the same task (and, once\n"
      "done, prints its results without evaluating again). Waits for the\n"
      "task (its state changes on stderr; every --poll seconds, default 2)\n"
      "and prints metric, step, value, details; --no-wait returns at once.\n"
      "Needs a token with the submit role. Exit 1 when the run is unknown,\n"
      "not finished, has no checkpoint at --step, or the evaluation failed.\n"
      "A failed evaluation leaves the run's state and results as they were\n"
      "(the task's state and a task_failed event record it); running the\n"
      "same `hlab eval` again retries it.";
  c.run = Run;
  return c;
}

}  // namespace hlab::cli
