// End to end on loopback: a real hlab-coordinator and two hlab-worker
// daemons run a small sweep with the real hlab-train and hlab-eval (every
// run evaluated: val_loss, LongPPL against the full-attention run, NIAH),
// driven through the CLI's commands, as `hlab up` does.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "cli/local_cluster.h"
#include "common/process_usage.h"
#include "gtest/gtest.h"
#include "tests/model/llama_test_util.h"

namespace hlab::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kSpec[] = R"(name: e2e
architectures: [full, gdn]
scales:
  - {name: T1, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1}
budgets: {tokens_per_param: [1, 2]}
seeds: [0]
seq_len: 64
batch_tokens: 512
data: {source: synthetic, long_fraction: 0.5, seed: 0}
schedule: {peak_lr: 3.0e-3, warmup_steps: 5, decay_fraction: 0.1}
evaluation:
  validation_loss: {enabled: true}
  longppl: {enabled: true}
  niah: {enabled: true, context_lengths: [64], samples: 4}
  receptive_field: {enabled: true}
  gradient_profile: {enabled: true, sequences: 2}
  probing: {enabled: true, samples: 32}
resources:
  - {scale: T1, cpu_threads: 1}
)";

struct Output {
  int code;
  std::string out, err;
};

Output Hlab(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunCli(args, out, err);
  return {code, out.str(), err.str()};
}

// `hlab submit SPEC` to the cluster; its exit code.
int Submit(const fs::path& spec, const LocalCluster& cluster) {
  return Hlab({"submit", spec.string(), "--address", cluster.address()}).code;
}

class SweepEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(HLAB_BIN_DIR) / "hlab-eval")) {
      GTEST_SKIP() << "needs " << HLAB_BIN_DIR << "/hlab-eval (the evaluator)";
    }
    dir_ =
        fs::temp_directory_path() / ("hlab_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "spec.yaml") << kSpec;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(SweepEndToEndTest,
       TwoWorkersRunASweepToCompletionAndResubmittingAddsNothing) {
  LocalCluster cluster({.dir = (dir_ / "cluster").string(),
                        .workers = 2,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR});
  ASSERT_TRUE(cluster.Start().ok());
  const std::string address = cluster.address();
  const std::string spec = (dir_ / "spec.yaml").string();

  Output submitted = Hlab({"submit", spec, "--address", address, "--json"});
  ASSERT_EQ(submitted.code, kExitOk) << submitted.err;
  const Json first = Json::parse(submitted.out);
  const std::string sweep = first["sweep"]["sweep_id"];
  EXPECT_TRUE(first.value("created", false));
  ASSERT_EQ(first["runs"].size(), 4u);

  const Output watched = Hlab({"watch", sweep, "--address", address});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;

  const Output runs =
      Hlab({"query",
            "SELECT state, final_train_loss, final_val_loss FROM run_summary",
            "--format", "json", "--address", address});
  ASSERT_EQ(runs.code, kExitOk) << runs.err;
  const Json rows = Json::parse(runs.out);
  ASSERT_EQ(rows.size(), 4u) << runs.out;
  for (const Json& row : rows) {
    EXPECT_EQ(row["state"], "SUCCEEDED") << row.dump();
    ASSERT_TRUE(row["final_train_loss"].is_number()) << row.dump();
    EXPECT_GT(row["final_train_loss"].get<double>(), 0.5);
    EXPECT_LT(row["final_train_loss"].get<double>(), 5.6);  // below ln(258)
    EXPECT_TRUE(row["final_val_loss"].is_number()) << row.dump();
  }
  // Every run evaluated by hlab-eval on a worker: val_loss, log(LongPPL)
  // and NIAH accuracy, with details.
  const Output evals = Hlab(
      {"query",
       "SELECT r.id, (SELECT count(*) FROM evals e WHERE e.run_id = r.id AND "
       "e.metric = 'val_loss') AS val_loss, (SELECT count(*) FROM evals e "
       "WHERE e.run_id = r.id AND e.metric = 'log_longppl') AS log_longppl, "
       "(SELECT count(*) FROM evals e WHERE e.run_id = r.id AND e.metric = "
       "'niah_acc') AS niah_acc, (SELECT count(*) FROM evals e WHERE "
       "e.run_id = r.id AND e.metric LIKE 'rf\\_%' ESCAPE '\\') AS rf, "
       "(SELECT count(*) FROM evals e WHERE e.run_id = r.id AND e.metric = "
       "'rf_full_delta_val_loss' AND e.value IS NOT NULL) AS rf_full, "
       "(SELECT count(*) FROM evals e WHERE e.run_id = r.id AND e.metric = "
       "'grad_reach' AND e.value IS NOT NULL) AS grad_reach, "
       "(SELECT count(*) FROM evals e WHERE e.run_id = r.id AND e.metric "
       "LIKE 'probe\\_acc%' ESCAPE '\\' AND e.value IS NOT NULL) AS probes, "
       "(SELECT count(*) FROM evals e WHERE e.run_id = r.id AND e.details = "
       "'{}') AS bare, r.arch FROM runs r",
       "--format", "json", "--address", address});
  ASSERT_EQ(evals.code, kExitOk) << evals.err;
  const Json eval_rows = Json::parse(evals.out);
  ASSERT_EQ(eval_rows.size(), 4u) << evals.out;
  for (const Json& row : eval_rows) {
    EXPECT_EQ(row["val_loss"], 1) << row.dump();
    EXPECT_EQ(row["log_longppl"], 1) << row.dump();
    EXPECT_EQ(row["niah_acc"], 1) << row.dump();
    // Appendix D.1's restrictions: the loss and log(LongPPL) changes with
    // the full layers and with the efficient layers restricted (the latter
    // null for Full, which has none).
    EXPECT_EQ(row["rf"], 4) << row.dump();
    EXPECT_EQ(row["rf_full"], 1) << row.dump();
    EXPECT_EQ(row["grad_reach"], 1) << row.dump();
    // probe_acc and probe_acc/l0..l2 (the embeddings and two blocks).
    EXPECT_EQ(row["probes"], 4) << row.dump();
    EXPECT_EQ(row["bare"], 0) << "results without details: " << row.dump();
  }
  // `hlab eval` of a finished run with the sweep's settings finds the
  // sweep's own EVAL task and prints its results without evaluating again.
  const std::string run_id = eval_rows[0]["id"];
  const Output on_demand =
      Hlab({"eval", run_id, "--format", "json", "--address", address});
  ASSERT_EQ(on_demand.code, kExitOk) << on_demand.err;
  EXPECT_NE(on_demand.err.find("asked before"), std::string::npos)
      << on_demand.err;
  const Json printed = Json::parse(on_demand.out);
  ASSERT_GE(printed.size(), 3u) << on_demand.out;

  // The bundled multiple-choice example on demand: the request carries the
  // task file, and both metrics land in evals with their details.
  const std::string simple_qa =
      std::string(HLAB_SOURCE_DIR) + "/examples/eval/simple_qa.jsonl";
  const Output mc = Hlab({"eval", run_id, "--mc-tasks", simple_qa, "--format",
                          "json", "--address", address});
  ASSERT_EQ(mc.code, kExitOk) << mc.err;
  const Json mc_rows = Json::parse(mc.out);
  ASSERT_EQ(mc_rows.size(), 2u) << mc.out;
  EXPECT_EQ(mc_rows[0]["metric"], "mc_acc/simple_qa") << mc.out;
  EXPECT_EQ(mc_rows[1]["metric"], "mc_acc_norm/simple_qa") << mc.out;
  for (const Json& row : mc_rows) {
    ASSERT_TRUE(row["value"].is_number()) << row.dump();
    EXPECT_GE(row["value"].get<double>(), 0.0);
    EXPECT_LE(row["value"].get<double>(), 1.0);
    const Json details = row["details"].is_string()
                             ? Json::parse(row["details"].get<std::string>())
                             : row["details"];
    EXPECT_EQ(details["n"], 20) << row.dump();
  }
  // A task file whose second question's gold index is out of range: the
  // evaluation fails naming the file and line, and the run keeps its state.
  const fs::path bad = dir_ / "bad_gold.jsonl";
  std::ofstream(bad)
      << R"({"context": "1 + 1 =", "choices": [" 2", " 3"], "gold": 0})"
      << "\n"
      << R"({"context": "2 + 2 =", "choices": [" 4", " 5"], "gold": 2})"
      << "\n";
  const Output bad_mc = Hlab({"eval", run_id, "--mc-tasks", bad.string(),
                              "--poll", "0.2", "--address", address});
  EXPECT_EQ(bad_mc.code, kExitFailed) << bad_mc.err;
  EXPECT_NE(bad_mc.err.find(bad.string() + ":2: gold: index 2 is out of range"),
            std::string::npos)
      << bad_mc.err;

  // An on-demand evaluation that fails (its checkpoint file is gone:
  // hlab-eval exits 2, a permanent failure) is reported, and recorded on
  // its task, but the run keeps its SUCCEEDED state.
  const Output newest =
      Hlab({"query",
            "SELECT path FROM checkpoints WHERE run_id = '" + run_id +
                "' ORDER BY step DESC, id DESC LIMIT 1",
            "--format", "json", "--address", address});
  ASSERT_EQ(newest.code, kExitOk) << newest.err;
  const std::string checkpoint = Json::parse(newest.out).at(0).at("path");
  ASSERT_TRUE(std::filesystem::remove(checkpoint)) << checkpoint;
  const Output failed = Hlab({"eval", run_id, "--evals", "val_loss", "--poll",
                              "0.2", "--address", address});
  EXPECT_EQ(failed.code, kExitFailed) << failed.err;
  EXPECT_NE(failed.err.find("of run " + run_id + " FAILED: "),
            std::string::npos)
      << failed.err;
  EXPECT_NE(failed.err.find("the run itself is unchanged. Fix the cause, then "
                            "run the same `hlab eval` again to retry it"),
            std::string::npos)
      << failed.err;
  const Output after = Hlab(
      {"query",
       "SELECT state, failure_reason, (SELECT count(*) FROM events WHERE "
       "kind = 'task_failed' AND run_id = '" +
           run_id + "') AS failed_events FROM runs WHERE id = '" + run_id + "'",
       "--format", "json", "--address", address});
  ASSERT_EQ(after.code, kExitOk) << after.err;
  const Json run_after = Json::parse(after.out).at(0);
  EXPECT_EQ(run_after["state"], "SUCCEEDED") << after.out;
  EXPECT_TRUE(run_after["failure_reason"].is_null()) << after.out;
  // Two failed evaluations: the bad multiple-choice file and this one.
  EXPECT_EQ(run_after["failed_events"], 2) << after.out;

  // The same spec again: the existing sweep, no new runs or metric rows.
  const Output counts_before =
      Hlab({"query",
            "SELECT (SELECT count(*) FROM runs) AS runs, "
            "(SELECT count(*) FROM metrics) AS metrics",
            "--format", "json", "--address", address});
  const Output again = Hlab({"submit", spec, "--address", address, "--json"});
  ASSERT_EQ(again.code, kExitOk) << again.err;
  const Json second = Json::parse(again.out);
  // Proto JSON leaves out false booleans: present only when true.
  EXPECT_FALSE(second.value("created", false));
  EXPECT_EQ(second["sweep"]["sweep_id"], sweep);
  const Output counts_after =
      Hlab({"query",
            "SELECT (SELECT count(*) FROM runs) AS runs, "
            "(SELECT count(*) FROM metrics) AS metrics",
            "--format", "json", "--address", address});
  EXPECT_EQ(counts_after.out, counts_before.out);

  // Followed from its newest event (as `hlab up` follows a sweep it finds
  // already there), the finished sweep's watch ends at once, without
  // replaying its history.
  const Output last_event = Hlab(
      {"query", "SELECT max(seq) AS seq FROM events WHERE sweep_id = " + sweep,
       "--format", "json", "--address", address});
  ASSERT_EQ(last_event.code, kExitOk) << last_event.err;
  const int64_t seq = Json::parse(last_event.out)[0]["seq"].get<int64_t>();
  const Output followed = Hlab(
      {"watch", sweep, "--from", std::to_string(seq), "--address", address});
  EXPECT_EQ(followed.code, kExitOk) << followed.err;
  EXPECT_NE(followed.out.find("finished: succeeded"), std::string::npos)
      << followed.out;
  EXPECT_EQ(followed.out.find("-> succeeded"), std::string::npos)
      << followed.out;

  // A worker drained through the CLI; `hlab workers` shows it so, and the
  // build each worker runs.
  const Output drained = Hlab({"drain", "local-0", "--address", address});
  EXPECT_EQ(drained.code, kExitOk) << drained.err;
  EXPECT_EQ(drained.out,
            "worker local-0: draining; it holds no task, so it can be stopped "
            "now (SIGTERM: it deregisters); `hlab undrain local-0` puts it "
            "back\n");
  const Output workers =
      Hlab({"workers", "--format", "json", "--address", address});
  ASSERT_EQ(workers.code, kExitOk) << workers.err;
  const Json listed = Json::parse(workers.out);
  ASSERT_EQ(listed.size(), 2u) << workers.out;
  EXPECT_EQ(listed[0]["worker_id"], "local-0");
  EXPECT_EQ(listed[0]["state"], "draining");
  EXPECT_EQ(listed[1]["state"], "alive");
  for (const Json& w : listed) {
    EXPECT_FALSE(w["version"].get<std::string>().empty()) << workers.out;
  }
  cluster.Stop();
}

// Pids of hlab-train processes whose command line mentions `dir`.
std::vector<pid_t> TrainersUnder(const std::string& dir) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
    // A trainer of a task: not the worker's device probe (hlab-train
    // --probe-devices), which exits at once.
    if (cmdline.find("hlab-train") != std::string::npos &&
        cmdline.find(dir) != std::string::npos &&
        cmdline.find("--task") != std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// Every training metric point of a cluster's database, as one JSON text.
std::string AllTrainingPoints(const std::string& address) {
  const Output points = Hlab(
      {"query",
       "SELECT r.arch, r.budget_tokens, m.name, m.step, m.value FROM metrics m "
       "JOIN runs r ON r.id = m.run_id WHERE m.name IN ('train_loss', "
       "'val_loss') ORDER BY r.arch, r.budget_tokens, m.name, m.step",
       "--format", "json", "--max-rows", "1000000", "--address", address});
  EXPECT_EQ(points.code, kExitOk) << points.err;
  return points.out;
}

// The training points of the spec run without faults (computed once).
const std::string& CleanPoints(const fs::path& dir) {
  static const std::string* points = [&] {
    LocalCluster clean({.dir = (dir / "clean").string(),
                        .workers = 2,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR});
    EXPECT_TRUE(clean.Start().ok());
    EXPECT_EQ(Submit(dir / "spec.yaml", clean), kExitOk);
    EXPECT_EQ(Hlab({"watch", "1", "--address", clean.address()}).code, kExitOk);
    return new std::string(AllTrainingPoints(clean.address()));
  }();
  return *points;
}

// Waits until a trainer of the cluster in `dir` has run for a moment.
pid_t RunningTrainer(const std::string& dir) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::vector<pid_t> pids = TrainersUnder(dir);
    if (!pids.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      return pids.front();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

// The parent pid of `pid`, from /proc.
pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat = ReadRestOfProcFile(in);  // "" once it is gone
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string state;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

std::string MaxAttempt(const std::string& address) {
  return Hlab({"query", "SELECT max(attempt) AS a FROM tasks", "--format",
               "csv", "--address", address})
      .out;
}

std::string RunStates(const std::string& address) {
  return Hlab({"query", "SELECT state, count(*) AS n FROM runs GROUP BY state",
               "--format", "csv", "--address", address})
      .out;
}

TEST_F(SweepEndToEndTest,
       AKilledTrainerIsRetriedAndTheMetricsMatchARunWithoutFaults) {
  const std::string& expected = CleanPoints(dir_);
  ASSERT_GT(Json::parse(expected).size(), 100u);
  const std::string dir = (dir_ / "trainer-killed").string();
  LocalCluster faulty({.dir = dir,
                       .workers = 2,
                       .metrics_listen = "none",
                       .bin_dir = HLAB_BIN_DIR});
  ASSERT_TRUE(faulty.Start().ok());
  ASSERT_EQ(Submit(dir_ / "spec.yaml", faulty), kExitOk);
  // kill -9 the first trainer once it has run for a moment.
  const pid_t trainer = RunningTrainer(dir);
  ASSERT_GT(trainer, 0) << "no trainer to kill";
  ASSERT_EQ(::kill(trainer, SIGKILL), 0);
  const Output watched = Hlab({"watch", "1", "--address", faulty.address()});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;
  EXPECT_EQ(MaxAttempt(faulty.address()), "a\n2\n")
      << "the killed task was not retried once";
  // Same points, same values, no duplicates (the key is (run, name, step)).
  EXPECT_EQ(AllTrainingPoints(faulty.address()), expected);
}

// The paper's protocol with a Hugging Face Llama as the LongPPL reference
// (evaluation.longppl.reference.hf_dir): a tiny random LlamaForCausalLM of
// the byte vocabulary, written as config.json + model.safetensors, selects
// the key tokens on the worker, and `hlab eval` prints the result.
TEST_F(SweepEndToEndTest, AHuggingFaceLlamaIsTheLongPplReference) {
  model::llama::testing::TinyLlama llama;
  llama.vocab = 258;  // the byte tokenizer's
  llama.Write((dir_ / "llama").string());
  std::ofstream(dir_ / "llama.yaml") << absl::StrCat(R"(name: e2e-llama
architectures: [swa-16]
scales:
  - {name: T1, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1}
budgets: {tokens_per_param: [1]}
seeds: [0]
seq_len: 64
batch_tokens: 512
data: {source: synthetic, long_fraction: 0.5, seed: 0}
schedule: {peak_lr: 3.0e-3, warmup_steps: 5, decay_fraction: 0.1}
evaluation:
  longppl: {enabled: true, min_key_tokens: 1, reference: {hf_dir: ")",
                                                     (dir_ / "llama").string(),
                                                     R"("}}
resources:
  - {scale: T1, cpu_threads: 1}
)");
  LocalCluster cluster({.dir = (dir_ / "cluster").string(),
                        .workers = 1,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR});
  ASSERT_TRUE(cluster.Start().ok());
  const std::string address = cluster.address();
  const Output submitted = Hlab({"submit", (dir_ / "llama.yaml").string(),
                                 "--address", address, "--json"});
  ASSERT_EQ(submitted.code, kExitOk) << submitted.err;
  const Json sweep = Json::parse(submitted.out);
  ASSERT_EQ(sweep["runs"].size(), 1u);
  const Output watched =
      Hlab({"watch", sweep["sweep"]["sweep_id"], "--address", address});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;
  const std::string run_id = sweep["runs"][0]["run_id"];
  const Output printed = Hlab({"eval", run_id, "--evals", "longppl", "--format",
                               "json", "--address", address});
  ASSERT_EQ(printed.code, kExitOk) << printed.err;
  const Json rows = Json::parse(printed.out);
  ASSERT_EQ(rows.size(), 1u) << printed.out;
  const Json& row = rows[0];
  EXPECT_EQ(row["metric"], "log_longppl") << row.dump();
  const Json details = row["details"].is_string()
                           ? Json::parse(row["details"].get<std::string>())
                           : row["details"];
  const Json& reference = details["reference"];
  EXPECT_EQ(reference["hf_dir"], (dir_ / "llama").string()) << row.dump();
  EXPECT_EQ(reference["weights"], "model.safetensors") << row.dump();
  EXPECT_EQ(reference["dtype"], "fp32") << row.dump();
  EXPECT_EQ(reference["sha256"].get<std::string>().size(), 64u) << row.dump();
  // Selected by the Llama: a count, measured or, with none, the reason.
  EXPECT_TRUE(details["key_tokens_selected"].is_number()) << row.dump();
  EXPECT_TRUE(row["value"].is_number() || details.contains("not_measured"))
      << row.dump();
}

TEST_F(SweepEndToEndTest, AKilledWorkersTaskFinishesOnTheOtherWorker) {
  const std::string dir = (dir_ / "worker-killed").string();
  LocalCluster cluster({.dir = dir,
                        .workers = 2,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR,
                        .lease_seconds = 3});
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_EQ(Submit(dir_ / "spec.yaml", cluster), kExitOk);
  const pid_t trainer = RunningTrainer(dir);
  ASSERT_GT(trainer, 0);
  const pid_t worker = ParentOf(trainer);
  const std::vector<pid_t>& workers = cluster.worker_pids();
  ASSERT_NE(std::find(workers.begin(), workers.end(), worker), workers.end());
  ASSERT_EQ(::kill(worker, SIGKILL), 0);  // its trainer dies of SIGPIPE
  const Output watched = Hlab({"watch", "1", "--address", cluster.address()});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;
  EXPECT_EQ(RunStates(cluster.address()), "state,n\nSUCCEEDED,4\n");
  EXPECT_EQ(MaxAttempt(cluster.address()), "a\n2\n");
  EXPECT_EQ(AllTrainingPoints(cluster.address()), CleanPoints(dir_));
}

TEST_F(SweepEndToEndTest, AKilledCoordinatorRestartsAndTheSweepCompletes) {
  const std::string dir = (dir_ / "coordinator-killed").string();
  LocalCluster cluster({.dir = dir,
                        .workers = 2,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR});
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_EQ(Submit(dir_ / "spec.yaml", cluster), kExitOk);
  ASSERT_GT(RunningTrainer(dir), 0);
  // kill -9 mid-sweep, then start it again on the same database and port.
  ASSERT_TRUE(cluster.RestartCoordinator().ok());
  const Output watched = Hlab({"watch", "1", "--address", cluster.address()});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;
  EXPECT_EQ(RunStates(cluster.address()), "state,n\nSUCCEEDED,4\n");
  // Nothing lost, nothing duplicated.
  EXPECT_EQ(AllTrainingPoints(cluster.address()), CleanPoints(dir_));
}

// One run long enough (about 1,200 steps, a checkpoint every 10%) to lose
// its node in the middle.
constexpr char kLongSpec[] = R"(name: node-loss
architectures: [full]
scales:
  - {name: T1, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1}
budgets: {tokens_per_param: [20]}
seq_len: 64
batch_tokens: 512
share_trunk: false
schedule: {peak_lr: 3.0e-3, warmup_steps: 5, decay_fraction: 0.1}
evaluation: {validation_loss: {enabled: false}}
resources:
  - {scale: T1, cpu_threads: 1}
)";

// The task id in a trainer's command line (--task <dir>/tasks/<id>/...).
std::string TaskOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string arg;
  bool next = false;
  while (std::getline(in, arg, '\0')) {
    if (next) return fs::path(arg).parent_path().filename().string();
    next = arg == "--task";
  }
  return "";
}

// A node is lost with its disk: kill -9 of the worker (its trainer dies of
// SIGPIPE) after the task's first checkpoint, and its data dir deleted. The
// task resumes on the other worker from the shared checkpoint (the
// cluster's --checkpoint-root), at the step it had reached, and trains the
// same points as a run without faults, bit for bit.
TEST_F(SweepEndToEndTest, ALostNodesTaskResumesFromTheSharedCheckpoint) {
  std::ofstream(dir_ / "long.yaml") << kLongSpec;
  std::string expected;
  {
    LocalCluster clean({.dir = (dir_ / "node-clean").string(),
                        .workers = 1,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR});
    ASSERT_TRUE(clean.Start().ok());
    ASSERT_EQ(Submit(dir_ / "long.yaml", clean), kExitOk);
    ASSERT_EQ(Hlab({"watch", "1", "--address", clean.address()}).code, kExitOk);
    expected = AllTrainingPoints(clean.address());
  }
  ASSERT_GT(Json::parse(expected).size(), 1000u);

  const std::string dir = (dir_ / "node-lost").string();
  LocalCluster cluster({.dir = dir,
                        .workers = 2,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR,
                        .lease_seconds = 3});
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_EQ(Submit(dir_ / "long.yaml", cluster), kExitOk);
  // The run's trainer (one that has ended by the time its command line is
  // read, under load, is looked for again).
  pid_t trainer = -1;
  std::string task;
  for (int tries = 0; tries < 20 && task.empty(); ++tries) {
    trainer = RunningTrainer(dir);
    ASSERT_GT(trainer, 0);
    task = TaskOf(trainer);
  }
  ASSERT_FALSE(task.empty());
  // Its first checkpoint, reported to the coordinator.
  int64_t reached = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (reached == 0 && std::chrono::steady_clock::now() < deadline) {
    const Output step =
        Hlab({"query",
              "SELECT coalesce(max(step), 0) AS s FROM checkpoints WHERE "
              "task_id = '" +
                  task + "'",
              "--format", "csv", "--address", cluster.address()});
    reached = std::stoll(step.out.substr(step.out.find('\n') + 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(reached, 0) << "no checkpoint of " << task;
  const pid_t worker = ParentOf(trainer);
  const std::vector<pid_t>& workers = cluster.worker_pids();
  const auto lost = std::find(workers.begin(), workers.end(), worker);
  ASSERT_NE(lost, workers.end());
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  const std::string lost_dir =
      absl::StrCat(dir, "/local-", lost - workers.begin());
  for (int i = 0; i < 500 && ::kill(trainer, 0) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fs::remove_all(lost_dir);  // the node's disk is gone

  const Output watched = Hlab({"watch", "1", "--address", cluster.address()});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;
  EXPECT_EQ(RunStates(cluster.address()), "state,n\nSUCCEEDED,1\n");
  EXPECT_EQ(MaxAttempt(cluster.address()), "a\n2\n");
  // The survivor's trainer started at a checkpoint at or past the one
  // reported before the loss ("steps S -> ...").
  const std::string survivor =
      absl::StrCat(dir, "/local-", lost == workers.begin() ? 1 : 0);
  std::ifstream log(fs::path(survivor) / "tasks" / task / "trainer.log");
  std::string line;
  int64_t start = -1;
  while (std::getline(log, line)) {
    const size_t at = line.find(", steps ");
    if (at != std::string::npos) start = std::stoll(line.substr(at + 8));
  }
  EXPECT_GE(start, reached) << "the retry did not resume";
  EXPECT_EQ(AllTrainingPoints(cluster.address()), expected);
}

// The process that started the cluster (hlab up) is killed with SIGKILL, so
// it cannot stop its children: the coordinator and the workers must go with
// it (their parent-death signal), not run on without it.
TEST_F(SweepEndToEndTest, KillNineOfTheClusterOwnerTakesItsDaemonsWithIt) {
  int pids_pipe[2];
  ASSERT_EQ(::pipe(pids_pipe), 0);
  const pid_t owner = ::fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    // The owner: starts the cluster from its one thread, reports the pids,
    // then waits to be killed.
    ::close(pids_pipe[0]);
    LocalCluster cluster({.dir = (dir_ / "owned").string(),
                          .workers = 2,
                          .metrics_listen = "none",
                          .bin_dir = HLAB_BIN_DIR});
    if (!cluster.Start().ok()) ::_exit(1);
    std::vector<pid_t> pids = cluster.worker_pids();
    pids.push_back(cluster.coordinator_pid());
    const ssize_t size = static_cast<ssize_t>(pids.size() * sizeof(pid_t));
    if (::write(pids_pipe[1], pids.data(), pids.size() * sizeof(pid_t)) !=
        size) {
      ::_exit(1);
    }
    for (;;) ::pause();
  }
  ::close(pids_pipe[1]);
  std::vector<pid_t> daemons(3);
  const ssize_t want = static_cast<ssize_t>(daemons.size() * sizeof(pid_t));
  const ssize_t got = ::read(pids_pipe[0], daemons.data(), want);
  ::close(pids_pipe[0]);
  if (got != want) {
    ::kill(owner, SIGKILL);
    ::waitpid(owner, nullptr, 0);
    FAIL() << "the cluster did not start (logs in " << dir_ / "owned/logs"
           << ")";
  }
  for (pid_t pid : daemons) ASSERT_EQ(::kill(pid, 0), 0) << pid;
  ASSERT_EQ(::kill(owner, SIGKILL), 0);
  ASSERT_EQ(::waitpid(owner, nullptr, 0), owner);
  // Gone: no such process, or a zombie waiting for whoever reaps orphans.
  auto gone = [](pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return true;
    const size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() &&
           line[paren + 2] == 'Z';
  };
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (pid_t pid : daemons) {
    while (!gone(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(gone(pid)) << "daemon " << pid << " outlived the killed owner";
    if (!gone(pid)) ::kill(pid, SIGKILL);
  }
}

}  // namespace
}  // namespace hlab::cli
