#include "train/checkpoint_file.h"

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

}  // namespace
}  // namespace hlab::train
