// End to end on loopback with the real binaries, driven through the CLI's
// commands: a run trained by two Gloo ranks (cpu_ranks: 2, gang scheduled on
// one worker) against the same task trained by one process; a run whose
// config hlab-train refuses (exit 2) fails at once while the sweep's other
// run goes on; and a diverging run (exit 75, then 3) fails after one retry.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/local_cluster.h"
#include "gtest/gtest.h"

namespace hlab::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// 16 steps of 8 sequences; each of the 2 ranks takes 4 sequences a step.
constexpr char kRanksSpec[] = R"(name: ranks
architectures: [full]
scales:
  - {name: T1, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1}
budgets: {tokens: [8192]}
seq_len: 64
batch_tokens: 512
data: {source: synthetic, long_fraction: 0.5, seed: 0}
schedule: {peak_lr: 3.0e-3, warmup_steps: 2, decay_fraction: 0.25}
evaluation: {validation_loss: {enabled: false}}
resources:
  - {scale: T1, cpu_threads: 1, cpu_ranks: 2}
)";

// T2's learning rate makes the loss non-finite: hlab-train exits 75 the
// first time (a retry resumes from the last good checkpoint) and 3 when it
// happens again at the same step, which fails the run for good.
constexpr char kFailingSpec[] = R"(name: failing
architectures: [full]
scales:
  - {name: T1, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1}
  - {name: T2, d_model: 48, n_layers: 2, n_heads: 2, n_kv_heads: 1,
     peak_lr: 1.0e30}
budgets: {tokens: [8192]}
seq_len: 64
batch_tokens: 512
data: {source: synthetic, long_fraction: 0.5, seed: 0}
schedule: {peak_lr: 3.0e-3, warmup_steps: 2, decay_fraction: 0.25}
evaluation: {validation_loss: {enabled: false}}
retry: {max_attempts_per_run: 3, backoff_base_seconds: 0,
        backoff_max_seconds: 0}
resources:
  - {scale: T1, cpu_threads: 1}
  - {scale: T2, cpu_threads: 1}
)";

// Prepared byte-level data (258 ids): T2's vocab_size of 200 passes spec
// validation (the coordinator does not read the data) and hlab-train refuses
// it for good (exit 2) before training: no retry. DATA is replaced by the
// dataset's directory.
constexpr char kRejectedSpec[] = R"(name: rejected
architectures: [full]
scales:
  - {name: T1, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1,
     vocab_size: 258}
  - {name: T2, d_model: 48, n_layers: 2, n_heads: 2, n_kv_heads: 1,
     vocab_size: 200}
budgets: {tokens: [8192]}
seq_len: 64
batch_tokens: 512
data: {source: prepared, path: DATA, long_fraction: 0.5}
schedule: {peak_lr: 3.0e-3, warmup_steps: 2, decay_fraction: 0.25}
evaluation: {validation_loss: {enabled: false}}
retry: {max_attempts_per_run: 3, backoff_base_seconds: 0,
        backoff_max_seconds: 0}
resources:
  - {scale: T1, cpu_threads: 1}
  - {scale: T2, cpu_threads: 1}
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

// Rows of a query as JSON objects.
Json Query(const std::string& address, const std::string& sql) {
  const Output o = Hlab({"query", sql, "--format", "json", "--max-rows",
                         "100000", "--address", address});
  EXPECT_EQ(o.code, kExitOk) << sql << ": " << o.err;
  return o.code == kExitOk ? Json::parse(o.out) : Json::array();
}

// step -> loss of the "step" records in JSON-lines `records`.
std::map<int64_t, double> StepLosses(const std::string& records) {
  std::map<int64_t, double> losses;
  std::istringstream in(records);
  std::string line;
  while (std::getline(in, line)) {
    const Json r = Json::parse(line, nullptr, false);
    if (r.is_object() && r.value("type", "") == "step") {
      losses[r["step"].get<int64_t>()] = r["loss"].get<double>();
    }
  }
  return losses;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class GangEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hlab_gang_e2e_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(GangEndToEndTest, TwoGlooRanksTrainTheSameRunAsOneProcess) {
  std::ofstream(dir_ / "spec.yaml") << kRanksSpec;
  const std::string cluster_dir = (dir_ / "cluster").string();
  LocalCluster cluster({.dir = cluster_dir,
                        .workers = 1,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR,
                        .worker_capacity = 2});
  ASSERT_TRUE(cluster.Start().ok());
  const std::string address = cluster.address();
  const Output submitted =
      Hlab({"submit", (dir_ / "spec.yaml").string(), "--address", address});
  ASSERT_EQ(submitted.code, kExitOk) << submitted.err;
  const Output watched = Hlab({"watch", "1", "--address", address});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;

  const Json runs = Query(address, "SELECT state, last_step FROM run_summary");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["state"], "SUCCEEDED") << runs.dump();
  EXPECT_EQ(runs[0]["last_step"], 16);
  // One row per step: rank 1 reports nothing, rank 0 each step once.
  const Json counts =
      Query(address,
            "SELECT count(*) AS n, count(DISTINCT step) AS steps FROM metrics "
            "WHERE name = 'train_loss'");
  EXPECT_EQ(counts[0]["n"], 16) << counts.dump();
  EXPECT_EQ(counts[0]["steps"], 16) << counts.dump();

  // Both ranks ran, on the one worker, from one task file.
  const Json tasks = Query(address, "SELECT id, attempt FROM tasks");
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0]["attempt"], 1);
  const fs::path task_dir = fs::path(cluster_dir) / "local-0" / "tasks" /
                            tasks[0]["id"].get<std::string>();
  ASSERT_TRUE(fs::exists(task_dir / "trainer-rank1.log")) << task_dir;
  Json task = Json::parse(ReadFile(task_dir / "task.json"));
  EXPECT_EQ(task["micro_batch_tokens"], 256);
  EXPECT_EQ(task["device"], "cpu");
  const Json points = Query(address,
                            "SELECT step, value FROM metrics WHERE name = "
                            "'train_loss' ORDER BY step");
  cluster.Stop();

  // The same task in one process, accumulating the two micro-batches.
  task["checkpoint"]["dir"] = (dir_ / "single-ckpt").string();
  std::ofstream(dir_ / "single.json") << task.dump(2);
  const std::string cmd = std::string(HLAB_BIN_DIR) + "/hlab-train --task " +
                          (dir_ / "single.json").string() + " > " +
                          (dir_ / "single.out").string() + " 2> " +
                          (dir_ / "single.err").string();
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << ReadFile(dir_ / "single.err");
  const std::map<int64_t, double> single =
      StepLosses(ReadFile(dir_ / "single.out"));
  ASSERT_EQ(single.size(), 16u);

  // Same updates up to the all-reduce's summation order (float32), as
  // tests/train/hlab_train_cli_test.cc checks for the trainer alone.
  ASSERT_EQ(points.size(), 16u);
  for (const Json& p : points) {
    const int64_t step = p["step"].get<int64_t>();
    EXPECT_NEAR(p["value"].get<double>(), single.at(step), 1e-4)
        << "step " << step;
  }
}

// `hlab-data prepare` of small generated texts into `dir`/long and
// `dir`/short; false (with the reason logged) on failure.
bool PrepareData(const fs::path& dir) {
  for (const std::string split : {"long", "short"}) {
    const fs::path src = dir / ("src-" + split);
    fs::create_directories(src);
    const int docs = split == "long" ? 12 : 40;
    const int words = split == "long" ? 400 : 6;
    for (int d = 0; d < docs; ++d) {
      std::ofstream out(src / ("doc" + std::to_string(d) + ".txt"));
      for (int w = 0; w < words; ++w) {
        out << (w > 0 ? " " : "") << "word" << (d * 7 + w * 13) % 97;
      }
    }
    const std::string cmd =
        std::string(HLAB_BIN_DIR) + "/hlab-data prepare --quiet --input " +
        src.string() + " --output " + (dir / split).string() + " > /dev/null";
    if (std::system(cmd.c_str()) != 0) {
      ADD_FAILURE() << cmd;
      return false;
    }
  }
  return true;
}

TEST_F(GangEndToEndTest, AConfigTheTrainerRefusesFailsItsRunAtOnceOthersGoOn) {
  ASSERT_TRUE(PrepareData(dir_ / "data"));
  std::string spec = kRejectedSpec;
  spec.replace(spec.find("DATA"), 4, (dir_ / "data").string());
  std::ofstream(dir_ / "spec.yaml") << spec;
  LocalCluster cluster({.dir = (dir_ / "cluster").string(),
                        .workers = 1,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR,
                        .worker_capacity = 2});
  ASSERT_TRUE(cluster.Start().ok());
  const std::string address = cluster.address();
  const Output submitted =
      Hlab({"submit", (dir_ / "spec.yaml").string(), "--address", address});
  ASSERT_EQ(submitted.code, kExitOk) << submitted.err;
  const Output watched = Hlab({"watch", "1", "--address", address});
  EXPECT_NE(watched.code, kExitOk) << watched.out;  // the sweep is incomplete

  const Json runs = Query(
      address,
      "SELECT scale, state, failure_reason, final_train_loss FROM run_summary "
      "ORDER BY scale");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["scale"], "T1");
  EXPECT_EQ(runs[0]["state"], "SUCCEEDED") << runs.dump();
  EXPECT_TRUE(runs[0]["final_train_loss"].is_number()) << runs.dump();
  EXPECT_EQ(runs[1]["scale"], "T2");
  EXPECT_EQ(runs[1]["state"], "FAILED") << runs.dump();
  const std::string reason = runs[1].value("failure_reason", "");
  EXPECT_NE(reason.find("exit code 2"), std::string::npos) << reason;
  EXPECT_NE(reason.find("model.vocab_size: 200 is smaller than the data's "
                        "vocabulary (258 tokens"),
            std::string::npos)
      << reason;
  // No retry: one attempt per run.
  const Json attempts = Query(
      address,
      "SELECT r.scale, count(*) AS n FROM attempts a JOIN tasks t ON t.id = "
      "a.task_id JOIN runs r ON r.id = t.run_id GROUP BY r.scale "
      "ORDER BY r.scale");
  ASSERT_EQ(attempts.size(), 2u) << attempts.dump();
  EXPECT_EQ(attempts[0]["n"], 1) << attempts.dump();
  EXPECT_EQ(attempts[1]["n"], 1) << attempts.dump();
  cluster.Stop();
}

TEST_F(GangEndToEndTest, ADivergingRunIsRetriedOnceThenFailsOthersSucceed) {
  std::ofstream(dir_ / "spec.yaml") << kFailingSpec;
  LocalCluster cluster({.dir = (dir_ / "cluster").string(),
                        .workers = 1,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR,
                        .worker_capacity = 2});
  ASSERT_TRUE(cluster.Start().ok());
  const std::string address = cluster.address();
  const Output submitted =
      Hlab({"submit", (dir_ / "spec.yaml").string(), "--address", address});
  ASSERT_EQ(submitted.code, kExitOk) << submitted.err;
  // The sweep ends incomplete: watch says so with a non-zero exit.
  const Output watched = Hlab({"watch", "1", "--address", address});
  EXPECT_NE(watched.code, kExitOk) << watched.out;

  const Json runs = Query(
      address, "SELECT scale, state, failure_reason FROM runs ORDER BY scale");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["scale"], "T1");
  EXPECT_EQ(runs[0]["state"], "SUCCEEDED") << runs.dump();
  EXPECT_EQ(runs[1]["scale"], "T2");
  EXPECT_EQ(runs[1]["state"], "FAILED") << runs.dump();
  const std::string reason = runs[1].value("failure_reason", "");
  // The trainer's own words, and its permanent exit code.
  EXPECT_NE(reason.find("exit code 3"), std::string::npos) << reason;
  EXPECT_NE(reason.find("the run diverges; lower optimizer.peak_lr"),
            std::string::npos)
      << reason;

  // Attempt 1 ended retryable (75: resume from the last good checkpoint),
  // attempt 2 hit the same step again and ended for good; no third.
  const Json attempts =
      Query(address,
            "SELECT a.attempt, a.error FROM attempts a JOIN tasks t ON t.id = "
            "a.task_id JOIN runs r ON r.id = t.run_id WHERE r.scale = 'T2' "
            "ORDER BY a.attempt");
  ASSERT_EQ(attempts.size(), 2u) << attempts.dump();
  EXPECT_NE(attempts[0]["error"].get<std::string>().find("exit code 75"),
            std::string::npos)
      << attempts.dump();
  EXPECT_NE(attempts[1]["error"].get<std::string>().find("exit code 3"),
            std::string::npos)
      << attempts.dump();
  const Json t1_attempts = Query(
      address,
      "SELECT count(*) AS n FROM attempts a JOIN tasks t ON t.id = a.task_id "
      "JOIN runs r ON r.id = t.run_id WHERE r.scale = 'T1'");
  EXPECT_EQ(t1_attempts[0]["n"], 1);
  cluster.Stop();
}

}  // namespace
}  // namespace hlab::cli
