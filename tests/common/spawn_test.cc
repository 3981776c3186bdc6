// SpawnProcess (common/spawn.h) on /bin/sh: file actions in order, the
// environment, the signal state and process group asked for, and errors
// naming the program, each both through posix_spawn and through the
// fork + exec path a parent-death signal takes; and that signal itself: a
// stopped child of a parent killed with SIGKILL dies with it.
#include "common/spawn.h"
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

// The parameter: SpawnOptions::parent_death_signal (0: posix_spawn; else
// fork + exec).
class SpawnTest : public ::testing::TestWithParam<int> {
 protected:
  SpawnOptions Options() const {
    SpawnOptions options;
    options.parent_death_signal = GetParam();
    return options;
  }
};

INSTANTIATE_TEST_SUITE_P(PosixSpawnAndForkExec, SpawnTest,
                         ::testing::Values(0, SIGKILL));

TEST_P(SpawnTest, AppliesFileActionsInOrder) {
  const std::string log = ::testing::TempDir() + "/spawn_test.log";
  ::unlink(log.c_str());
  SpawnOptions options = Options();
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

TEST_P(SpawnTest, EnvironmentSignalsAndProcessGroup) {
  SpawnOptions options = Options();
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
  const std::string inherited = RunShell(blocked, Options()).out;
  SpawnOptions reset = Options();
  reset.reset_signal_mask = true;
  const std::string cleared = RunShell(blocked, reset).out;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
  EXPECT_EQ(inherited, "0000000000000200\n");
  EXPECT_EQ(cleared, "0000000000000000\n");

  SpawnOptions group = Options();
  group.new_process_group = true;
  const Ran own = RunShell("ps -o pgid= -p $$ | tr -d ' '; echo $$", group);
  const size_t nl = own.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << own.out;
  EXPECT_EQ(own.out.substr(0, nl) + "\n", own.out.substr(nl + 1));
}

TEST_P(SpawnTest, DefaultSignalHandlersUndoIgnoredSignals) {
  // Ignored here, SIGUSR2 (bit 11 of SigIgn) stays ignored in a child
  // without default_signal_handlers and not with it.
  struct sigaction ignore = {}, old = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGUSR2, &ignore, &old), 0);
  const std::string ignored =
      "grep SigIgn /proc/self/status | tr -d '\\t' | cut -d: -f2";
  const std::string inherited = RunShell(ignored, Options()).out;
  SpawnOptions defaults = Options();
  defaults.default_signal_handlers = true;
  const std::string reset = RunShell(ignored, defaults).out;
  ASSERT_EQ(::sigaction(SIGUSR2, &old, nullptr), 0);
  const unsigned long bit = 1ul << (SIGUSR2 - 1);
  EXPECT_NE(std::strtoul(inherited.c_str(), nullptr, 16) & bit, 0u)
      << inherited;
  EXPECT_EQ(std::strtoul(reset.c_str(), nullptr, 16) & bit, 0u) << reset;
}

TEST_P(SpawnTest, ErrorsNameTheProgram) {
  absl::StatusOr<pid_t> missing = SpawnProcess({"/no/such/program"}, Options());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "cannot run /no/such/program: No such file or directory");
  EXPECT_EQ(SpawnProcess({}, Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  SpawnOptions bad_file = Options();
  bad_file.Open(STDIN_FILENO, "/no/such/dir/input", O_RDONLY);
  absl::StatusOr<pid_t> unopened = SpawnProcess({"/bin/true"}, bad_file);
  EXPECT_EQ(unopened.status().code(), absl::StatusCode::kNotFound)
      << unopened.status();
  // errno cannot tell the program from the file: the message names both.
  EXPECT_EQ(unopened.status().message(),
            "cannot run /bin/true: No such file or directory (the program is "
            "there; the files opened for it are /no/such/dir/input)");
}

// A parent that spawns `script` (with `death_signal`), tells us the child's
// pid and then dies by SIGKILL. This process is a child subreaper, so the
// orphan becomes our child: returns how it ended (waitpid's status), or -1
// when it is still alive `wait_ms` on (then it is killed). The parent and
// the orphan have a process group of their own: in this process's group,
// the kernel's SIGHUP to an orphaned group with a stopped member (or a
// terminal's hangup) would depend on how the test runner laid out sessions
// and groups. Once in 2026-12-07's runs the stopped orphan ended by SIGHUP.
int OrphanEnd(const std::string& script, int death_signal, int wait_ms) {
  EXPECT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t parent = ::fork();
  if (parent == 0) {
    ::close(fds[0]);
    if (::setpgid(0, 0) != 0) ::_exit(1);
    SpawnOptions options;
    options.parent_death_signal = death_signal;
    absl::StatusOr<pid_t> child =
        SpawnProcess({"/bin/sh", "-c", script}, options);
    const pid_t pid = child.ok() ? *child : 0;
    (void)!::write(fds[1], &pid, sizeof(pid));
    usleep(200 * 1000);  // let the child stop itself
    ::kill(::getpid(), SIGKILL);
  }
  ::close(fds[1]);
  pid_t child = 0;
  EXPECT_EQ(::read(fds[0], &child, sizeof(child)),
            static_cast<ssize_t>(sizeof(child)));
  ::close(fds[0]);
  int status = 0;
  EXPECT_EQ(::waitpid(parent, &status, 0), parent);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  if (child <= 0) {
    ADD_FAILURE() << "the parent could not spawn";
    return -1;
  }
  for (int i = 0; i < wait_ms / 10; ++i) {
    if (::waitpid(child, &status, WNOHANG | WUNTRACED) == child &&
        !WIFSTOPPED(status)) {
      return status;
    }
    usleep(10 * 1000);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}

TEST(SpawnParentDeathTest, AStoppedChildDiesWithItsParent) {
  const int end = OrphanEnd("kill -STOP $$; exit 0", SIGKILL, 10000);
  ASSERT_NE(end, -1) << "the child outlived its parent";
  EXPECT_TRUE(WIFSIGNALED(end) && WTERMSIG(end) == SIGKILL) << end;
}

TEST(SpawnParentDeathTest, WithoutTheSignalTheStoppedChildStays) {
  // What the signal prevents: the orphan, stopped, waits forever.
  EXPECT_EQ(OrphanEnd("kill -STOP $$; exit 0", 0, 1000), -1);
}

// A daemon's "listening on HOST:PORT", read from its stdout pipe.
TEST(ReadLineStartingWithTest, ReturnsTheRestOfTheLineAndKeepsWhatFollows) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string text =
      "starting\nlistening on 127.0.0.1:4242\nmetrics on 127.0.0.1:9";
  ASSERT_EQ(::write(fds[1], text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
  std::string buffer;
  EXPECT_EQ(
      ReadLineStartingWith(fds[0], "listening on ", absl::Seconds(5), &buffer),
      "127.0.0.1:4242");
  EXPECT_EQ(buffer, "metrics on 127.0.0.1:9");  // no newline yet
  // Not a whole line yet: waits, and the timeout gives "".
  EXPECT_EQ(ReadLineStartingWith(fds[0], "metrics on ", absl::Milliseconds(50),
                                 &buffer),
            "");
  ASSERT_EQ(::write(fds[1], "1\n", 2), 2);
  EXPECT_EQ(
      ReadLineStartingWith(fds[0], "metrics on ", absl::Seconds(5), &buffer),
      "127.0.0.1:91");
  // The writer closes its end (the child exited) before the line: "".
  ASSERT_EQ(::write(fds[1], "listening", 9), 9);
  ::close(fds[1]);
  EXPECT_EQ(ReadLineStartingWith(fds[0], "listening on ", absl::Seconds(5)),
            "");
  ::close(fds[0]);
}

}  // namespace
}  // namespace hlab
