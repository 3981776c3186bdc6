// FileLock: an exclusive advisory lock (flock) on "<database>.lock", held by
// the one Store that writes a database, so a second coordinator on the same
// file is refused at start-up instead of fighting over the write lock.
// Private to coordinator/store.
//
// Thread-safety: not thread-safe; owned by one Store.
//
//   HLAB_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(path + ".lock"));
//   // released when `lock` is destroyed (or the process dies)
#ifndef HLAB_COORDINATOR_STORE_INTERNAL_FILE_LOCK_H_
#define HLAB_COORDINATOR_STORE_INTERNAL_FILE_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace hlab::store::internal {

class FileLock {
 public:
  // Creates `path` if needed and locks it. Unavailable (naming the path) if
  // it cannot be created; FailedPrecondition if another holder has it.
  static absl::StatusOr<FileLock> Acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace hlab::store::internal

#endif  // HLAB_COORDINATOR_STORE_INTERNAL_FILE_LOCK_H_
