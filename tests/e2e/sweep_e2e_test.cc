// End to end on loopback: a real hlab-coordinator and two hlab-worker
// daemons run a small sweep with the real hlab-train, driven through the
// CLI's commands, as `hlab up` does.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/local_cluster.h"
#include "gtest/gtest.h"

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
evaluation: {validation_loss: {enabled: true}}
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

class SweepEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
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
    if (cmdline.find("hlab-train") != std::string::npos &&
        cmdline.find(dir) != std::string::npos) {
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

TEST_F(SweepEndToEndTest,
       AKilledTrainerIsRetriedAndTheMetricsMatchARunWithoutFaults) {
  const std::string spec = (dir_ / "spec.yaml").string();
  std::string expected;
  {
    LocalCluster clean({.dir = (dir_ / "clean").string(),
                        .workers = 2,
                        .metrics_listen = "none",
                        .bin_dir = HLAB_BIN_DIR});
    ASSERT_TRUE(clean.Start().ok());
    ASSERT_EQ(Hlab({"submit", spec, "--address", clean.address()}).code,
              kExitOk);
    ASSERT_EQ(Hlab({"watch", "1", "--address", clean.address()}).code, kExitOk);
    expected = AllTrainingPoints(clean.address());
  }
  ASSERT_GT(Json::parse(expected).size(), 100u);
  const std::string faulty_dir = (dir_ / "faulty").string();
  LocalCluster faulty({.dir = faulty_dir,
                       .workers = 2,
                       .metrics_listen = "none",
                       .bin_dir = HLAB_BIN_DIR});
  ASSERT_TRUE(faulty.Start().ok());
  ASSERT_EQ(Hlab({"submit", spec, "--address", faulty.address()}).code,
            kExitOk);
  // kill -9 the first trainer once it has run for a moment.
  bool killed = false;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!killed && std::chrono::steady_clock::now() < deadline) {
    const std::vector<pid_t> pids = TrainersUnder(faulty_dir);
    if (!pids.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      killed = ::kill(pids.front(), SIGKILL) == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(killed) << "no trainer to kill";
  const Output watched = Hlab({"watch", "1", "--address", faulty.address()});
  ASSERT_EQ(watched.code, kExitOk) << watched.out << watched.err;
  const Output attempts =
      Hlab({"query", "SELECT max(attempt) AS a FROM tasks", "--format", "csv",
            "--address", faulty.address()});
  EXPECT_NE(attempts.out.find("\n2"), std::string::npos)
      << "the killed task was not retried: " << attempts.out;
  // Same points, same values, no duplicates (the key is (run, name, step)).
  EXPECT_EQ(AllTrainingPoints(faulty.address()), expected);
}

}  // namespace
}  // namespace hlab::cli
