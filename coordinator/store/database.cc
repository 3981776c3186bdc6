#include "coordinator/store/database.h"
#include <sqlite3.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace hlab::store {

absl::Status SqliteStatus(int code, absl::string_view message,
                          absl::string_view context) {
  std::string text = context.empty() ? std::string(message)
                                     : absl::StrCat(context, ": ", message);
  switch (code & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return absl::OkStatus();
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
      return absl::UnavailableError(text);
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::ResourceExhaustedError(text);
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(text);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(text);
    case SQLITE_INTERRUPT:
      return absl::DeadlineExceededError(text);
    case SQLITE_AUTH:
    case SQLITE_READONLY:
    case SQLITE_ERROR:
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
      return absl::InvalidArgumentError(text);
    default:
      return absl::InternalError(text);
  }
}

bool IsStorageFailure(int code) {
  switch (code & 0xff) {
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------- Statement

Statement::Statement(Statement&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      in_use_(std::exchange(other.in_use_, nullptr)),
      bind_error_(other.bind_error_) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    in_use_ = std::exchange(other.in_use_, nullptr);
    bind_error_ = other.bind_error_;
  }
  return *this;
}

Statement::~Statement() { Release(); }

void Statement::Release() {
  if (stmt_ == nullptr) return;
  if (in_use_ == nullptr) {
    sqlite3_finalize(stmt_);
  } else {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    *in_use_ = false;
  }
  stmt_ = nullptr;
  in_use_ = nullptr;
}

Statement& Statement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, absl::string_view text) {
  int rc = sqlite3_bind_text(stmt_, index, text.data(),
                             static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindTextOrNull(int index, absl::string_view text) {
  return text.empty() ? BindNull(index) : Bind(index, text);
}

absl::StatusOr<bool> Statement::Step() {
  if (bind_error_ != 0) {
    return SqliteStatus(bind_error_, sqlite3_errstr(bind_error_),
                        "binding a parameter");
  }
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  if (owner_ != nullptr) owner_->NoteFailure(rc, sqlite3_errmsg(db_));
  return SqliteStatus(rc, sqlite3_errmsg(db_));
}

absl::Status Statement::Run() {
  while (true) {
    HLAB_ASSIGN_OR_RETURN(bool has_row, Step());
    if (!has_row) return absl::OkStatus();
  }
}

bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

int64_t Statement::ColumnInt(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

double Statement::ColumnDouble(int column) const {
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     sqlite3_column_bytes(stmt_, column));
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = 0;
}

int64_t Statement::changes() const { return sqlite3_changes(db_); }

// ----------------------------------------------------------------- Database

absl::StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::string& path, Mode mode) {
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY
                                   : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    return SqliteStatus(rc, message,
                        absl::StrCat("cannot open database ", path));
  }
  sqlite3_extended_result_codes(raw, 1);
  std::unique_ptr<Database> db(new Database(raw, path));
  absl::Status status = db->ApplyPragmas(mode);
  if (!status.ok()) {
    return absl::Status(
        status.code(), absl::StrCat("database ", path, ": ", status.message()));
  }
  return db;
}

Database::~Database() {
  for (auto& [sql, cached] : cache_) sqlite3_finalize(cached.stmt);
  sqlite3_close_v2(db_);
}

absl::Status Database::ApplyPragmas(Mode mode) {
  HLAB_RETURN_IF_ERROR(Exec("PRAGMA busy_timeout = 5000"));
  HLAB_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys = ON"));
  if (mode == Mode::kReadOnly) return Exec("PRAGMA query_only = 1");
  // Reading journal_mode touches the file, so this is where a non-database
  // file is found out.
  HLAB_ASSIGN_OR_RETURN(Statement stmt, Prepare("PRAGMA journal_mode = WAL"));
  HLAB_ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  std::string journal =
      has_row ? absl::AsciiStrToLower(stmt.ColumnText(0)) : "";
  if (journal != "wal") {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot enable WAL mode (journal_mode is '", journal,
                     "'); the store needs a local file system"));
  }
  HLAB_RETURN_IF_ERROR(Exec("PRAGMA synchronous = NORMAL"));
  // The writer's working set under metric ingest is the newest leaf page of
  // every active run's series plus the interior pages above them; with the
  // default 2 MiB cache a few hundred runs evict each other and every
  // commit re-reads pages from the WAL. Memory, not durability.
  HLAB_RETURN_IF_ERROR(
      Exec(absl::StrCat("PRAGMA cache_size = -", kWriterCacheKiB)));
  // Group commit writes the hot pages (a run's newest leaf, the interior
  // pages) to the WAL again in every commit that touches them; a checkpoint
  // copies each page once, however often the WAL holds it, so checkpointing
  // less often copies (and fsyncs) less. When the checkpoint happens, not
  // whether a commit is durable.
  return Exec(
      absl::StrCat("PRAGMA wal_autocheckpoint = ", kWalAutocheckpointPages));
}

absl::StatusOr<Statement> Database::Prepare(absl::string_view sql) {
  std::string key(sql);
  auto it = cache_.find(key);
  if (it != cache_.end() && !*it->second.in_use) {
    sqlite3_reset(it->second.stmt);
    sqlite3_clear_bindings(it->second.stmt);
    *it->second.in_use = true;
    return Statement(this, db_, it->second.stmt, it->second.in_use.get());
  }
  const bool cache = it == cache_.end();
  sqlite3_stmt* stmt = nullptr;
  int rc =
      sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()),
                         cache ? SQLITE_PREPARE_PERSISTENT : 0, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteStatus(rc, sqlite3_errmsg(db_),
                        absl::StrCat("preparing '", sql, "'"));
  }
  if (stmt == nullptr) return absl::InvalidArgumentError("empty statement");
  if (!cache) return Statement(this, db_, stmt, /*in_use=*/nullptr);  // owned
  Cached& entry = cache_[std::move(key)];
  entry.stmt = stmt;
  entry.in_use = std::make_unique<bool>(true);
  return Statement(this, db_, stmt, entry.in_use.get());
}

absl::Status Database::Exec(absl::string_view sql) {
  std::string text(sql);
  char* error = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string message = error ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  NoteFailure(rc, message);
  return SqliteStatus(rc, message);
}

absl::StatusOr<int64_t> Database::QueryInt(absl::string_view sql) {
  HLAB_ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  HLAB_ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row)
    return absl::NotFoundError(absl::StrCat("no row for '", sql, "'"));
  return stmt.ColumnInt(0);
}

int64_t Database::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(db_);
}

int64_t Database::total_changes() const { return sqlite3_total_changes64(db_); }

void Database::NoteFailure(int code, absl::string_view message) {
  if (storage_failure_ != 0 || !IsStorageFailure(code)) return;
  storage_failure_ = code;
  storage_failure_message_ = std::string(message);
}

absl::Status Database::TakeStorageFailure() {
  if (storage_failure_ == 0) return absl::OkStatus();
  const char* what = "a file cannot be opened";
  switch (storage_failure_ & 0xff) {
    case SQLITE_FULL:
      what = "disk full";
      break;
    case SQLITE_READONLY:
      what = "read-only";
      break;
    case SQLITE_IOERR:
      what = "I/O error";
      break;
  }
  absl::Status status = absl::UnavailableError(
      absl::StrCat("database ", path_, " cannot be written (", what,
                   "): ", storage_failure_message_));
  storage_failure_ = 0;
  storage_failure_message_.clear();
  return status;
}

bool Database::InTransaction() const {
  return sqlite3_get_autocommit(db_) == 0;
}

}  // namespace hlab::store
