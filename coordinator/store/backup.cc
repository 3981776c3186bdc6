#include "coordinator/store/backup.h"
#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/store/database.h"

namespace hlab::store {
namespace {

namespace fs = std::filesystem;

// fsync of a file or directory; Unavailable naming it.
absl::Status Sync(const std::string& path, bool directory) {
  const int fd = ::open(
      path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot sync ", path, ": ", std::strerror(error)));
  }
  ::close(fd);
  return absl::OkStatus();
}

// Closes the destination connection; removes the partial file unless kept.
struct PartialFile {
  std::string path;
  sqlite3* db = nullptr;
  bool keep = false;
  ~PartialFile() {
    if (db != nullptr) sqlite3_close_v2(db);
    if (!keep) {
      std::error_code ignored;
      fs::remove(path, ignored);
      fs::remove(path + "-journal", ignored);
    }
  }
};

// The first line of PRAGMA integrity_check: "ok" for a sound file.
absl::StatusOr<std::string> IntegrityCheck(sqlite3* db) {
  sqlite3_stmt* stmt = nullptr;
  int rc =
      sqlite3_prepare_v2(db, "PRAGMA integrity_check(1)", -1, &stmt, nullptr);
  std::string first;
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      first = text ? reinterpret_cast<const char*>(text) : "";
      rc = SQLITE_OK;
    }
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_OK) {
    return SqliteStatus(rc, sqlite3_errmsg(db), "integrity check of backup");
  }
  return first;
}

}  // namespace

absl::StatusOr<BackupResult> BackupDatabase(const std::string& source,
                                            const std::string& dest,
                                            const BackupOptions& options) {
  if (options.pages_per_step <= 0) {
    return absl::InvalidArgumentError("backup: pages per step must be > 0");
  }
  std::error_code ec;
  if (fs::exists(dest, ec)) {
    if (fs::equivalent(source, dest, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backup target ", dest, " is the database itself (", source, ")"));
    }
    if (!options.force) {
      return absl::AlreadyExistsError(
          absl::StrCat("backup target ", dest,
                       " exists; choose another file or pass --force to "
                       "replace it"));
    }
  }
  if (!fs::exists(source, ec)) {
    return absl::UnavailableError(
        absl::StrCat("database ", source, " does not exist"));
  }
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> src,
                        Database::Open(source, Database::Mode::kReadOnly));
  // One read transaction for the whole copy: one snapshot, never restarted
  // by the coordinator's commits.
  HLAB_RETURN_IF_ERROR(src->Exec("BEGIN"));
  absl::StatusOr<int64_t> tables =
      src->QueryInt("SELECT count(*) FROM sqlite_master");
  if (!tables.ok()) {
    (void)src->Exec("ROLLBACK");
    return tables.status();
  }

  PartialFile partial{absl::StrCat(dest, ".partial-", ::getpid())};
  fs::remove(partial.path, ec);
  int rc = sqlite3_open_v2(partial.path.c_str(), &partial.db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message =
        partial.db ? sqlite3_errmsg(partial.db) : sqlite3_errstr(rc);
    (void)src->Exec("ROLLBACK");
    return absl::UnavailableError(
        absl::StrCat("cannot write backup ", partial.path, ": ", message));
  }
  sqlite3_backup* backup =
      sqlite3_backup_init(partial.db, "main", src->raw(), "main");
  if (backup == nullptr) {
    const absl::Status status =
        SqliteStatus(sqlite3_errcode(partial.db), sqlite3_errmsg(partial.db),
                     absl::StrCat("backup to ", dest));
    (void)src->Exec("ROLLBACK");
    return status;
  }
  BackupResult result;
  while (true) {
    rc = sqlite3_backup_step(backup, options.pages_per_step);
    const int64_t total = sqlite3_backup_pagecount(backup);
    result.pages = total - sqlite3_backup_remaining(backup);
    if (options.progress) options.progress(result.pages, total);
    if (rc == SQLITE_OK) {
      if (options.pause > absl::ZeroDuration()) {
        sqlite3_sleep(
            static_cast<int>(absl::ToInt64Milliseconds(options.pause)));
      }
      continue;
    }
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      sqlite3_sleep(10);
      continue;
    }
    break;
  }
  const int finish = sqlite3_backup_finish(backup);
  (void)src->Exec("COMMIT");
  if (rc != SQLITE_DONE || finish != SQLITE_OK) {
    const int code = rc != SQLITE_DONE ? rc : finish;
    return SqliteStatus(code, sqlite3_errmsg(partial.db),
                        absl::StrCat("backup to ", dest));
  }
  HLAB_ASSIGN_OR_RETURN(std::string check, IntegrityCheck(partial.db));
  if (check != "ok") {
    return absl::DataLossError(absl::StrCat(
        "backup ", partial.path, " failed PRAGMA integrity_check: ", check));
  }
  sqlite3_close_v2(partial.db);
  partial.db = nullptr;
  HLAB_RETURN_IF_ERROR(Sync(partial.path, /*directory=*/false));
  if (std::rename(partial.path.c_str(), dest.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot rename ", partial.path, " to ", dest, ": ", strerror(errno)));
  }
  partial.keep = true;
  const fs::path parent = fs::absolute(dest).parent_path();
  HLAB_RETURN_IF_ERROR(Sync(parent.string(), /*directory=*/true));
  result.bytes = static_cast<int64_t>(fs::file_size(dest, ec));
  return result;
}

}  // namespace hlab::store
