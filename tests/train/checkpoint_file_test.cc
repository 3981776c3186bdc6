#include "train/checkpoint_file.h"
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace hlab::train {
namespace {

namespace fs = std::filesystem;

class CheckpointFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hlab_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(int64_t step, const std::string& payload) {
    CheckpointMeta meta{.step = step,
                        .tokens = step * 10,
                        .kind = "latest",
                        .model_config = "{}",
                        .fingerprint = "f",
                        .payload_sha256 = ""};
    const std::string path = (dir_ / LatestName(step)).string();
    EXPECT_TRUE(WriteCheckpoint(path, meta, payload).ok());
    return path;
  }

  fs::path dir_;
};

TEST_F(CheckpointFileTest, RoundTripsAndVerifies) {
  const std::string path = Write(7, std::string(1000, 'x') + "payload");
  auto file = ReadCheckpoint(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->meta.step, 7);
  EXPECT_EQ(file->meta.tokens, 70);
  EXPECT_EQ(file->payload, std::string(1000, 'x') + "payload");
  EXPECT_EQ(file->meta.payload_sha256, Sha256Hex(file->payload));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(CheckpointFileTest, CorruptFileIsRefusedNamingItAndSkipped) {
  Write(1, "first");
  const std::string newest = Write(2, "second-payload");
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('!');
  }
  auto bad = ReadCheckpoint(newest);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(bad.status().message()).find(newest),
            std::string::npos);
  std::vector<std::string> warnings;
  auto valid = NewestValidCheckpoint(dir_.string(), &warnings);
  ASSERT_TRUE(valid.has_value());
  EXPECT_EQ(valid->meta.step, 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(newest), std::string::npos);
}

TEST_F(CheckpointFileTest, TruncatedFileIsDataLoss) {
  const std::string path = Write(3, std::string(5000, 'y'));
  fs::resize_file(path, fs::file_size(path) - 100);
  EXPECT_EQ(ReadCheckpoint(path).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCheckpoint((dir_ / "nope.ckpt").string()).status().code(),
            absl::StatusCode::kNotFound);
}

// A flipped byte in a size field must not make the reader allocate what
// the file does not hold (before: a payload size of 2^62 threw
// std::length_error out of ReadCheckpoint), nor a float count convert
// undefined (found by tests/fuzz/fuzz_checkpoint_header.cc).
TEST_F(CheckpointFileTest, CorruptSizesAndCountsAreDataLoss) {
  const std::string path = Write(4, "four");
  const uint64_t size = fs::file_size(path);
  {
    // The payload size: the 8 bytes before the 4-byte payload.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 4 - 1));
    f.put(static_cast<char>(0x40));
  }
  auto huge = ReadCheckpoint(path);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kDataLoss) << huge.status();
  EXPECT_NE(std::string(huge.status().message()).find("truncated"),
            std::string::npos)
      << huge.status();
  // A header whose step is a float no int64 holds.
  const std::string meta =
      R"({"step":1e300,"tokens":0,"kind":"latest","model_config":"{}",)"
      R"("fingerprint":"f","payload_sha256":"x"})";
  std::string bytes = "HLABCKPT1\n";
  for (int i = 0; i < 8; ++i) {
    bytes.push_back(static_cast<char>(meta.size() >> (8 * i)));
  }
  bytes += meta + std::string(8, '\0');
  const std::string floaty = (dir_ / "floaty.ckpt").string();
  std::ofstream(floaty, std::ios::binary) << bytes;
  auto meta_read = ReadCheckpointMeta(floaty);
  EXPECT_EQ(meta_read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(meta_read.status().message()).find("step is not an"),
            std::string::npos)
      << meta_read.status();
}

TEST_F(CheckpointFileTest, PruneKeepsTheNewestAndAllBranches) {
  for (int64_t step : {1, 2, 3, 4}) Write(step, "p");
  CheckpointMeta branch{.step = 2,
                        .kind = "branch",
                        .branch_budget_tokens = 99,
                        .model_config = "{}",
                        .fingerprint = "f",
                        .payload_sha256 = ""};
  ASSERT_TRUE(
      WriteCheckpoint((dir_ / BranchName(99)).string(), branch, "b").ok());
  ASSERT_TRUE(PruneCheckpoints(dir_.string(), 2).ok());
  EXPECT_FALSE(fs::exists(dir_ / LatestName(1)));
  EXPECT_FALSE(fs::exists(dir_ / LatestName(2)));
  EXPECT_TRUE(fs::exists(dir_ / LatestName(3)));
  EXPECT_TRUE(fs::exists(dir_ / LatestName(4)));
  EXPECT_TRUE(fs::exists(dir_ / BranchName(99)));
  const auto listed = ListCheckpoints(dir_.string());
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(fs::path(listed[0]).filename(), LatestName(4));
}

CheckpointMeta Meta(int64_t step) {
  return CheckpointMeta{.step = step,
                        .tokens = step * 10,
                        .kind = "latest",
                        .model_config = "{}",
                        .fingerprint = "f",
                        .payload_sha256 = ""};
}

// A write the disk cannot take (here: RLIMIT_FSIZE, in a child, so that
// write(2) fails with EFBIG as it fails with ENOSPC on a full disk) fails
// with Unavailable naming the file, leaves no temporary file and no
// checkpoint under the new name, and the previous checkpoint stays the
// newest valid one.
TEST_F(CheckpointFileTest,
       AWriteTheDiskRefusesFailsCleanlyAndKeepsThePrevious) {
  Write(1, std::string(1000, 'a'));
  const std::string path = (dir_ / LatestName(2)).string();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    auto written = WriteCheckpoint(path, Meta(2), std::string(64 << 10, 'b'));
    if (written.ok()) ::_exit(1);
    if (written.status().code() != absl::StatusCode::kUnavailable) ::_exit(2);
    if (written.status().message().find(path) == absl::string_view::npos) {
      ::_exit(3);
    }
    if (!IsStorageRefusal(written.status())) ::_exit(4);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the write succeeded, 2: not Unavailable, 3: no path named, "
         "4: not a storage refusal";
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  std::vector<std::string> warnings;
  auto newest = NewestValidCheckpoint(dir_.string(), &warnings);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->meta.step, 1);
  EXPECT_EQ(newest->payload, std::string(1000, 'a'));
  EXPECT_TRUE(warnings.empty());
}

// A real full file system: a 256 KiB tmpfs. Needs mount(2) (root or
// CAP_SYS_ADMIN); skipped with a message where it is not allowed.
TEST_F(CheckpointFileTest, AFullTmpfsKeepsThePreviousAndTakesTheNextWhenFreed) {
  fs::create_directories(dir_);
  if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=256k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "); the RLIMIT_FSIZE test covers the write";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{dir_.string()};
  Write(1, std::string(1000, 'a'));
  // Other Unavailable errors are not refusals of the storage.
  EXPECT_FALSE(IsStorageRefusal(absl::UnavailableError("cannot write")));
  {
    std::ofstream filler(dir_ / "filler", std::ios::binary);
    const std::string chunk(4096, 'f');
    for (int i = 0; i < 256 && filler; ++i) {
      filler.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      filler.flush();
    }
  }
  const std::string path = (dir_ / LatestName(2)).string();
  auto refused = WriteCheckpoint(path, Meta(2), std::string(64 << 10, 'b'));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << refused.status();
  EXPECT_NE(refused.status().message().find("No space left"),
            absl::string_view::npos)
      << refused.status();
  EXPECT_TRUE(IsStorageRefusal(refused.status()));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  std::vector<std::string> warnings;
  auto newest = NewestValidCheckpoint(dir_.string(), &warnings);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->meta.step, 1);

  fs::remove(dir_ / "filler");  // space returns: the next write succeeds
  ASSERT_TRUE(WriteCheckpoint(path, Meta(2), std::string(64 << 10, 'b')).ok());
  newest = NewestValidCheckpoint(dir_.string(), &warnings);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->meta.step, 2);
}

}  // namespace
}  // namespace hlab::train
