// SpawnProcess (common/spawn.h) on /bin/sh: file actions in order, the
// environment, the signal state and process group asked for, and errors
// naming the program.
#include "common/spawn.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hlab {
namespace {

// Runs `script` with sh -c, stdout into a pipe; returns what it printed
// and its exit code.
struct Ran {
  std::string out;
  int code = -1;
};

Ran RunShell(const std::string& script, SpawnOptions options) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  options.Dup2(fds[1], STDOUT_FILENO);
  absl::StatusOr<pid_t> pid = SpawnProcess({"/bin/sh", "-c", script}, options);
  ::close(fds[1]);
  Ran ran;
  if (!pid.ok()) {
    ADD_FAILURE() << pid.status();
    ::close(fds[0]);
    return ran;
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) {
    ran.out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(*pid, &status, 0), *pid);
  ran.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

TEST(SpawnTest, AppliesFileActionsInOrder) {
  const std::string log = ::testing::TempDir() + "/spawn_test.log";
  ::unlink(log.c_str());
  SpawnOptions options;
  options.Open(STDIN_FILENO, "/dev/null", O_RDONLY);
  options.Open(STDERR_FILENO, log, O_WRONLY | O_CREAT | O_APPEND);
  const Ran ran = RunShell("echo out; echo err >&2; cat; exit 3", options);
  EXPECT_EQ(ran.out, "out\n");
  EXPECT_EQ(ran.code, 3);
  char buf[64] = {};
  const int fd = ::open(log.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::read(fd, buf, sizeof(buf) - 1), 4);
  ::close(fd);
  EXPECT_STREQ(buf, "err\n");
}

TEST(SpawnTest, EnvironmentSignalsAndProcessGroup) {
  SpawnOptions options;
  options.environment = std::vector<std::string>{"HLAB_SPAWN_TEST=42"};
  EXPECT_EQ(RunShell("echo \"$HLAB_SPAWN_TEST\"", options).out, "42\n");

  // Blocked here, SIGUSR1 stays blocked in a child without
  // reset_signal_mask (SigBlk in /proc shows bit 10) and not with it.
  sigset_t usr1, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
  const std::string blocked =
      "grep SigBlk /proc/self/status | tr -d '\\t' | cut -d: -f2";
  const std::string inherited = RunShell(blocked, {}).out;
  SpawnOptions reset;
  reset.reset_signal_mask = true;
  const std::string cleared = RunShell(blocked, reset).out;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
  EXPECT_EQ(inherited, "0000000000000200\n");
  EXPECT_EQ(cleared, "0000000000000000\n");

  SpawnOptions group;
  group.new_process_group = true;
  const Ran own = RunShell("ps -o pgid= -p $$ | tr -d ' '; echo $$", group);
  const size_t nl = own.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << own.out;
  EXPECT_EQ(own.out.substr(0, nl) + "\n", own.out.substr(nl + 1));
}

TEST(SpawnTest, ErrorsNameTheProgram) {
  absl::StatusOr<pid_t> missing =
      SpawnProcess({"/no/such/program"}, SpawnOptions());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "cannot run /no/such/program: No such file or directory");
  EXPECT_EQ(SpawnProcess({}, SpawnOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hlab
