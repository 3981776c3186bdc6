// QueryEngine: read-only SQL over the store for `hlab query "SQL"`.
//
// Layers of protection, each enough on its own to stop a write:
//   1. connections opened with SQLITE_OPEN_READONLY and PRAGMA query_only=1;
//   2. an authorizer that allows only SELECT, reads, functions, recursive
//      CTEs and a few read-only pragmas (table_info, index_list, ...), and
//      denies everything else (INSERT, UPDATE, DELETE, DDL, ATTACH,
//      transactions, PRAGMA writes, VACUUM, ...);
//   3. one statement only: after sqlite3_prepare_v2 the tail must be
//      whitespace or comments, so "SELECT 1; DELETE FROM runs" is refused;
//   4. sqlite3_stmt_readonly() must hold.
// Connections also run in SQLite's defensive mode, with no attached
// databases and values capped at 64 MiB. A query gets a time limit (enforced
// with sqlite3_progress_handler) and a row limit.
//
// Thread-safety: thread-safe. Each Run() takes a connection from a small pool
// (opening one if none is idle), so queries run concurrently with each other
// and with the store's writer (WAL).
//
//   HLAB_ASSIGN_OR_RETURN(auto engine, QueryEngine::Open("/data/hlab.db"));
//   HLAB_ASSIGN_OR_RETURN(QueryResult r,
//       engine->Run("SELECT run_id, final_val_loss FROM run_summary", {}));
//   for (const auto& row : r.rows) std::cout << ValueToString(row[1]) << "\n";
#ifndef HLAB_COORDINATOR_STORE_QUERY_H_
#define HLAB_COORDINATOR_STORE_QUERY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/store/database.h"

namespace hlab::store {

// A BLOB column value (bytes), distinct from TEXT.
struct Blob {
  std::string bytes;
  bool operator==(const Blob& other) const { return bytes == other.bytes; }
};

// One typed cell: NULL, INTEGER, REAL, TEXT or BLOB.
using Value = std::variant<std::monostate, int64_t, double, std::string, Blob>;

// Text form for tables and CSV: "" for NULL (callers print NULL as they
// like), integers and reals as written by SQLite, blobs as x'hex'.
std::string ValueToString(const Value& value);

struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
  bool truncated = false;  // more rows existed past QueryOptions::max_rows
};

struct QueryOptions {
  absl::Duration time_limit = absl::Seconds(30);
  int64_t max_rows = 10000;
};

class QueryEngine {
 public:
  // Checks that `path` opens read-only. Unavailable (naming the path) if it
  // cannot be opened.
  static absl::StatusOr<std::unique_ptr<QueryEngine>> Open(
      const std::string& path);

  // Runs one read-only statement. Returns:
  //   InvalidArgument  - malformed SQL, more than one statement, an empty
  //                      query, or anything but a read (the message says
  //                      which, with SQLite's text);
  //   DeadlineExceeded - the query ran past options.time_limit (interrupted);
  //   Unavailable      - the database is busy or cannot be read.
  // Past options.max_rows, rows are dropped and `truncated` is set.
  absl::StatusOr<QueryResult> Run(absl::string_view sql,
                                  const QueryOptions& options);

 private:
  explicit QueryEngine(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<std::unique_ptr<Database>> Acquire();
  void Release(std::unique_ptr<Database> db);

  const std::string path_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Database>> idle_ ABSL_GUARDED_BY(mu_);
};

// Whether `text` holds only whitespace and SQL comments (-- and /* */).
bool IsOnlyWhitespaceOrComments(absl::string_view text);

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_QUERY_H_
