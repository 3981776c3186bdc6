#include "coordinator/store/query.h"
#include <sqlite3.h>

#include <chrono>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace hlab::store {
namespace {

// Pragmas that only read. Those in kPragmasWithArgument take a table or index
// name as argument; the rest are allowed only without one ("PRAGMA
// user_version = 9" has an argument and is denied).
const std::set<std::string>& ReadOnlyPragmas() {
  static const auto* kPragmas = new std::set<std::string>{
      "table_info",       "table_xinfo",     "table_list",
      "index_list",       "index_info",      "index_xinfo",
      "foreign_key_list", "user_version",    "schema_version",
      "page_count",       "page_size",       "freelist_count",
      "database_list",    "collation_list",  "function_list",
      "pragma_list",      "compile_options", "data_version",
      "quick_check",      "integrity_check"};
  return *kPragmas;
}

bool PragmaTakesName(const std::string& name) {
  return name == "table_info" || name == "table_xinfo" ||
         name == "index_list" || name == "index_info" ||
         name == "index_xinfo" || name == "foreign_key_list" ||
         name == "quick_check" || name == "integrity_check";
}

int ReadOnlyAuthorizer(void* /*user*/, int action, const char* arg1,
                       const char* arg2, const char* /*db_name*/,
                       const char* /*trigger*/) {
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_FUNCTION:
      // load_extension is off in the library anyway; deny it by name too.
      return arg2 != nullptr && absl::EqualsIgnoreCase(arg2, "load_extension")
                 ? SQLITE_DENY
                 : SQLITE_OK;
    case SQLITE_PRAGMA: {
      if (arg1 == nullptr) return SQLITE_DENY;
      std::string name = absl::AsciiStrToLower(arg1);
      if (ReadOnlyPragmas().count(name) == 0) return SQLITE_DENY;
      if (arg2 != nullptr && !PragmaTakesName(name)) return SQLITE_DENY;
      return SQLITE_OK;
    }
    default:
      return SQLITE_DENY;
  }
}

constexpr int kMaxValueBytes = 64 << 20;

struct Deadline {
  std::chrono::steady_clock::time_point at;
};

int ProgressHandler(void* user) {
  auto* deadline = static_cast<Deadline*>(user);
  return std::chrono::steady_clock::now() > deadline->at ? 1 : 0;
}

Value ColumnValue(sqlite3_stmt* stmt, int i) {
  switch (sqlite3_column_type(stmt, i)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(stmt, i));
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt, i);
    case SQLITE_TEXT:
      return std::string(
          reinterpret_cast<const char*>(sqlite3_column_text(stmt, i)),
          sqlite3_column_bytes(stmt, i));
    case SQLITE_BLOB: {
      const void* data = sqlite3_column_blob(stmt, i);
      int size = sqlite3_column_bytes(stmt, i);
      return Blob{data ? std::string(static_cast<const char*>(data), size)
                       : std::string()};
    }
    default:
      return std::monostate{};
  }
}

// Finalizes a statement and clears the handlers on scope exit.
class PreparedQuery {
 public:
  explicit PreparedQuery(sqlite3* db) : db_(db) {}
  ~PreparedQuery() {
    sqlite3_finalize(stmt_);
    sqlite3_progress_handler(db_, 0, nullptr, nullptr);
  }
  sqlite3_stmt** out() { return &stmt_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace

std::string ValueToString(const Value& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const {
      char buffer[32];
      std::snprintf(buffer, sizeof(buffer), "%.17g", v);
      // Shortest form that reads back the same double.
      for (int precision = 1; precision < 17; ++precision) {
        char shorter[32];
        std::snprintf(shorter, sizeof(shorter), "%.*g", precision, v);
        if (std::strtod(shorter, nullptr) == v) return shorter;
      }
      return buffer;
    }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const Blob& v) const {
      return absl::StrCat("x'", absl::BytesToHexString(v.bytes), "'");
    }
  };
  return std::visit(Visitor{}, value);
}

bool IsOnlyWhitespaceOrComments(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (text.substr(i, 2) == "--") {
      size_t end = text.find('\n', i);
      if (end == absl::string_view::npos) return true;
      i = end + 1;
    } else if (text.substr(i, 2) == "/*") {
      size_t end = text.find("*/", i + 2);
      if (end == absl::string_view::npos) return true;  // SQLite allows this
      i = end + 2;
    } else {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<QueryEngine>> QueryEngine::Open(
    const std::string& path) {
  std::unique_ptr<QueryEngine> engine(new QueryEngine(path));
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, engine->Acquire());
  engine->Release(std::move(db));
  return engine;
}

absl::StatusOr<std::unique_ptr<Database>> QueryEngine::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Database> db = std::move(idle_.back());
      idle_.pop_back();
      return db;
    }
  }
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                        Database::Open(path_, Database::Mode::kReadOnly));
  sqlite3* raw = db->raw();
  sqlite3_set_authorizer(raw, ReadOnlyAuthorizer, nullptr);
  // Belt and braces: no schema tricks, no attached files, and no value big
  // enough to exhaust the coordinator's memory.
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_limit(raw, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(raw, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  return db;
}

void QueryEngine::Release(std::unique_ptr<Database> db) {
  absl::MutexLock lock(&mu_);
  if (idle_.size() < 4) idle_.push_back(std::move(db));
}

absl::StatusOr<QueryResult> QueryEngine::Run(absl::string_view sql,
                                             const QueryOptions& options) {
  HLAB_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Acquire());
  sqlite3* raw = db->raw();
  QueryResult result;
  absl::Status status = [&]() -> absl::Status {
    Deadline deadline{std::chrono::steady_clock::now() +
                      absl::ToChronoNanoseconds(options.time_limit)};
    PreparedQuery query(raw);
    std::string text(sql);
    const char* tail = nullptr;
    int rc = sqlite3_prepare_v2(
        raw, text.c_str(), static_cast<int>(text.size()), query.out(), &tail);
    if ((rc & 0xff) == SQLITE_AUTH) {
      return absl::InvalidArgumentError(
          absl::StrCat("query refused: only reads are allowed (SQLite: ",
                       sqlite3_errmsg(raw), ")"));
    }
    if (rc != SQLITE_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("query refused: ", sqlite3_errmsg(raw)));
    }
    if (query.get() == nullptr) {
      return absl::InvalidArgumentError("query refused: empty statement");
    }
    size_t consumed = static_cast<size_t>(tail - text.c_str());
    if (!IsOnlyWhitespaceOrComments(absl::string_view(text).substr(consumed))) {
      return absl::InvalidArgumentError(
          "query refused: only one statement is allowed");
    }
    if (!sqlite3_stmt_readonly(query.get())) {
      return absl::InvalidArgumentError(
          "query refused: only read-only statements are allowed");
    }
    sqlite3_progress_handler(raw, 1000, ProgressHandler, &deadline);
    int columns = sqlite3_column_count(query.get());
    for (int i = 0; i < columns; ++i) {
      const char* name = sqlite3_column_name(query.get(), i);
      result.columns.push_back(name ? name : "");
    }
    while (true) {
      rc = sqlite3_step(query.get());
      if (rc == SQLITE_DONE) return absl::OkStatus();
      if (rc != SQLITE_ROW) break;
      if (static_cast<int64_t>(result.rows.size()) >= options.max_rows) {
        result.truncated = true;
        return absl::OkStatus();
      }
      std::vector<Value> row;
      row.reserve(columns);
      for (int i = 0; i < columns; ++i)
        row.push_back(ColumnValue(query.get(), i));
      result.rows.push_back(std::move(row));
    }
    if ((rc & 0xff) == SQLITE_INTERRUPT) {
      return absl::DeadlineExceededError(
          absl::StrCat("query interrupted after its time limit of ",
                       absl::FormatDuration(options.time_limit)));
    }
    return SqliteStatus(rc, sqlite3_errmsg(raw), "query failed");
  }();
  Release(std::move(db));
  if (!status.ok()) return status;
  return result;
}

}  // namespace hlab::store
