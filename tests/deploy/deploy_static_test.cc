// Static checks of deploy/: the Grafana dashboard's JSON and structure, the
// Kubernetes manifests' required fields, the Dockerfiles against
// scripts/setup.sh (the one package list), the systemd units, and the Slurm
// script, which is also run with a stand-in worker to see that SIGUSR1
// drains it. Whether the metrics the dashboard and the alerts use exist on
// live endpoints is checked by deploy_prometheus_test, during a sweep.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/deploy/daemons.h"
#include "tests/deploy/deploy_files.h"

namespace hlab::deploy_testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kSource = HLAB_SOURCE_DIR;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ------------------------------------------------------------------ Grafana

TEST(GrafanaDashboardTest, ParsesWithRowsVariablesAndQueries) {
  const Json dash =
      Json::parse(ReadText(kSource / "deploy/grafana/dashboards/hlab.json"));
  EXPECT_EQ(dash.at("uid"), "hlab-overview");
  std::set<std::string> rows;
  std::set<int> ids;
  int queries = 0;
  for (const Json& panel : dash.at("panels")) {
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second)
        << "duplicate panel id " << panel.at("id");
    const Json& pos = panel.at("gridPos");
    EXPECT_LE(pos.at("x").get<int>() + pos.at("w").get<int>(), 24)
        << panel.at("title");
    if (panel.at("type") == "row") {
      rows.insert(panel.at("title").get<std::string>());
      continue;
    }
    ASSERT_FALSE(panel.at("targets").empty()) << panel.at("title");
    for (const Json& target : panel.at("targets")) {
      const std::string expr = target.at("expr");
      EXPECT_FALSE(expr.empty()) << panel.at("title");
      EXPECT_FALSE(MetricNames(expr).empty())
          << panel.at("title") << ": " << expr;
      ++queries;
    }
  }
  EXPECT_GE(queries, 15);
  for (const char* row : {"Fleet", "Runs", "Coordinator",
                          "GPUs (dcgm-exporter, where installed)"}) {
    EXPECT_EQ(rows.count(row), 1u) << row;
  }
  std::map<std::string, Json> vars;
  for (const Json& v : dash.at("templating").at("list")) vars[v.at("name")] = v;
  ASSERT_EQ(vars.count("sweep"), 1u);
  ASSERT_EQ(vars.count("run"), 1u);
  EXPECT_EQ(vars["sweep"].at("definition"),
            "label_values(hlab_sweep_runs, sweep)");
  EXPECT_EQ(vars["run"].at("definition"), "label_values(hlab_run_loss, run)");
  // Every metric used is hlab's or dcgm-exporter's, and the GPU row uses
  // dcgm-exporter's.
  const std::set<std::string> names =
      DashboardMetricNames(kSource / "deploy/grafana/dashboards/hlab.json");
  int dcgm = 0;
  for (const std::string& name : names) {
    EXPECT_TRUE(absl::StartsWith(name, "hlab_") ||
                absl::StartsWith(name, "DCGM_FI_") || name == "up")
        << name;
    dcgm += absl::StartsWith(name, "DCGM_FI_");
  }
  EXPECT_GE(dcgm, 2);
}

TEST(GrafanaDashboardTest, ProvisioningPointsAtTheDashboard) {
  const YAML::Node dashboards = YAML::LoadFile(
      (kSource / "deploy/grafana/provisioning/dashboards/hlab.yml").string());
  EXPECT_EQ(dashboards["apiVersion"].as<int>(), 1);
  const YAML::Node provider = dashboards["providers"][0];
  EXPECT_EQ(provider["type"].as<std::string>(), "file");
  EXPECT_FALSE(provider["options"]["path"].as<std::string>().empty());
  const YAML::Node sources = YAML::LoadFile(
      (kSource / "deploy/grafana/provisioning/datasources/prometheus.yml")
          .string());
  EXPECT_EQ(sources["datasources"][0]["type"].as<std::string>(), "prometheus");
}

// --------------------------------------------------------------- Kubernetes

std::vector<YAML::Node> LoadManifests(const std::string& name) {
  std::vector<YAML::Node> docs;
  for (const YAML::Node& doc :
       YAML::LoadAllFromFile((kSource / "deploy/kubernetes" / name).string())) {
    if (doc.IsNull()) continue;
    docs.push_back(doc);
  }
  return docs;
}

// The one document of `kind` named `name` in `docs`.
YAML::Node Find(const std::vector<YAML::Node>& docs, const std::string& kind,
                const std::string& name) {
  for (const YAML::Node& doc : docs) {
    if (doc["kind"].as<std::string>() == kind &&
        doc["metadata"]["name"].as<std::string>() == name) {
      return doc;
    }
  }
  ADD_FAILURE() << "no " << kind << " " << name;
  return YAML::Node();
}

TEST(KubernetesTest, EveryManifestHasItsRequiredFields) {
  int documents = 0;
  for (const auto& entry :
       fs::directory_iterator(kSource / "deploy/kubernetes")) {
    if (entry.path().extension() != ".yaml" ||
        entry.path().filename() == "kustomization.yaml") {
      continue;
    }
    for (const YAML::Node& doc : LoadManifests(entry.path().filename())) {
      ++documents;
      SCOPED_TRACE(entry.path().filename().string());
      ASSERT_TRUE(doc["apiVersion"].IsScalar());
      ASSERT_TRUE(doc["kind"].IsScalar());
      ASSERT_TRUE(doc["metadata"]["name"].IsScalar());
      const std::string kind = doc["kind"].as<std::string>();
      if (kind != "Namespace") {
        EXPECT_EQ(doc["metadata"]["namespace"].as<std::string>(), "hlab");
      }
      if (kind == "StatefulSet" || kind == "DaemonSet" ||
          kind == "Deployment") {
        const YAML::Node spec = doc["spec"];
        const YAML::Node match = spec["selector"]["matchLabels"];
        ASSERT_TRUE(match.IsMap());
        for (const auto& label : match) {
          EXPECT_EQ(spec["template"]["metadata"]["labels"]
                        [label.first.as<std::string>()]
                            .as<std::string>(),
                    label.second.as<std::string>())
              << "selector does not match the pod template";
        }
        for (const YAML::Node& c : spec["template"]["spec"]["containers"]) {
          EXPECT_TRUE(c["name"].IsScalar());
          EXPECT_TRUE(c["image"].IsScalar());
        }
      }
    }
  }
  EXPECT_GE(documents, 7);
}

TEST(KubernetesTest, CoordinatorIsOneReplicaOnABlockVolumeWithGrpcProbes) {
  const auto docs = LoadManifests("coordinator.yaml");
  const YAML::Node set = Find(docs, "StatefulSet", "hlab-coordinator");
  EXPECT_EQ(set["spec"]["replicas"].as<int>(), 1);
  const YAML::Node claim = set["spec"]["volumeClaimTemplates"][0];
  EXPECT_EQ(claim["spec"]["accessModes"][0].as<std::string>(), "ReadWriteOnce");
  EXPECT_EQ(claim["spec"]["volumeMode"].as<std::string>(), "Filesystem");
  const YAML::Node pod = set["spec"]["template"]["spec"];
  const YAML::Node c = pod["containers"][0];
  std::string args;
  for (const YAML::Node& a : c["args"]) args += a.as<std::string>() + " ";
  // The database is on the claim's mount.
  std::string data_mount;
  for (const YAML::Node& m : c["volumeMounts"]) {
    if (m["name"].as<std::string>() ==
        claim["metadata"]["name"].as<std::string>())
      data_mount = m["mountPath"].as<std::string>();
  }
  ASSERT_FALSE(data_mount.empty());
  EXPECT_NE(args.find("--db=" + data_mount + "/"), std::string::npos) << args;
  EXPECT_NE(args.find("--tokens-file="), std::string::npos) << args;
  for (const char* probe :
       {"startupProbe", "readinessProbe", "livenessProbe"}) {
    EXPECT_EQ(c[probe]["grpc"]["port"].as<int>(), 50151) << probe;
  }
  // The Service selects the pods and names the ports.
  const YAML::Node service = Find(docs, "Service", "hlab-coordinator");
  for (const auto& label : service["spec"]["selector"]) {
    EXPECT_EQ(pod.IsNull(), false);
    EXPECT_EQ(set["spec"]["template"]["metadata"]["labels"]
                 [label.first.as<std::string>()]
                     .as<std::string>(),
              label.second.as<std::string>());
  }
  std::set<std::string> ports;
  for (const YAML::Node& p : service["spec"]["ports"])
    ports.insert(p["name"].as<std::string>());
  EXPECT_EQ(ports, (std::set<std::string>{"grpc", "metrics"}));
  EXPECT_EQ(
      set["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"]
          .as<std::string>(),
      "9151");
}

TEST(KubernetesTest, WorkersRequestGpusAndHaveTimeToCheckpoint) {
  const auto docs = LoadManifests("workers.yaml");
  const YAML::Node set = Find(docs, "StatefulSet", "hlab-worker");
  const YAML::Node pod = set["spec"]["template"]["spec"];
  const YAML::Node c = pod["containers"][0];
  EXPECT_GE(c["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 1);
  EXPECT_FALSE(c["resources"]["requests"]["nvidia.com/gpu"].IsDefined())
      << "GPUs go in limits only";
  int kill_grace = 30;  // hlab-worker's default
  std::string args;
  for (const YAML::Node& a : c["args"]) {
    const std::string arg = a.as<std::string>();
    args += arg + " ";
    if (absl::StartsWith(arg, "--kill-grace=")) {
      ASSERT_TRUE(absl::SimpleAtoi(arg.substr(13), &kill_grace));
    }
  }
  EXPECT_GT(pod["terminationGracePeriodSeconds"].as<int>(), kill_grace + 60)
      << "no time to checkpoint before SIGKILL";
  EXPECT_NE(args.find("--token-file="), std::string::npos);
  EXPECT_NE(args.find("--name=$(POD_NAME)"), std::string::npos);
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
            "metadata.name");
  EXPECT_EQ(Find(docs, "Service", "hlab-worker")["spec"]["clusterIP"]
                .as<std::string>(),
            "None");
}

TEST(KubernetesTest, SecretsExistForEveryMountedToken) {
  std::map<std::string, std::set<std::string>> secrets;  // name -> keys
  for (const YAML::Node& doc : LoadManifests("secrets.yaml")) {
    ASSERT_EQ(doc["kind"].as<std::string>(), "Secret");
    for (const auto& kv : doc["stringData"]) {
      secrets[doc["metadata"]["name"].as<std::string>()].insert(
          kv.first.as<std::string>());
    }
  }
  // The kustomization generates the same Secrets with the same keys.
  const YAML::Node kustomization = YAML::LoadFile(
      (kSource / "deploy/kubernetes/kustomization.yaml").string());
  for (const YAML::Node& gen : kustomization["secretGenerator"]) {
    std::set<std::string> keys;
    for (const YAML::Node& f : gen["files"]) {
      const std::string file = f.as<std::string>();
      keys.insert(file.substr(0, file.find('=')));
    }
    EXPECT_EQ(keys, secrets[gen["name"].as<std::string>()]);
  }
  for (const YAML::Node& r : kustomization["resources"]) {
    EXPECT_TRUE(fs::exists(kSource / "deploy/kubernetes" / r.as<std::string>()))
        << r;
  }
  int mounted = 0;
  for (const char* file : {"coordinator.yaml", "workers.yaml"}) {
    for (const YAML::Node& doc : LoadManifests(file)) {
      if (doc["kind"].as<std::string>() != "StatefulSet") continue;
      const YAML::Node pod = doc["spec"]["template"]["spec"];
      for (const YAML::Node& v : pod["volumes"]) {
        if (!v["secret"]) continue;
        ++mounted;
        const std::string name = v["secret"]["secretName"].as<std::string>();
        EXPECT_EQ(secrets.count(name), 1u) << name;
        // The flag names a file of that Secret's mount.
        const YAML::Node c = pod["containers"][0];
        std::string mount;
        for (const YAML::Node& m : c["volumeMounts"]) {
          if (m["name"].as<std::string>() == v["name"].as<std::string>())
            mount = m["mountPath"].as<std::string>();
        }
        bool named = false;
        for (const YAML::Node& a : c["args"]) {
          for (const std::string& key : secrets[name]) {
            named |= absl::EndsWith(a.as<std::string>(), mount + "/" + key);
          }
        }
        EXPECT_TRUE(named) << "no flag reads a key of secret " << name;
      }
    }
  }
  EXPECT_EQ(mounted, 2);
}

TEST(KubernetesTest, ServiceMonitorScrapesPortsTheServicesHave) {
  const YAML::Node monitor = LoadManifests("servicemonitor.yaml").at(0);
  ASSERT_EQ(monitor["kind"].as<std::string>(), "ServiceMonitor");
  const std::string port =
      monitor["spec"]["endpoints"][0]["port"].as<std::string>();
  for (const auto& [file, name] :
       std::vector<std::pair<std::string, std::string>>{
           {"coordinator.yaml", "hlab-coordinator"},
           {"workers.yaml", "hlab-worker"}}) {
    const YAML::Node service = Find(LoadManifests(file), "Service", name);
    bool has_port = false;
    for (const YAML::Node& p : service["spec"]["ports"])
      has_port |= p["name"].as<std::string>() == port;
    EXPECT_TRUE(has_port) << name;
    for (const auto& label : monitor["spec"]["selector"]["matchLabels"]) {
      EXPECT_EQ(service["metadata"]["labels"][label.first.as<std::string>()]
                    .as<std::string>(),
                label.second.as<std::string>())
          << name;
    }
  }
}

// ------------------------------------------------------------- Dockerfiles

TEST(DockerfileTest, InstallsExactlySetupShPackagesAndRunsAsAUser) {
  const Finished printed =
      RunToEnd({"/bin/bash", (kSource / "scripts/setup.sh").string(),
                "--print-packages"});
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  std::set<std::string> setup_packages;
  for (absl::string_view line : absl::StrSplit(printed.output, '\n')) {
    if (!line.empty()) setup_packages.insert(std::string(line));
  }
  EXPECT_GE(setup_packages.size(), 20u);
  EXPECT_EQ(setup_packages.count("prometheus"), 1u);

  for (const char* name : {"Dockerfile", "Dockerfile.cuda"}) {
    SCOPED_TRACE(name);
    const std::vector<DockerInstruction> lines =
        ParseDockerfile(ReadText(kSource / "deploy/docker" / name));
    ASSERT_FALSE(lines.empty());
    size_t first = 0;
    while (first < lines.size() && lines[first].op == "ARG") ++first;
    ASSERT_LT(first, lines.size());
    EXPECT_EQ(lines[first].op, "FROM");
    bool runs_setup = false, user = false;
    std::string last_user;
    for (const DockerInstruction& in : lines) {
      if (in.op == "FROM") {
        const std::string image = in.args.substr(0, in.args.find(' '));
        EXPECT_NE(image.find(':'), std::string::npos) << "unpinned " << image;
        EXPECT_EQ(image.find(":latest"), std::string::npos) << image;
        last_user.clear();
      }
      if (in.op == "USER") last_user = in.args;
      if (in.op == "COPY" && !absl::StartsWith(in.args, "--from")) {
        const std::string src = in.args.substr(0, in.args.find(' '));
        EXPECT_TRUE(fs::exists(kSource / src)) << "COPY " << src;
      }
      if (in.op != "RUN") continue;
      runs_setup |= in.args.find("scripts/setup.sh") != std::string::npos;
      for (const std::string& pkg : AptInstalledPackages(in.args)) {
        // NVIDIA's repository: the CUDA toolkit and NCCL's headers.
        const bool cuda =
            std::string(name) == "Dockerfile.cuda" &&
            (absl::StartsWith(pkg, "cuda-toolkit-") || pkg == "libnccl-dev");
        EXPECT_TRUE(setup_packages.count(pkg) == 1 || cuda)
            << "apt-get installs " << pkg
            << ", which scripts/setup.sh does not: add it there";
      }
      if (in.args.find("apt-get install") != std::string::npos) {
        EXPECT_NE(in.args.find("--no-install-recommends"), std::string::npos)
            << in.args;
      }
    }
    user = !last_user.empty() && last_user != "root" && last_user != "0";
    EXPECT_TRUE(runs_setup) << "the image must be built by scripts/setup.sh";
    EXPECT_TRUE(user) << "the final stage runs as root";
  }
  struct stat st {};
  ASSERT_EQ(
      ::stat((kSource / "deploy/docker/runtime-packages.sh").c_str(), &st), 0);
  EXPECT_TRUE(st.st_mode & S_IXUSR);
}

TEST(DockerfileTest, RuntimePackagesOfABinaryAreItsLibrariesOwners) {
  const Finished found =
      RunToEnd({(kSource / "deploy/docker/runtime-packages.sh").string(),
                std::string(HLAB_BIN_DIR) + "/hlab-coordinator"});
  ASSERT_EQ(found.exit_code, 0) << found.output;
  for (const char* pkg : {"libc6", "libsqlite3-0", "libstdc++6"}) {
    EXPECT_NE(found.output.find(std::string(pkg) + "\n"), std::string::npos)
        << pkg << " in:\n"
        << found.output;
  }
  // hlab-coordinator does not link LibTorch.
  EXPECT_EQ(found.output.find("libtorch"), std::string::npos) << found.output;
}

// ----------------------------------------------------------------- systemd

std::multimap<std::string, std::string> UnitKeys(const fs::path& path) {
  std::multimap<std::string, std::string> keys;
  std::string joined;
  for (absl::string_view raw : absl::StrSplit(ReadText(path), '\n')) {
    std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty() || line[0] == '#' || line[0] == '[') continue;
    if (!line.empty() && line.back() == '\\') {
      joined += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    line = joined + line;
    joined.clear();
    const size_t eq = line.find('=');
    if (eq != std::string::npos)
      keys.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return keys;
}

TEST(SystemdTest, UnitsRestartKeepSecretsAndUseTheirDataDirectory) {
  for (const char* name : {"hlab-coordinator", "hlab-worker"}) {
    SCOPED_TRACE(name);
    const auto keys =
        UnitKeys(kSource / "deploy/systemd" / (std::string(name) + ".service"));
    auto value = [&](const std::string& key) {
      auto it = keys.find(key);
      return it == keys.end() ? std::string() : it->second;
    };
    EXPECT_EQ(value("Restart"), "on-failure");
    EXPECT_EQ(value("RestartPreventExitStatus"), "2");
    const std::string exec = value("ExecStart");
    EXPECT_NE(exec.find("/" + std::string(name) + " "), std::string::npos);
    const std::string state = value("StateDirectory");
    ASSERT_FALSE(state.empty());
    EXPECT_TRUE(
        std::regex_search(exec, std::regex("/var/lib/" + state + "[/ ]")))
        << exec;
    EXPECT_NE(exec.find("${CREDENTIALS_DIRECTORY}/"), std::string::npos)
        << "token files come through LoadCredential";
    EXPECT_NE(value("User"), "");
    EXPECT_NE(value("User"), "root");
  }
  const auto worker = UnitKeys(kSource / "deploy/systemd/hlab-worker.service");
  EXPECT_EQ(worker.find("KillMode")->second, "mixed");
  EXPECT_EQ(worker.find("TimeoutStopSec")->second, "300s");
}

TEST(SystemdTest, UnitsPassSystemdAnalyzeVerify) {
  if (!fs::exists("/usr/bin/systemd-analyze")) {
    GTEST_SKIP() << "systemd-analyze not installed";
  }
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hlab_units_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* name : {"hlab-coordinator", "hlab-worker"}) {
    std::string text =
        ReadText(kSource / "deploy/systemd" / (std::string(name) + ".service"));
    // The binaries are installed in /usr/local/bin; here they are built.
    const std::string from = "/usr/local/bin/";
    for (size_t at; (at = text.find(from)) != std::string::npos;) {
      text.replace(at, from.size(), std::string(HLAB_BIN_DIR) + "/");
    }
    std::ofstream(dir / (std::string(name) + ".service")) << text;
  }
  const Finished verified =
      RunToEnd({"/usr/bin/systemd-analyze", "verify", "--man=no",
                (dir / "hlab-coordinator.service").string(),
                (dir / "hlab-worker.service").string()});
  EXPECT_EQ(verified.exit_code, 0) << verified.output;
  EXPECT_EQ(verified.output, "") << verified.output;
  fs::remove_all(dir);
}

// ------------------------------------------------------------------- Slurm

TEST(SlurmTest, ScriptAsksForGpusASignalAndRequeue) {
  std::map<std::string, std::string> sbatch;
  for (absl::string_view line : absl::StrSplit(
           ReadText(kSource / "deploy/slurm/hlab-worker.sbatch"), '\n')) {
    if (!absl::ConsumePrefix(&line, "#SBATCH --")) continue;
    const size_t eq = line.find('=');
    sbatch[std::string(line.substr(0, eq))] =
        eq == absl::string_view::npos ? "" : std::string(line.substr(eq + 1));
  }
  EXPECT_EQ(sbatch.count("array"), 1u);
  EXPECT_EQ(sbatch.count("requeue"), 1u);
  EXPECT_GE(std::stoi(sbatch["gpus-per-task"]), 1);
  std::smatch signal;
  ASSERT_TRUE(
      std::regex_match(sbatch["signal"], signal, std::regex(R"(B:USR1@(\d+))")))
      << sbatch["signal"];
  EXPECT_GE(std::stoi(signal[1]), 120) << "too little time to checkpoint";
  const Finished syntax =
      RunToEnd({"/bin/bash", "-n",
                (kSource / "deploy/slurm/hlab-worker.sbatch").string()});
  EXPECT_EQ(syntax.exit_code, 0) << syntax.output;
}

// Runs the script as Slurm would (array task 3 of job 77) with a stand-in
// hlab-worker that records its flags and exits 0 on SIGTERM, then sends
// the script SIGUSR1 as --signal=B:USR1 does before the time limit.
TEST(SlurmTest, UsrOneDrainsTheWorkerAndTheJobEndsWithItsStatus) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       ("hlab_slurm_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "sd");
  std::ofstream(dir / "bin/hlab-worker")
      << "#!/bin/bash\n"
         "trap 'echo drained > \"$(dirname \"$0\")/../drained\"; exit 0' TERM\n"
         "echo \"$@\" > \"$(dirname \"$0\")/../args\"\n"
         "while true; do sleep 0.05; done\n";
  fs::permissions(dir / "bin/hlab-worker", fs::perms::owner_all);
  std::ofstream(dir / "token") << "tok\n";
  const std::string script =
      (kSource / "deploy/slurm/hlab-worker.sbatch").string();
  const std::string command =
      "SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=3 HLAB_COORDINATOR=c:50151 "
      "HLAB_TOKEN_FILE=" +
      (dir / "token").string() + " HLAB_BIN=" + (dir / "bin").string() +
      " TMPDIR=" + dir.string() +
      " HLAB_PROMETHEUS_SD_DIR=" + (dir / "sd").string() + " exec /bin/bash " +
      script + " 2>" + (dir / "log").string();
  Daemon job =
      Daemon::Start({"/bin/sh", "-c", command}, (dir / "log2").string());
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!fs::exists(dir / "args") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(dir / "args")) << ReadText(dir / "log");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string args = ReadText(dir / "args");
  EXPECT_NE(args.find("--name slurm-77-3"), std::string::npos) << args;
  EXPECT_NE(args.find("--metrics-listen 0.0.0.0:9203"), std::string::npos)
      << args;
  EXPECT_NE(args.find("--data-dir " + dir.string() + "/hlab-worker-slurm-77-3"),
            std::string::npos)
      << args;
  EXPECT_NE(args.find("--coordinator c:50151"), std::string::npos) << args;
  const std::string sd = ReadText(dir / "sd/slurm-77-3.json");
  EXPECT_NE(sd.find(":9203\""), std::string::npos) << sd;
  ASSERT_EQ(::kill(job.pid(), SIGUSR1), 0);
  int status = 0;
  const auto stop_by =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pid_t done = 0;
  while ((done = ::waitpid(job.pid(), &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < stop_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(done, job.pid()) << "the job did not end after SIGUSR1";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(fs::exists(dir / "drained")) << ReadText(dir / "log");
  EXPECT_FALSE(fs::exists(dir / "sd/slurm-77-3.json"))
      << "the file_sd target outlived the job";
  job.Release();  // reaped above
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hlab::deploy_testing
