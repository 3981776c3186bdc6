// Database: a small RAII wrapper around one SQLite connection (sqlite3*),
// with cached prepared statements and SQLite result codes turned into
// absl::Status.
//
// Thread-safety: a Database is NOT thread-safe. The store gives the writer
// connection to its writer thread alone and guards its read connection with
// a mutex; a Database must be used by one thread at a time.
//
//   HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
//                         Database::Open(path, Database::Mode::kReadWrite));
//   HLAB_ASSIGN_OR_RETURN(Statement stmt,
//                         db->Prepare("SELECT state FROM runs WHERE id = ?"));
//   stmt.Bind(1, run_id);
//   HLAB_ASSIGN_OR_RETURN(bool has_row, stmt.Step());
//   if (has_row) state = stmt.ColumnText(0);
#ifndef HLAB_COORDINATOR_STORE_DATABASE_H_
#define HLAB_COORDINATOR_STORE_DATABASE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hlab::store {

// clang-format off
// Maps a SQLite result code and message to an absl::Status:
//   SQLITE_BUSY, SQLITE_LOCKED, SQLITE_CANTOPEN, SQLITE_IOERR -> Unavailable
//   SQLITE_FULL, SQLITE_NOMEM                          -> ResourceExhausted
//   SQLITE_CONSTRAINT                                  -> FailedPrecondition
//   SQLITE_CORRUPT, SQLITE_NOTADB                      -> DataLoss
//   SQLITE_INTERRUPT                                   -> DeadlineExceeded
//   SQLITE_AUTH, SQLITE_READONLY, SQLITE_ERROR, ...    -> InvalidArgument
//   anything else                                      -> Internal
// clang-format on
// `context` is prefixed to the message ("context: sqlite message"). The
// writer turns a failure of the storage itself (IsStorageFailure) into
// Unavailable (Database::TakeStorageFailure), whatever this maps it to.
absl::Status SqliteStatus(int code, absl::string_view message,
                          absl::string_view context = "");

// Whether `code` (a primary or extended result code) is a failure of the
// storage under the database rather than of the statement: the disk or file
// system is full (SQLITE_FULL), the file or file system is read-only
// (SQLITE_READONLY), an I/O error (SQLITE_IOERR), a file (the WAL, a
// journal) cannot be opened (SQLITE_CANTOPEN).
bool IsStorageFailure(int code);

class Database;

// A prepared statement borrowed from a Database's cache (or owned, for
// uncached ones). Move-only. Destroying it resets the statement and clears its
// bindings, so a cached statement never holds a read snapshot open.
class Statement {
 public:
  Statement() = default;
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Binds parameter `index` (1-based). A bind error is remembered and
  // returned by the next Step()/Run().
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) {
    return Bind(index, static_cast<int64_t>(value));
  }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, absl::string_view text);
  Statement& Bind(int index, const std::string& text) {
    return Bind(index, absl::string_view(text));
  }
  Statement& Bind(int index, const char* text) {
    return Bind(index, absl::string_view(text));
  }
  Statement& BindNull(int index);
  // Binds NULL when `text` is empty, the text otherwise.
  Statement& BindTextOrNull(int index, absl::string_view text);

  // Advances to the next row: true if a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps until done (for statements that return no rows).
  absl::Status Run();

  // Column accessors for the current row (0-based).
  bool IsNull(int column) const;
  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;  // "" for NULL

  // Resets to run again (from the first row), clearing the bindings.
  void Reset();

  // Rows changed by the last Run() (sqlite3_changes of the connection).
  int64_t changes() const;

  sqlite3_stmt* raw() const { return stmt_; }

 private:
  friend class Database;
  Statement(Database* owner, sqlite3* db, sqlite3_stmt* stmt, bool* in_use)
      : owner_(owner), db_(db), stmt_(stmt), in_use_(in_use) {}
  void Release();

  Database* owner_ = nullptr;  // told of storage failures
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  bool* in_use_ = nullptr;  // the cache entry's flag; null if owned
  int bind_error_ = 0;      // first failing sqlite3_bind_* code, or 0
};

class Database {
 public:
  enum class Mode {
    kReadWrite,  // create if missing; WAL, synchronous=NORMAL, foreign keys,
                 // a page cache of kWriterCacheKiB, WAL auto-checkpoint
                 // every kWalAutocheckpointPages
    kReadOnly,   // SQLITE_OPEN_READONLY plus PRAGMA query_only=1
  };
  // Page cache of a read-write connection (PRAGMA cache_size), in KiB.
  static constexpr int kWriterCacheKiB = 64 * 1024;
  // WAL pages after which a commit checkpoints (PRAGMA wal_autocheckpoint;
  // SQLite's default is 1000). The Store's writer connection checkpoints on
  // a thread of its own at this size instead (wal_checkpointer.h).
  static constexpr int kWalAutocheckpointPages = 8000;

  // Opens `path`. Returns Unavailable naming the path if it cannot be opened
  // (missing directory, permissions), InvalidArgument if WAL mode cannot be
  // enabled there (kReadWrite), DataLoss if the file is not a database.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        Mode mode);

  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Returns a cached prepared statement for `sql` (one statement; prepared
  // once per connection). While it is in use, preparing the same text again
  // gives a fresh, uncached statement, so nested uses never share a cursor.
  // InvalidArgument for malformed SQL.
  absl::StatusOr<Statement> Prepare(absl::string_view sql);

  // Runs one or more statements without results (schema, BEGIN/COMMIT).
  absl::Status Exec(absl::string_view sql);

  // Runs `sql` (a single-value query) and returns its first column as int.
  absl::StatusOr<int64_t> QueryInt(absl::string_view sql);

  // Whether a transaction is open (false after SQLite rolled one back on its
  // own, e.g. on SQLITE_FULL).
  bool InTransaction() const;

  // Rowid of the last INSERT on this connection.
  int64_t last_insert_rowid() const;

  // Rows changed by every statement on this connection since it was opened
  // (sqlite3_total_changes64): a transaction that moved it wrote something.
  int64_t total_changes() const;

  // The first storage failure (IsStorageFailure) met by a statement or Exec
  // on this connection since the last call, as Unavailable: "database PATH
  // cannot be written (disk full | read-only | I/O error | a file cannot be
  // opened): <SQLite's message>". OK if there was none. Clears it, so the
  // caller takes it before and after the work it wants to judge.
  absl::Status TakeStorageFailure();

  const std::string& path() const { return path_; }
  sqlite3* raw() const { return db_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status ApplyPragmas(Mode mode);
  friend class Statement;
  // Remembers `code` if it is the first storage failure since the last
  // TakeStorageFailure().
  void NoteFailure(int code, absl::string_view message);

  sqlite3* db_;
  std::string path_;
  int storage_failure_ = 0;  // its SQLite code; 0: none
  std::string storage_failure_message_;
  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    std::unique_ptr<bool> in_use;  // stable address for Statement
  };
  std::unordered_map<std::string, Cached> cache_;
};

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_DATABASE_H_
