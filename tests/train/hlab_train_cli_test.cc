// hlab-train as the worker meets it: exit codes, error messages, nothing
// written on bad input, and kill -9 followed by an exact resume.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string out, err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HlabTrainCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("hlab_cli_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  Json Task() {
    Json j = Json::parse(R"({
      "model": {"arch": "swa-16", "d_model": 32, "n_layers": 2, "n_heads": 2,
                "n_kv_heads": 1, "vocab_size": 258},
      "seq_len": 32, "batch_tokens": 256, "budget_tokens": 25600,
      "schedule": {"warmup_steps": 5}, "threads": 1,
      "eval": {"sequences": 0}
    })");
    j["checkpoint"] = {{"dir", (root_ / "ckpt").string()}};
    return j;
  }

  Result Run(const Json& task, const std::string& extra = "") {
    const fs::path task_path = root_ / "task.json";
    std::ofstream(task_path) << task.dump(2);
    const std::string cmd = std::string(HLAB_TRAIN_BIN) + " --task " +
                            task_path.string() + " " + extra + " > " +
                            (root_ / "out").string() + " 2> " +
                            (root_ / "err").string();
    const int status = std::system(cmd.c_str());
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(root_ / "out");
    r.err = ReadFile(root_ / "err");
    return r;
  }

  // The loss of every step record, by step.
  static std::map<int64_t, std::string> Losses(const std::string& records) {
    std::map<int64_t, std::string> losses;
    std::istringstream in(records);
    std::string line;
    while (std::getline(in, line)) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded() || j.value("type", "") != "step") continue;
      losses[j["step"].get<int64_t>()] = j["loss"].dump();
    }
    return losses;
  }

  fs::path root_;
};

TEST_F(HlabTrainCliTest, BadTasksArePermanentFailuresThatWriteNothing) {
  struct Case {
    std::string name, field;
    Json task;
  };
  std::vector<Case> cases;
  Json j = Task();
  j["learning_rate"] = 0.1;
  cases.push_back({"unknown field", "learning_rate", j});
  j = Task();
  j["budget_tokens"] = 256 * 4;
  cases.push_back({"budget below warmup", "budget_tokens", j});
  j = Task();
  j["batch_tokens"] = 300;
  cases.push_back({"batch not whole sequences", "batch_tokens", j});
  j = Task();
  j["data"] = {{"source", "prepared"},
               {"long_dir", (root_ / "missing-long").string()},
               {"short_dir", (root_ / "missing-short").string()}};
  cases.push_back({"missing data", "missing-", j});
  j = Task();
  j["device"] = "gpu";
  cases.push_back({"unknown device", "device: must be \"cpu\" or \"cuda\"", j});
  for (const Case& c : cases) {
    const Result r = Run(c.task);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.field), std::string::npos)
        << c.name << ": " << r.err;
    EXPECT_NE(r.out.find("\"type\":\"error\""), std::string::npos) << c.name;
    EXPECT_FALSE(fs::exists(root_ / "ckpt")) << c.name;
  }
}

TEST_F(HlabTrainCliTest, CudaOnACpuOnlyBuildIsAPermanentErrorNamingTheField) {
  const Json probe = Json::parse(Run(Task(), "--probe-devices").out);
  if (probe.value("cuda_build", false)) {
    GTEST_SKIP() << "this hlab-train has CUDA";
  }
  EXPECT_TRUE(probe["cuda"].empty());
  Json j = Task();
  j["device"] = "cuda";
  const Result r = Run(j);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("device: \"cuda\", but this hlab-train was built "
                       "against a CPU-only LibTorch (no CUDA)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(root_ / "ckpt"));
}

TEST_F(HlabTrainCliTest, CheckpointOfAnotherConfigIsRefusedAndKept) {
  Json j = Task();
  j["stop_at_tokens"] = 256 * 6;
  ASSERT_EQ(Run(j).exit_code, 0);
  const auto before = fs::directory_iterator(root_ / "ckpt");
  std::vector<std::string> names_before;
  for (const auto& e : before) names_before.push_back(e.path().filename());
  Json other = Task();
  other["model"]["d_model"] = 64;
  const Result r = Run(other);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("different model config"), std::string::npos) << r.err;
  std::vector<std::string> names_after;
  for (const auto& e : fs::directory_iterator(root_ / "ckpt")) {
    names_after.push_back(e.path().filename());
  }
  EXPECT_EQ(names_after, names_before);
}

// A checkpoint write the disk refuses (here RLIMIT_FSIZE, through `ulimit
// -f` with SIGXFSZ ignored: write(2) fails with EFBIG, as with ENOSPC on a
// full disk) exits 74, names the file and the error, leaves no temporary
// file, and keeps the checkpoints that were there.
TEST_F(HlabTrainCliTest,
       ACheckpointTheDiskRefusesExitsSeventyFourAndKeepsThePrevious) {
  Json j = Task();
  j["stop_at_tokens"] = 256 * 6;
  ASSERT_EQ(Run(j).exit_code, 0);
  std::vector<std::string> names_before;
  for (const auto& e : fs::directory_iterator(root_ / "ckpt")) {
    names_before.push_back(e.path().filename());
  }
  ASSERT_FALSE(names_before.empty());
  const fs::path task_path = root_ / "task.json";
  std::ofstream(task_path) << Task().dump(2);
  const std::string cmd =
      "bash -c \"trap '' XFSZ; ulimit -f 64; exec " +
      std::string(HLAB_TRAIN_BIN) + " --task " + task_path.string() + " > " +
      (root_ / "out").string() + " 2> " + (root_ / "err").string() + "\"";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  const std::string err = ReadFile(root_ / "err");
  EXPECT_EQ(WEXITSTATUS(status), 74) << err;
  EXPECT_NE(err.find("cannot write checkpoint"), std::string::npos) << err;
  EXPECT_NE(err.find("File too large"), std::string::npos) << err;
  std::vector<std::string> names_after;
  for (const auto& e : fs::directory_iterator(root_ / "ckpt")) {
    names_after.push_back(e.path().filename());
  }
  EXPECT_EQ(names_after, names_before);  // no .tmp, nothing pruned
}

TEST_F(HlabTrainCliTest, KillDashNineThenResumeReproducesTheLosses) {
  Json j = Task();
  j["checkpoint"]["every_steps"] = 3;
  // Uninterrupted reference in its own directory.
  Json reference = j;
  reference["checkpoint"]["dir"] = (root_ / "reference").string();
  const Result full = Run(reference);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const auto expected = Losses(full.out);
  ASSERT_EQ(expected.size(), 100u);

  // Start the same task, kill -9 it mid-run.
  const fs::path task_path = root_ / "killed.json";
  std::ofstream(task_path) << j.dump(2);
  const fs::path records = root_ / "killed.out";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string out = records.string();
    std::freopen(out.c_str(), "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execl(HLAB_TRAIN_BIN, HLAB_TRAIN_BIN, "--task", task_path.c_str(),
            static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  ASSERT_GT(pid, 0);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Losses(ReadFile(records)).size() < 40 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the trainer finished before the kill";
  const auto before_kill = Losses(ReadFile(records));
  ASSERT_LT(before_kill.size(), 100u);

  const Result resumed = Run(j);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto after = Losses(resumed.out);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.rbegin()->first, 100);
  // Resumed from a checkpoint at a multiple of 3 before the kill point.
  EXPECT_EQ((after.begin()->first - 1) % 3, 0);
  EXPECT_LE(after.begin()->first, static_cast<int64_t>(before_kill.size()) + 1);
  for (const auto& [step, loss] : after) {
    EXPECT_EQ(loss, expected.at(step)) << "step " << step;
  }
  for (const auto& [step, loss] : before_kill) {
    EXPECT_EQ(loss, expected.at(step)) << "step " << step;
  }
}

// A trunk resumed past a branch point says that branch checkpoint again
// (the attempt that wrote it may have died before its worker reported it,
// and the branch's decay waits for the report), with the same path and
// checksum; it is not written again.
TEST_F(HlabTrainCliTest, AResumedTrunkReportsItsEarlierBranchesAgain) {
  Json j = Task();
  j["branch_budgets_tokens"] = {12800, 25600};
  j["checkpoint"]["every_steps"] = 3;
  Json first = j;
  first["stop_at_tokens"] = 20480;  // past the first branch point only
  const Result a = Run(first);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto branches = [](const std::string& records) {
    std::vector<Json> out;
    std::istringstream in(records);
    std::string line;
    while (std::getline(in, line)) {
      Json r = Json::parse(line, nullptr, false);
      if (!r.is_discarded() && r.value("type", "") == "checkpoint" &&
          r.value("kind", "") == "branch") {
        out.push_back(r);
      }
    }
    return out;
  };
  const std::vector<Json> written = branches(a.out);
  ASSERT_EQ(written.size(), 1u) << a.out;
  const auto mtime = fs::last_write_time(written[0]["path"].get<std::string>());
  const Result b = Run(j);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::vector<Json> reported = branches(b.out);
  ASSERT_EQ(reported.size(), 2u) << b.out;
  EXPECT_EQ(reported[0], written[0]);
  EXPECT_EQ(reported[1]["branch_budget_tokens"], 25600);
  EXPECT_EQ(fs::last_write_time(written[0]["path"].get<std::string>()), mtime);
}

TEST_F(HlabTrainCliTest, DivergenceIsRetryableOnceThenPermanent) {
  Json j = Task();
  j["optimizer"] = {{"peak_lr", 1e30}, {"grad_clip", 1e30}};
  j["checkpoint"]["every_steps"] = 1;
  const Result first = Run(j);
  EXPECT_EQ(first.exit_code, 75) << first.err;
  EXPECT_NE(first.err.find("not finite at step"), std::string::npos)
      << first.err;
  const Result second = Run(j);
  EXPECT_EQ(second.exit_code, 3) << second.err;
  EXPECT_NE(second.err.find("second time"), std::string::npos) << second.err;
}

// A free loopback port (bind to 0, read it back, release it).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(HlabTrainCliTest, TwoDataParallelRanksMatchOneProcessAccumulating) {
  Json j = Task();
  j["budget_tokens"] = 256 * 12;
  j["micro_batch_tokens"] = 128;
  j.erase("checkpoint");
  const Result single = Run(j);
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const auto expected = Losses(single.out);
  ASSERT_EQ(expected.size(), 12u);

  const fs::path task_path = root_ / "dp.json";
  std::ofstream(task_path) << j.dump(2);
  const std::string port = std::to_string(FreePort());
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const std::string out =
          (root_ / ("rank" + std::to_string(rank))).string();
      std::freopen(out.c_str(), "w", stdout);
      std::freopen((out + ".err").c_str(), "w", stderr);
      const std::string r = std::to_string(rank);
      ::execl(HLAB_TRAIN_BIN, HLAB_TRAIN_BIN, "--task", task_path.c_str(),
              "--rank", r.c_str(), "--world-size", "2", "--master-port",
              port.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    ranks.push_back(pid);
  }
  for (pid_t pid : ranks) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << ReadFile(root_ / "rank0.err") << ReadFile(root_ / "rank1.err");
  }
  const auto parallel = Losses(ReadFile(root_ / "rank0"));
  ASSERT_EQ(parallel.size(), expected.size());
  // Rank 1 writes no records.
  EXPECT_TRUE(Losses(ReadFile(root_ / "rank1")).empty());
  // Same update up to the all-reduce's summation order (float32).
  for (const auto& [step, loss] : expected) {
    EXPECT_NEAR(std::stod(parallel.at(step)), std::stod(loss), 1e-5)
        << "step " << step;
  }
}

}  // namespace
