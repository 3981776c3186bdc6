// The hlab command dispatcher and `hlab submit --dry-run`.
#include "cli/cli.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "hlab/v1/client_service.pb.h"

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

std::string Example(const std::string& name) {
  return std::string(HLAB_SOURCE_DIR) + "/examples/sweeps/" + name;
}

int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(CliTest, HelpListsEveryCommand) {
  for (const char* flag : {"help", "--help", "-h"}) {
    const Result r = Hlab({flag});
    EXPECT_EQ(r.code, kExitOk);
    for (const char* command :
         {"submit", "status", "watch", "runs", "query", "resume", "cancel",
          "workers", "drain", "undrain", "eval", "fit", "replay", "report",
          "up"}) {
      EXPECT_NE(r.out.find(std::string("  ") + command), std::string::npos)
          << command;
    }
    EXPECT_NE(r.out.find("exit codes"), std::string::npos);
  }
}

TEST(CliTest, CommandHelpPrintsUsage) {
  const Result r = Hlab({"submit", "--help"});
  EXPECT_EQ(r.code, kExitOk);
  EXPECT_NE(r.out.find("usage: hlab submit"), std::string::npos);
  EXPECT_EQ(Hlab({"help", "submit"}).out, r.out);
}

TEST(CliTest, UnknownCommandIsOneLineUsageError) {
  const Result r = Hlab({"frobnicate"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_EQ(Lines(r.err), 1);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos);
  EXPECT_NE(r.err.find("hlab help"), std::string::npos);
  EXPECT_EQ(Hlab({}).code, kExitUsage);
}

TEST(CliTest, ReportWithoutOutOrSweepIsOneLineUsageError) {
  Result r = Hlab({"report", "--db", "x.db"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--out DIR is required"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err), 1);
  r = Hlab({"report", "--out", "dir"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--sweep ID"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err), 1);
}

TEST(CliTest, UpRefusesBadFlagsInOneLine) {
  const Result r = Hlab({"up", "--workers", "zero"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_NE(r.err.find("--workers must be a positive integer"),
            std::string::npos);
  EXPECT_EQ(Lines(r.err), 1);
  const Result capacity = Hlab({"up", "--capacity", "0"});
  EXPECT_EQ(capacity.code, kExitUsage);
  EXPECT_NE(capacity.err.find("--capacity must be a positive integer"),
            std::string::npos)
      << capacity.err;
  EXPECT_EQ(Lines(capacity.err), 1);
}

TEST(CliTest, DryRunPrintsThePlanOfTheDemo) {
  const Result r = Hlab({"submit", "--dry-run", Example("demo.yaml")});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_TRUE(r.err.empty());
  EXPECT_NE(r.out.find("run id"), std::string::npos);
  EXPECT_NE(r.out.find("with WSD trunk sharing"), std::string::npos);
  EXPECT_NE(r.out.find("without WSD trunk sharing"), std::string::npos);
  EXPECT_NE(r.out.find("swa-64"), std::string::npos);
}

TEST(CliTest, DryRunJsonIsTheSubmitResponse) {
  const Result r =
      Hlab({"submit", "--dry-run", "--json", Example("demo.yaml")});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  hlab::v1::SubmitSweepResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(r.out, &response).ok());
  EXPECT_EQ(response.sweep().name(), "demo");
  EXPECT_EQ(response.runs_size(), 48);
  EXPECT_EQ(response.sweep().runs_total(), 48);
  EXPECT_FALSE(response.tasks().empty());
  EXPECT_GT(response.flops_unshared(), response.flops_shared());
}

TEST(CliTest, DryRunOfThePaperGrid) {
  const Result r = Hlab({"submit", "--dry-run", Example("paper.yaml")});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("swa-128-nope"), std::string::npos);
}

TEST(CliTest, MissingFileIsOneLineError) {
  const Result r = Hlab({"submit", "--dry-run", "/nonexistent/x.yaml"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(Lines(r.err), 1);
  EXPECT_NE(r.err.find("no such file"), std::string::npos);
}

TEST(CliTest, InvalidSpecNamesTheField) {
  const std::string path = testing::TempDir() + "/bad_spec.yaml";
  {
    std::ofstream f(path);
    f << "name: bad\narchitectures: [full]\nscales: [{name: A, d_model: 32, "
         "n_layers: 2, n_heads: 4}]\nbudgets: {tokens_per_param: [5]}\n"
         "seq_len: 64\nbatch_tokens: 100\nschedule: {peak_lr: 0.001}\n";
  }
  const Result r = Hlab({"submit", "--dry-run", path});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(Lines(r.err), 1);
  EXPECT_NE(r.err.find("batch_tokens"), std::string::npos) << r.err;
}

TEST(CliTest, SubmitWarnsOfAPreparedPathMissingHere) {
  const std::string path = testing::TempDir() + "/prepared_spec.yaml";
  {
    std::ofstream f(path);
    f << "name: prep\narchitectures: [full]\nscales: [{name: A, d_model: 32, "
         "n_layers: 2, n_heads: 4}]\nbudgets: {tokens_per_param: [20]}\n"
         "seq_len: 64\nbatch_tokens: 256\nschedule: {peak_lr: 0.001}\n"
         "data: {source: prepared, path: /nonexistent/prepared/c4}\n";
  }
  const Result r = Hlab({"submit", "--dry-run", path});
  EXPECT_EQ(r.code, kExitOk) << r.err;  // a warning: workers may have it
  EXPECT_NE(r.err.find("warning: data.path '/nonexistent/prepared/c4' does "
                       "not exist on this machine"),
            std::string::npos)
      << r.err;
  // Nothing said for a path that exists.
  const std::string here = testing::TempDir() + "/prepared_spec_here.yaml";
  {
    std::ofstream f(here);
    f << "name: prep\narchitectures: [full]\nscales: [{name: A, d_model: 32, "
         "n_layers: 2, n_heads: 4}]\nbudgets: {tokens_per_param: [20]}\n"
         "seq_len: 64\nbatch_tokens: 256\nschedule: {peak_lr: 0.001}\n"
         "data: {source: prepared, path: "
      << testing::TempDir() << "}\n";
  }
  const Result ok = Hlab({"submit", "--dry-run", here});
  EXPECT_EQ(ok.code, kExitOk) << ok.err;
  EXPECT_EQ(ok.err.find("warning"), std::string::npos) << ok.err;
}

TEST(CliTest, SubmitUsageErrors) {
  EXPECT_EQ(Hlab({"submit"}).code, kExitUsage);
  EXPECT_EQ(Hlab({"submit", "--dry-run", "a.yaml", "b.yaml"}).code, kExitUsage);
  EXPECT_EQ(Hlab({"submit", "--bogus", "a.yaml"}).code, kExitUsage);
  // Submitting to a coordinator: tests/cli/cli_client_test.cc.
}

TEST(CliTest, ClientCommandsCheckTheirArgumentsOffline) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"watch"},
                                             {"query"},
                                             {"runs", "--format", "xml"},
                                             {"runs", "--state", "exploded"},
                                             {"cancel"},
                                             {"resume", "a", "b"},
                                             {"workers", "--bogus"},
                                             {"runs", "--timeout", "0"},
                                             {"status", "--timeout=soon"}}) {
    const Result r = Hlab(args);
    EXPECT_EQ(r.code, kExitUsage) << args[0];
    EXPECT_EQ(Lines(r.err), 1) << r.err;
  }
}

}  // namespace
}  // namespace hlab::cli
