// `hlab replay` (cli/replay_command.cc) as a user meets it: on a report's
// runs.csv with the spec that made it (the demo's plan, values drawn from a
// known law), its table, JSON and figure, and its errors.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "common/filesystem.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_parser.h"

namespace hlab::cli {
namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

Result Hlab(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunCli(args, out, err);
  return {code, out.str(), err.str()};
}

class CliReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cli_replay_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    spec_ = std::string(HLAB_SOURCE_DIR) + "/examples/sweeps/demo.yaml";
    absl::StatusOr<v1::SweepSpec> spec = sweep::LoadSweepSpec(spec_);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<sweep::SweepPlan> plan =
        sweep::PlanSweep(sweep::WithDefaults(*spec));
    ASSERT_TRUE(plan.ok()) << plan.status();
    // A report's runs.csv whose losses follow L = 1 + 30/N^0.35 + 60/D^0.3
    // exactly: every law the replay fits is that one.
    csv_ = dir_ + "/runs.csv";
    std::ofstream csv(csv_);
    csv << "run_id,architecture,scale,N,D,D_over_N,state,final_loss,"
           "val_loss,log_longppl,niah_accuracy\n";
    for (const v1::Run& r : plan->runs) {
      const double n = static_cast<double>(r.non_embedding_params());
      const double d = static_cast<double>(r.tokens());
      const double loss = 1 + 30 / std::pow(n, 0.35) + 60 / std::pow(d, 0.3);
      csv << r.run_id() << "," << r.architecture() << "," << r.scale() << ","
          << n << "," << r.tokens() << ",0,SUCCEEDED," << loss << "," << loss
          << ",,\n";
    }
  }
  void TearDown() override { (void)RemoveTree(dir_); }

  std::string dir_, spec_, csv_;
};

TEST_F(CliReplayTest, ReplaysTheDemoGridAndReachesTheExactLaw) {
  const Result r = Hlab({"replay", "--runs-csv", csv_, "--spec", spec_,
                         "--policy", "default,adaptive", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["candidates"], 36);  // 4 architectures x S1-S3 x 3 budgets
  EXPECT_EQ(j["targets"], 12);     // S4
  EXPECT_EQ(j["target_scales"], nlohmann::json::array({"S4"}));
  EXPECT_GT(j["full_r2_target"].get<double>(), 0.999);
  EXPECT_LT(j["full_median_abs_error"].get<double>(), 1e-3);
  ASSERT_EQ(j["replays"].size(), 2u);
  for (const auto& replay : j["replays"]) {
    EXPECT_EQ(replay["trunks"], "whole");
    EXPECT_EQ(replay["curve"].size(), 36u);
    EXPECT_DOUBLE_EQ(replay["curve"].back()["fraction"].get<double>(), 1.0);
    EXPECT_TRUE(replay["flops_fraction_at_target"].is_number());
  }
  ASSERT_EQ(j["summary"].size(), 2u);
  // Progress goes to stderr, one line per replay.
  EXPECT_NE(r.err.find("hlab replay: default, trunks whole"),
            std::string::npos);
}

TEST_F(CliReplayTest, PrintsATableAndDrawsTheFigure) {
  const Result r =
      Hlab({"replay", "--runs-csv", csv_, "--spec", spec_, "--policy", "random",
            "--seeds", "2", "--trunks", "extend", "--plot", dir_ + "/fig"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("36 candidate runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("policy    trunks   seed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("random    extend      1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("random    extend      2"), std::string::npos);
  struct stat st;
  EXPECT_EQ(stat((dir_ + "/fig/replay.gp").c_str(), &st), 0);
  EXPECT_EQ(stat((dir_ + "/fig/data/replay_random_extend_2.dat").c_str(), &st),
            0);
}

TEST_F(CliReplayTest, BadInputIsNamed) {
  Result r = Hlab({"replay"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("give --db FILE, or --runs-csv FILE with --spec FILE"),
            std::string::npos)
      << r.err;
  r = Hlab(
      {"replay", "--runs-csv", csv_, "--spec", spec_, "--policy", "greedy"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("unknown policy 'greedy'"), std::string::npos);
  r = Hlab({"replay", "--runs-csv", csv_, "--spec", spec_, "--trunks", "x"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--trunks"), std::string::npos);
  r = Hlab({"replay", "--runs-csv", csv_, "--spec", spec_, "--target", "niah"});
  EXPECT_EQ(r.code, kExitUsage);
  r = Hlab({"replay", "--runs-csv", csv_, "--spec", spec_, "--seeds", "0"});
  EXPECT_EQ(r.code, kExitUsage);
  r = Hlab(
      {"replay", "--runs-csv", csv_, "--spec", spec_, "--target-scales", "S9"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_NE(r.err.find("target scale 'S9' is not a scale of the sweep"),
            std::string::npos)
      << r.err;
  r = Hlab({"replay", "--runs-csv", dir_ + "/missing.csv", "--spec", spec_});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_NE(r.err.find("missing.csv"), std::string::npos);
  r = Hlab({"replay", "--db", dir_ + "/missing.db"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace hlab::cli
