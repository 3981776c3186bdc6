// deploy/prometheus/ against the real thing: `promtool check config|rules`
// and `promtool test rules` (hlab-alerts.test.yml) on the shipped files,
// `promtool check metrics` on live /metrics of a coordinator and a worker, and
// a real Prometheus server (Debian's package) on loopback, scraping them every
// second with the shipped prometheus.yml (only its targets and intervals
// rewritten) while they run a small sweep. Its HTTP API must show the hlab_*
// series and their movement (tokens trained rise, runs succeed), the rules
// loaded and healthy, and every metric that the Grafana dashboard and the
// alerting rules use.
#include <signal.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tests/deploy/daemons.h"
#include "tests/deploy/deploy_files.h"

namespace hlab::deploy_testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kSource = HLAB_SOURCE_DIR;
const std::string kBin = HLAB_BIN_DIR;
constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kPromtool[] = "/usr/bin/promtool";

// Two architectures, two budgets: a trunk and two decays each, a few
// seconds of training per run on one CPU thread.
constexpr char kSpec[] = R"(name: deploy
architectures: [full, gdn]
scales:
  - {name: T1, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1}
budgets: {tokens_per_param: [4, 8]}
seeds: [0]
seq_len: 64
batch_tokens: 512
data: {source: synthetic, long_fraction: 0.5, seed: 0}
schedule: {peak_lr: 3.0e-3, warmup_steps: 5, decay_fraction: 0.1}
evaluation: {validation_loss: {enabled: true}}
resources:
  - {scale: T1, cpu_threads: 1}
)";

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrCat("%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kPrometheus) || !fs::exists(kPromtool)) {
      GTEST_SKIP() << kPrometheus << " or " << kPromtool
                   << " is missing: install Debian's prometheus package "
                      "(scripts/setup.sh does)";
    }
    dir_ = fs::path(::testing::TempDir()) /
           ("hlab_prometheus_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    prometheus_.Stop();
    worker_.Stop();
    coordinator_.Stop();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // The vector result of an instant query (empty on error).
  Json Query(const std::string& promql) {
    absl::StatusOr<std::string> body =
        HttpGet("127.0.0.1", prometheus_port_,
                "/api/v1/query?query=" + UrlEncode(promql));
    if (!body.ok()) return Json::array();
    const Json answer = Json::parse(*body);
    if (answer.value("status", "") != "success") return Json::array();
    return answer["data"]["result"];
  }
  // The first value of an instant query, or -1.
  double Value(const std::string& promql) {
    const Json result = Query(promql);
    if (result.empty()) return -1;
    return std::stod(result[0]["value"][1].get<std::string>());
  }

  // Writes the shipped prometheus.yml with its targets pointed at this
  // test's ports, 1 s intervals, and the rules file by absolute path.
  fs::path TestConfig(int coordinator_port, int worker_port) {
    YAML::Node config =
        YAML::LoadFile((kSource / "deploy/prometheus/prometheus.yml").string());
    config["global"]["scrape_interval"] = "1s";
    config["global"]["evaluation_interval"] = "1s";
    YAML::Node rules;
    for (const YAML::Node& r : config["rule_files"]) {
      rules.push_back(
          (kSource / "deploy/prometheus" / r.as<std::string>()).string());
    }
    config["rule_files"] = rules;
    YAML::Node jobs;
    for (YAML::Node job : config["scrape_configs"]) {
      const std::string name = job["job_name"].as<std::string>();
      int port = 0;
      if (name == "hlab-coordinator") port = coordinator_port;
      if (name == "hlab-worker") port = worker_port;
      if (port == 0) continue;  // dcgm-exporter: no GPUs here
      YAML::Node targets;
      targets.push_back(absl::StrCat("127.0.0.1:", port));
      job["static_configs"][0]["targets"] = targets;
      jobs.push_back(job);
    }
    EXPECT_EQ(jobs.size(), 2u) << "the shipped config lost a job";
    config["scrape_configs"] = jobs;
    const fs::path path = dir_ / "prometheus.yml";
    std::ofstream(path) << YAML::Dump(config) << "\n";
    return path;
  }

  fs::path dir_;
  Daemon coordinator_, worker_, prometheus_;
  int prometheus_port_ = 0;
};

TEST_F(PrometheusTest, ShippedConfigAndRulesPassPromtool) {
  const Finished config =
      RunToEnd({kPromtool, "check", "config",
                (kSource / "deploy/prometheus/prometheus.yml").string()});
  EXPECT_EQ(config.exit_code, 0) << config.output;
  const Finished rules =
      RunToEnd({kPromtool, "check", "rules",
                (kSource / "deploy/prometheus/hlab-alerts.yml").string()});
  EXPECT_EQ(rules.exit_code, 0) << rules.output;
  EXPECT_NE(rules.output.find("SUCCESS: 12 rules found"), std::string::npos)
      << rules.output;
  // The alerts' own unit tests: each fires when and only when it should.
  const Finished unit =
      RunToEnd({kPromtool, "test", "rules",
                (kSource / "deploy/prometheus/hlab-alerts.test.yml").string()});
  EXPECT_EQ(unit.exit_code, 0) << unit.output;
  EXPECT_NE(unit.output.find("SUCCESS"), std::string::npos) << unit.output;
}

TEST_F(PrometheusTest, ScrapesASweepAndSeesItsSeriesMove) {
  // The worker starts first, against a coordinator that is not up yet: its
  // failed calls create hlab_worker_report_errors_total, and it must
  // connect once the coordinator is there.
  const int grpc_port = FreePort();
  const int worker_metrics = FreePort();
  worker_ = Daemon::Start(
      {kBin + "/hlab-worker", "--coordinator",
       absl::StrCat("127.0.0.1:", grpc_port), "--data-dir",
       (dir_ / "worker").string(), "--capacity", "1", "--metrics-listen",
       absl::StrCat("127.0.0.1:", worker_metrics), "--name", "w1"},
      (dir_ / "worker.log").string());
  // It serves /metrics once hlab-train --probe-devices has answered
  // (loading LibTorch takes seconds), then fails to register.
  const auto failing_by =
      std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < failing_by) {
    absl::StatusOr<std::string> page =
        HttpGet("127.0.0.1", worker_metrics, "/metrics");
    if (page.ok() &&
        page->find("hlab_worker_report_errors_total{") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  coordinator_ = Daemon::Start(
      {kBin + "/hlab-coordinator", "--db", (dir_ / "hlab.db").string(),
       "--listen", absl::StrCat("127.0.0.1:", grpc_port), "--metrics-listen",
       "127.0.0.1:0", "--lease-seconds", "3", "--auto-fit", "off"},
      (dir_ / "coordinator.log").string());
  const std::string address = coordinator_.WaitForLine("listening on ");
  ASSERT_FALSE(address.empty())
      << "coordinator did not start; see " << dir_ / "coordinator.log";
  const int coordinator_metrics =
      PortOf(coordinator_.WaitForLine("metrics on "));
  ASSERT_GT(coordinator_metrics, 0);

  // promtool's lint on what each endpoint serves (again below, with the
  // series of a running sweep).
  auto lint = [&](const std::string& name, int port) {
    absl::StatusOr<std::string> page = HttpGet("127.0.0.1", port, "/metrics");
    ASSERT_TRUE(page.ok()) << name << ": " << page.status();
    const fs::path file = dir_ / (name + ".metrics");
    std::ofstream(file) << *page;
    const Finished result =
        RunToEnd({"/bin/sh", "-c",
                  absl::StrCat(kPromtool, " check metrics < ", file.string())});
    EXPECT_EQ(result.exit_code, 0) << name << ":\n" << result.output;
  };
  lint("coordinator", coordinator_metrics);
  lint("worker", worker_metrics);

  prometheus_port_ = FreePort();
  prometheus_ = Daemon::Start(
      {kPrometheus,
       "--config.file=" +
           TestConfig(coordinator_metrics, worker_metrics).string(),
       "--storage.tsdb.path=" + (dir_ / "tsdb").string(),
       absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port_),
       "--log.level=warn"},
      (dir_ / "prometheus.log").string());
  auto wait_for = [&](const std::string& what, auto done, int seconds) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    ADD_FAILURE() << "timed out waiting for " << what << "; logs in " << dir_;
    return false;
  };
  ASSERT_TRUE(wait_for(
      "prometheus ready",
      [&] { return HttpGet("127.0.0.1", prometheus_port_, "/-/ready").ok(); },
      60));
  ASSERT_TRUE(wait_for(
      "both targets up",
      [&] {
        return Value(R"(sum(up{job=~"hlab-coordinator|hlab-worker"}))") == 2;
      },
      60));
  ASSERT_TRUE(wait_for(
      "the worker registered",
      [&] {
        return Value("hlab_workers_connected") == 1 &&
               Value("hlab_worker_coordinator_connected") == 1;
      },
      60));

  std::ofstream(dir_ / "spec.yaml") << kSpec;
  const Finished submitted =
      RunToEnd({kBin + "/hlab", "submit", (dir_ / "spec.yaml").string(),
                "--address", address});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;

  // While it runs: the sweep's series, and tokens trained rising between
  // two samples.
  ASSERT_TRUE(wait_for(
      "sweep series",
      [&] { return Value(R"(sum(hlab_sweep_runs{sweep="deploy"}))") == 4; },
      60));
  double first = -1;
  ASSERT_TRUE(wait_for(
      "tokens trained",
      [&] {
        first = Value("hlab_tokens_trained_total");
        return first > 0;
      },
      120));
  ASSERT_TRUE(wait_for(
      "tokens trained to rise",
      [&] { return Value("hlab_tokens_trained_total") > first; }, 120));
  EXPECT_GT(Value(R"(hlab_sweep_tokens_budget{sweep="deploy"})"), 0);
  lint("coordinator-during-sweep", coordinator_metrics);
  lint("worker-during-sweep", worker_metrics);

  const Finished watched =
      RunToEnd({kBin + "/hlab", "watch", "deploy", "--address", address},
               absl::Minutes(5));
  ASSERT_EQ(watched.exit_code, 0) << watched.output;
  ASSERT_TRUE(wait_for(
      "4 runs succeeded",
      [&] { return Value(R"(hlab_runs{state="SUCCEEDED"})") == 4; }, 30));
  // 2 trunks and 4 decays; the last Complete may land after the runs
  // show SUCCEEDED, and the next scrape sees it.
  EXPECT_TRUE(wait_for(
      "6 tasks completed",
      [&] { return Value("hlab_worker_tasks_completed_total") >= 6; }, 30));
  EXPECT_GT(Value("max_over_time(hlab_run_progress_ratio[10m])"), 0.5);
  // Tokens trained against the runs' budgets: the trunk trains each
  // architecture's shared prefix once (0.9 D8), the decays 0.1 D each, so
  // D8 + 0.1 D4 = 0.7 of D4 + D8. Counting a decay from token 0, or a
  // trunk once per run, would pass the budgets.
  const double budgets =
      Value(R"(max_over_time(hlab_sweep_tokens_budget{sweep="deploy"}[10m]))");
  const double trained = Value("hlab_tokens_trained_total");
  EXPECT_GT(trained, 0.6 * budgets) << trained << " of " << budgets;
  EXPECT_LT(trained, 0.8 * budgets) << trained << " of " << budgets;
  EXPECT_GT(Value("hlab_metric_points_ingested_total"), 0);
  EXPECT_GT(Value("hlab_db_commit_latency_seconds_count"), 0);
  EXPECT_GT(
      Value(
          R"(hlab_grpc_server_handled_total{method="/hlab.v1.WorkerService/Heartbeat",code="OK"})"),
      0);
  EXPECT_EQ(Value(R"(hlab_runs{state="FAILED"})"), 0);
  EXPECT_GE(Value(R"(sum(hlab_worker_report_errors_total))"), 1)
      << "the worker's calls before the coordinator started";
  // The sweep's series end with the sweep.
  EXPECT_TRUE(wait_for(
      "sweep series gone",
      [&] { return Query(R"(hlab_sweep_runs{sweep="deploy"})").empty(); }, 30));

  // Every metric the dashboard and the alerts use was scraped (dcgm-exporter's
  // excepted: no GPUs here).
  absl::StatusOr<std::string> names_body =
      HttpGet("127.0.0.1", prometheus_port_, "/api/v1/label/__name__/values");
  ASSERT_TRUE(names_body.ok()) << names_body.status();
  const Json names = Json::parse(*names_body);
  std::set<std::string> scraped;
  for (const Json& n : names.at("data")) scraped.insert(n.get<std::string>());
  std::set<std::string> used =
      DashboardMetricNames(kSource / "deploy/grafana/dashboards/hlab.json");
  for (const std::string& n :
       AlertMetricNames(kSource / "deploy/prometheus/hlab-alerts.yml")) {
    used.insert(n);
  }
  EXPECT_GE(used.size(), 20u);
  for (const std::string& name : used) {
    if (name.rfind("DCGM_FI_", 0) == 0) continue;
    EXPECT_EQ(scraped.count(name), 1u)
        << name
        << " is used by the dashboard or an alert but no endpoint "
           "exported it";
  }

  // The alerting rules loaded and evaluate without errors.
  absl::StatusOr<std::string> rules_body =
      HttpGet("127.0.0.1", prometheus_port_, "/api/v1/rules");
  ASSERT_TRUE(rules_body.ok()) << rules_body.status();
  const Json loaded = Json::parse(*rules_body);
  int rules = 0;
  for (const Json& group : loaded.at("data").at("groups")) {
    for (const Json& rule : group["rules"]) {
      ++rules;
      EXPECT_NE(rule.value("health", ""), "err")
          << rule.value("name", "") << ": " << rule.value("lastError", "");
    }
  }
  EXPECT_EQ(rules, 12);
  // Nothing is wrong with this fleet: no alert fires.
  EXPECT_TRUE(Query(R"(ALERTS{alertstate="firing"})").empty())
      << Query(R"(ALERTS{alertstate="firing"})").dump();
}

}  // namespace
}  // namespace hlab::deploy_testing
