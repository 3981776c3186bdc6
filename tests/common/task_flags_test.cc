// The command line shared by hlab-train and hlab-eval (common/task_flags.h):
// the common flags, a tool's own flags, and one-line errors naming the flag.
#include "common/task_flags.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace hlab {
namespace {

absl::StatusOr<TaskFlags> Parse(std::vector<const char*> args,
                                const std::vector<TaskFlag>& own = {}) {
  args.insert(args.begin(), "hlab-tool");
  return ParseTaskFlags(static_cast<int>(args.size()), args.data(), own);
}

std::string Error(std::vector<const char*> args,
                  const std::vector<TaskFlag>& own = {}) {
  absl::StatusOr<TaskFlags> flags = Parse(std::move(args), own);
  EXPECT_FALSE(flags.ok());
  if (flags.ok()) return "";
  EXPECT_EQ(flags.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(flags.status().message());
}

TEST(TaskFlagsTest, ReadsTheCommonFlags) {
  absl::StatusOr<TaskFlags> none = Parse({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->action, "");
  EXPECT_EQ(none->task_path, "");
  EXPECT_EQ(none->record_fd, -1);
  EXPECT_EQ(none->threads, -1);
  EXPECT_FALSE(none->check);
  EXPECT_FALSE(none->progress);

  absl::StatusOr<TaskFlags> all =
      Parse({"--task", "t.json", "--record-fd", "3", "--threads", "4",
             "--check", "--progress"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->task_path, "t.json");
  EXPECT_EQ(all->record_fd, 3);
  EXPECT_EQ(all->threads, 4);
  EXPECT_TRUE(all->check);
  EXPECT_TRUE(all->progress);
}

TEST(TaskFlagsTest, ReadsAToolsOwnFlags) {
  const std::vector<TaskFlag> own = {{"--example-task", TaskFlag::kAction},
                                     {"--rank", TaskFlag::kInt},
                                     {"--master-addr", TaskFlag::kValue},
                                     {"--dry", TaskFlag::kSwitch}};
  absl::StatusOr<TaskFlags> flags = Parse(
      {"--rank", "-2", "--master-addr", "10.0.0.1", "--dry", "--task", "t"},
      own);
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->ints.at("--rank"), -2);
  EXPECT_EQ(flags->values.at("--master-addr"), "10.0.0.1");
  EXPECT_EQ(flags->switches.count("--dry"), 1u);
  EXPECT_EQ(flags->task_path, "t");
  // An action ends parsing: what follows is not read, even if bad.
  absl::StatusOr<TaskFlags> action =
      Parse({"--task", "t", "--example-task", "--bogus"}, own);
  ASSERT_TRUE(action.ok()) << action.status();
  EXPECT_EQ(action->action, "--example-task");
  for (const char* help : {"--help", "-h"}) {
    absl::StatusOr<TaskFlags> h = Parse({help, "--threads", "0"}, own);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->action, "--help");
  }
}

TEST(TaskFlagsTest, ErrorsNameTheFlagAndWhatIsExpected) {
  EXPECT_EQ(Error({"--bogus"}), "unknown option '--bogus' (see --help)");
  EXPECT_EQ(Error({"--task"}), "--task needs a value (see --help)");
  EXPECT_EQ(Error({"--threads", "0"}),
            "--threads must be a positive integer, got '0'");
  EXPECT_EQ(Error({"--threads", "two"}),
            "--threads must be a positive integer, got 'two'");
  EXPECT_EQ(Error({"--record-fd", "-1"}),
            "--record-fd must be a file descriptor number, got '-1'");
  EXPECT_EQ(Error({"--rank", "x"}, {{"--rank", TaskFlag::kInt}}),
            "--rank must be an integer, got 'x'");
  EXPECT_EQ(Error({"--master-addr"}, {{"--master-addr", TaskFlag::kValue}}),
            "--master-addr needs a value (see --help)");
  // A flag of another tool is unknown here.
  EXPECT_EQ(Error({"--example-task"}),
            "unknown option '--example-task' (see --help)");
}

}  // namespace
}  // namespace hlab
