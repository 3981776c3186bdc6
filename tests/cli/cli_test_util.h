// Shared by the CLI's client tests: a fixture with a FakeClientService on
// 127.0.0.1:0 that runs `hlab` commands against it, and small helpers.
//
// Thread-compatible (one test thread).
//
//   TEST_F(CliClientTest, Runs) {
//     fake_.list_runs.add_runs()->set_run_id("0123456789abcdef");
//     Result r = Hlab({"runs", "--format", "csv"});
//   }
#ifndef HLAB_TESTS_CLI_CLI_TEST_UTIL_H_
#define HLAB_TESTS_CLI_CLI_TEST_UTIL_H_

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cli/cli.h"
#include "tests/cli/fake_client_service.h"

namespace hlab::cli::testing {

struct Result {
  int code;
  std::string out;
  std::string err;
};

inline int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

class CliClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"HLAB_ADDRESS", "HLAB_TOKEN", "HLAB_TOKEN_FILE",
                             "HLAB_TLS_CA", "HLAB_TLS_CERT", "HLAB_TLS_KEY"}) {
      unsetenv(name);
    }
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  void Start() {
    server_ = fake_.Serve();
    ASSERT_NE(server_, nullptr);
  }

  // Runs hlab with `args` plus --address of the fake.
  Result Hlab(std::vector<std::string> args) {
    if (server_ == nullptr) Start();
    args.push_back("--address");
    args.push_back(fake_.address());
    std::ostringstream out, err;
    const int code = RunCli(args, out, err);
    return {code, out.str(), err.str()};
  }

  FakeClientService fake_;
  std::unique_ptr<grpc::Server> server_;
};

inline std::string Example(const std::string& name) {
  return std::string(HLAB_SOURCE_DIR) + "/examples/sweeps/" + name;
}

inline std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace hlab::cli::testing

#endif  // HLAB_TESTS_CLI_CLI_TEST_UTIL_H_
