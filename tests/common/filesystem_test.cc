// Network filesystem detection (common/filesystem.h): the f_type table, and
// the check on real local paths (existing or not yet created).
#include "common/filesystem.h"
#include <sys/vfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace hlab {
namespace {

TEST(FilesystemTest, NamesNetworkFilesystemsByMagicNumber) {
  EXPECT_EQ(NetworkFilesystemName(0x6969), "NFS");
  EXPECT_EQ(NetworkFilesystemName(0xFF534D42), "CIFS");
  EXPECT_EQ(NetworkFilesystemName(0xFE534D42), "SMB2");
  EXPECT_EQ(NetworkFilesystemName(0x517B), "SMB");
  EXPECT_EQ(NetworkFilesystemName(0x65735546), "FUSE (sshfs, s3fs, ...)");
  EXPECT_EQ(NetworkFilesystemName(0x0BD00BD0), "Lustre");
  EXPECT_EQ(NetworkFilesystemName(0x47504653), "GPFS");
  EXPECT_EQ(NetworkFilesystemName(0x00C36400), "Ceph");
  // f_type is a signed long on Linux: a magic with the top bit set may
  // arrive sign-extended.
  EXPECT_EQ(NetworkFilesystemName(static_cast<int32_t>(0xFF534D42)), "CIFS");
}

TEST(FilesystemTest, LocalFilesystemsAreNotNetwork) {
  EXPECT_EQ(NetworkFilesystemName(0xEF53), std::nullopt);      // ext4
  EXPECT_EQ(NetworkFilesystemName(0x58465342), std::nullopt);  // XFS
  EXPECT_EQ(NetworkFilesystemName(0x01021994), std::nullopt);  // tmpfs
  EXPECT_EQ(NetworkFilesystemName(0x9123683E), std::nullopt);  // btrfs
  EXPECT_EQ(NetworkFilesystemName(0x794C7630), std::nullopt);  // overlayfs
  EXPECT_EQ(NetworkFilesystemName(0), std::nullopt);
}

TEST(FilesystemTest, CheckAgreesWithStatfsOnRealPaths) {
  const std::string tmp = ::testing::TempDir();
  struct statfs info {};
  ASSERT_EQ(statfs(tmp.c_str(), &info), 0);
  const bool network =
      NetworkFilesystemName(static_cast<int64_t>(info.f_type)).has_value();
  // A path that does not exist yet is judged by its nearest parent.
  const std::string file = tmp + "/hlab_filesystem_test_file";
  { std::ofstream(file) << "x"; }
  for (const std::string& path :
       {tmp, tmp + "/not/yet/made/hlab.db", file + "/under/a/file"}) {
    absl::Status s = CheckLocalFilesystem(path, "--db");
    EXPECT_EQ(s.ok(), !network) << path << ": " << s;
  }
  if (network) {
    absl::Status s = CheckLocalFilesystem(tmp, "--data-dir");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("--data-dir"), std::string::npos) << s;
    EXPECT_NE(s.message().find("--allow-network-fs"), std::string::npos) << s;
  }
  std::filesystem::remove(file);
}

TEST(RemoveTreeTest, RemovesATreeAndNeverFollowsALink) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) /
                        ("hlab_remove_tree_" + std::to_string(::getpid()));
  const fs::path outside = root.string() + "-outside";
  fs::create_directories(root / "a" / "b" / "c");
  fs::create_directories(outside);
  std::ofstream(root / "a" / "b" / "c" / "f") << "x";
  std::ofstream(root / "top") << "y";
  std::ofstream(outside / "kept") << "z";
  fs::create_directory_symlink(outside, root / "a" / "link");
  EXPECT_TRUE(RemoveTree(root.string()).ok());
  EXPECT_FALSE(fs::exists(root));
  // The link went, not what it pointed to.
  EXPECT_TRUE(fs::exists(outside / "kept"));
  // Absent: nothing to do. A file: removed.
  EXPECT_TRUE(RemoveTree(root.string()).ok());
  EXPECT_TRUE(RemoveTree((outside / "kept").string()).ok());
  EXPECT_FALSE(fs::exists(outside / "kept"));
  fs::remove(outside);
}

}  // namespace
}  // namespace hlab
