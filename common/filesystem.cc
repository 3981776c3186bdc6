#include "common/filesystem.h"
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace hlab {

std::optional<std::string> NetworkFilesystemName(int64_t f_type) {
  // Magic numbers from linux/magic.h and the filesystems' sources (some are
  // not in that header).
  switch (static_cast<uint32_t>(f_type)) {
    case 0x6969:
      return "NFS";
    case 0x517B:
      return "SMB";
    case 0xFE534D42:
      return "SMB2";
    case 0xFF534D42:
      return "CIFS";
    case 0x65735546:
      return "FUSE (sshfs, s3fs, ...)";
    case 0x00C36400:
      return "Ceph";
    case 0x0BD00BD0:
      return "Lustre";
    case 0x47504653:
      return "GPFS";
    case 0x5346414F:
      return "AFS";
    case 0x6B414653:
      return "kAFS";
    case 0x01021997:
      return "9p (v9fs)";
    case 0x013111A8:
      return "IBRIX";
    case 0x73757245:
      return "Coda";
    case 0x19830326:
      return "FhGFS/BeeGFS";
    case 0x564C:
      return "NCP";
    default:
      return std::nullopt;
  }
}

absl::StatusOr<std::optional<std::string>> NetworkFilesystemOf(
    const std::string& path, const std::string& flag) {
  std::filesystem::path probe =
      std::filesystem::absolute(path.empty() ? "." : path);
  struct statfs info {};
  while (statfs(probe.c_str(), &info) != 0) {
    // A missing path (or one under a file, which the caller's own checks
    // report better) is judged by its nearest existing parent.
    if ((errno != ENOENT && errno != ENOTDIR) || !probe.has_relative_path()) {
      return absl::UnavailableError(absl::StrCat(
          flag, ": cannot examine ", probe.string(), ": ", strerror(errno)));
    }
    probe = probe.parent_path();
  }
  return NetworkFilesystemName(static_cast<int64_t>(info.f_type));
}

absl::Status CheckLocalFilesystem(const std::string& path,
                                  const std::string& flag) {
  absl::StatusOr<std::optional<std::string>> network =
      NetworkFilesystemOf(path, flag);
  if (!network.ok()) return network.status();
  if (!*network) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      flag, " ", path, " is on a network filesystem (", **network,
      "); hlab needs a local disk there (SQLite WAL, file locks and trainer "
      "pids are per host): use a local directory, or pass "
      "--allow-network-fs if you know this mount is safe"));
}

namespace {

// nftw's callback: removes each entry after its children (FTW_DEPTH); the
// first failure is kept in remove_tree_error.
thread_local std::string* remove_tree_error = nullptr;

int RemoveEntry(const char* path, const struct stat* /*info*/, int /*flag*/,
                struct FTW* /*ftw*/) {
  if (::remove(path) != 0 && errno != ENOENT) {
    *remove_tree_error =
        absl::StrCat("cannot remove ", path, ": ", ::strerror(errno));
    return 1;
  }
  return 0;
}

}  // namespace

absl::Status RemoveTree(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("cannot examine ", path, ": ", ::strerror(errno)));
  }
  std::string error;
  remove_tree_error = &error;
  const int rc = ::nftw(path.c_str(), RemoveEntry, 64, FTW_DEPTH | FTW_PHYS);
  remove_tree_error = nullptr;
  if (rc != 0) {
    return absl::InternalError(
        error.empty()
            ? absl::StrCat("cannot remove ", path, ": ", ::strerror(errno))
            : error);
  }
  return absl::OkStatus();
}

}  // namespace hlab
