// hlab's connection to the coordinator: the address, bearer tokens (flag,
// file, environment), TLS, and the one-line errors for an unreachable or
// refusing coordinator, against a fake ClientService on 127.0.0.1:0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cli/cli.h"
#include "common/store_unavailable.h"
#include "tests/cli/cli_test_util.h"
#include "tests/cli/test_certificate.h"

namespace hlab::cli {
namespace {

using testing::CliClientTest;
using testing::Example;
using testing::Lines;
using testing::Result;
using testing::WriteTemp;

// A loopback port that is bound but not listening (connecting is refused)
// while `fd` stays open.
std::string RefusingAddress(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (*fd < 0 ||
      bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return "";
  }
  socklen_t len = sizeof(addr);
  getsockname(*fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

TEST_F(CliClientTest, UnreachableCoordinatorIsOneLineError) {
  int fd = -1;
  const std::string address = RefusingAddress(&fd);
  ASSERT_FALSE(address.empty());
  std::ostringstream out, err;
  const int code = RunCli({"runs", "--address", address}, out, err);
  close(fd);
  EXPECT_EQ(code, kExitFailed);
  EXPECT_EQ(Lines(err.str()), 1) << err.str();
  EXPECT_EQ(err.str(), "hlab runs: error: cannot reach the coordinator at " +
                           address +
                           " (connection refused); start one with `hlab up` "
                           "or `hlab-coordinator`, or set --address or "
                           "HLAB_ADDRESS\n");
}

// The real binary: gRPC's own log lines must not reach stderr either.
TEST_F(CliClientTest, BinaryPrintsExactlyOneLineWhenUnreachable) {
  int fd = -1;
  const std::string address = RefusingAddress(&fd);
  ASSERT_FALSE(address.empty());
  const std::string command =
      std::string(HLAB_BIN) + " workers --address " + address + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  close(fd);
  EXPECT_EQ(WEXITSTATUS(status), kExitFailed);
  EXPECT_EQ(Lines(output), 1) << output;
  EXPECT_EQ(
      output.rfind("hlab workers: error: cannot reach the coordinator", 0), 0u)
      << output;
}

TEST_F(CliClientTest, BadTlsFilesAreOneLineErrors) {
  const std::string not_pem = WriteTemp("not.pem", "hello\n");
  Result r = Hlab({"workers", "--tls-ca", not_pem});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(r.err, "hlab workers: error: --tls-ca '" + not_pem +
                       "' holds no PEM certificate; give the PEM file\n");
  setenv("HLAB_TLS_CA", "/nonexistent/ca.pem", 1);
  r = Hlab({"workers"});
  unsetenv("HLAB_TLS_CA");
  EXPECT_EQ(r.err,
            "hlab workers: error: cannot read HLAB_TLS_CA "
            "'/nonexistent/ca.pem'; check the path\n");
}

TEST_F(CliClientTest, TlsWithTheServersCa) {
  const testing::TestCertificate cert = testing::MakeTestCertificate();
  ASSERT_FALSE(cert.cert_pem.empty());
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({cert.key_pem, cert.cert_pem});
  server_ = fake_.Serve(grpc::SslServerCredentials(tls));
  ASSERT_NE(server_, nullptr);
  const std::string ca = WriteTemp("ca.pem", cert.cert_pem);
  fake_.required_token = "tls-token";
  Result r = Hlab({"workers", "--tls-ca", ca, "--token", "tls-token"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  setenv("HLAB_TLS_CA", ca.c_str(), 1);
  r = Hlab({"workers", "--token", "tls-token"});
  unsetenv("HLAB_TLS_CA");
  EXPECT_EQ(r.code, kExitOk) << r.err;
  // Plaintext to a TLS server: one line, exit 1.
  r = Hlab({"workers", "--token", "tls-token"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("closed the connection during setup); if it runs "
                       "with TLS, give --tls-ca or HLAB_TLS_CA"),
            std::string::npos)
      << r.err;
}

TEST_F(CliClientTest, TlsToAPlaintextServerSaysSo) {
  const testing::TestCertificate cert = testing::MakeTestCertificate();
  const std::string ca = WriteTemp("ca2.pem", cert.cert_pem);
  const Result r = Hlab({"workers", "--tls-ca", ca});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(Lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("TLS handshake failed"), std::string::npos) << r.err;
}

TEST_F(CliClientTest, AddressComesFromTheEnvironment) {
  Start();
  setenv("HLAB_ADDRESS", fake_.address().c_str(), 1);
  std::ostringstream out, err;
  EXPECT_EQ(RunCli({"workers"}, out, err), kExitOk) << err.str();
  unsetenv("HLAB_ADDRESS");
}

TEST_F(CliClientTest, UnauthenticatedAsksForAToken) {
  fake_.required_token = "s3cret";
  Result r = Hlab({"runs"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(Lines(r.err), 1);
  EXPECT_NE(r.err.find("needs a token; give a token with --token, "
                       "--token-file or HLAB_TOKEN"),
            std::string::npos)
      << r.err;
  r = Hlab({"runs", "--token", "wrong"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_NE(r.err.find("refused the token"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("HLAB_TOKEN"), std::string::npos) << r.err;
  r = Hlab({"runs", "--token", "s3cret"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(fake_.recorded().authorization.back(), "Bearer s3cret");
}

TEST_F(CliClientTest, TokenFromEnvironmentAndFile) {
  fake_.required_token = "from-env";
  setenv("HLAB_TOKEN", "from-env", 1);
  Result r = Hlab({"workers"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  unsetenv("HLAB_TOKEN");

  fake_.required_token = "from-file";
  const std::string path = WriteTemp("token.txt", "from-file\n");
  r = Hlab({"workers", "--token-file", path});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  setenv("HLAB_TOKEN_FILE", path.c_str(), 1);
  r = Hlab({"workers"});
  EXPECT_EQ(r.code, kExitOk) << r.err;
  unsetenv("HLAB_TOKEN_FILE");
  EXPECT_EQ(fake_.recorded().authorization.back(), "Bearer from-file");

  r = Hlab({"workers", "--token-file", "/nonexistent/token"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(r.err,
            "hlab workers: error: cannot read --token-file "
            "'/nonexistent/token'; check the path\n");
}

TEST_F(CliClientTest, PermissionDeniedNamesWhatTheRoleMayNotDo) {
  fake_.forced_status = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                     "role 'read' may not submit");
  const Result r = Hlab({"submit", Example("demo.yaml"), "--token", "t"});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(Lines(r.err), 1);
  EXPECT_NE(r.err.find("this token's role may not submit sweeps (role "
                       "'read' may not submit)"),
            std::string::npos)
      << r.err;
}

// A coordinator that is up but cannot write its database is not "cannot
// reach the coordinator": its own message is shown.
TEST_F(CliClientTest, StoreNotWritableIsShownAsTheCoordinatorSaysIt) {
  const std::string message = std::string(kStoreNotWritable) +
                              ": database /var/lib/hlab/hlab.db cannot be "
                              "written (disk full): database or disk is full";
  fake_.forced_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, message);
  const Result r = Hlab({"submit", Example("demo.yaml")});
  EXPECT_EQ(r.code, kExitFailed);
  EXPECT_EQ(Lines(r.err), 1);
  EXPECT_EQ(r.err, "hlab submit: error: " + message + "\n");
}

}  // namespace
}  // namespace hlab::cli
