// Start-up checks on directories (is a path on a network filesystem?), and
// RemoveTree, hlab's std::filesystem::remove_all.
//
// SQLite's WAL needs shared memory and POSIX locks that work on one host
// only ("WAL does not work over a network filesystem", sqlite.org/wal.html),
// so the coordinator refuses a --db directory on NFS, SMB/CIFS, a FUSE
// mount (sshfs, s3fs, ...), Ceph, Lustre, GPFS, AFS or 9p, and the worker
// refuses such a --data-dir (docs/operations.md says why), unless told
// --allow-network-fs. Detection reads statfs(2)'s f_type; a filesystem
// unknown to the table is taken as local.
//
// Thread-safe (no state).
//
//   absl::Status s = CheckLocalFilesystem("/data/hlab", "--db");
//   if (!s.ok()) return s;  // FailedPrecondition naming the flag and type
//   std::optional<std::string> nfs = NetworkFilesystemName(0x6969);  // "NFS"
#ifndef HLAB_COMMON_FILESYSTEM_H_
#define HLAB_COMMON_FILESYSTEM_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hlab {

// The name of a network (or FUSE) filesystem for a statfs f_type, or
// nullopt for a local or unknown one.
std::optional<std::string> NetworkFilesystemName(int64_t f_type);

// statfs(2) of `path`, or of its nearest existing parent when it does not
// exist yet (a directory about to be created lands there) or lies under a
// file. FailedPrecondition
// naming `flag`, the path and the filesystem if it is a network filesystem;
// Unavailable if no parent can be examined.
absl::Status CheckLocalFilesystem(const std::string& path,
                                  const std::string& flag);

// The network filesystem `path` (or its nearest existing parent) is on, as
// NetworkFilesystemName names it; nullopt for a local one. Unavailable
// naming `flag` if no parent can be examined.
absl::StatusOr<std::optional<std::string>> NetworkFilesystemOf(
    const std::string& path, const std::string& flag);

// Removes `path` and, for a directory, everything under it; symbolic links
// are removed, never followed. OK when `path` does not exist. Internal
// naming the first entry that could not be removed.
//
// Not std::filesystem::remove_all: a pip LibTorch (2.11's libtorch.so)
// exports its own copy of it, which the dynamic linker binds every caller
// to, and that copy jumps to address 0 in a program built with GCC 13
// (scripts/gpu-check.sh found it; docs/training.md, "Building for GPUs").
// Every program that links LibTorch uses this instead.
absl::Status RemoveTree(const std::string& path);

}  // namespace hlab

#endif  // HLAB_COMMON_FILESYSTEM_H_
