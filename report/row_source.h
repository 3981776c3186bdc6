// RowSource: "run SQL, get rows", the one thing `hlab report` needs from
// where the results live. Two implementations: DatabaseRowSource reads a
// database file directly through the store's read-only QueryEngine (`hlab
// report --db FILE`); the CLI's remote source sends the same SQL through the
// coordinator's Query RPC (cli/report_command.cc). The report code above it
// is the same for both.
//
// Thread-safety: DatabaseRowSource is thread-safe (QueryEngine is); other
// implementations say so themselves.
//
//   HLAB_ASSIGN_OR_RETURN(std::unique_ptr<DatabaseRowSource> source,
//                         DatabaseRowSource::Open("hlab-up/hlab.db"));
//   HLAB_ASSIGN_OR_RETURN(store::QueryResult rows,
//                         source->Query("SELECT id, name FROM sweeps"));
#ifndef HLAB_REPORT_ROW_SOURCE_H_
#define HLAB_REPORT_ROW_SOURCE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/store/query.h"

namespace hlab::report {

class RowSource {
 public:
  virtual ~RowSource() = default;

  // Runs one read-only SQL statement and returns all its rows. Errors as
  // the underlying engine or RPC gives them (InvalidArgument for bad SQL,
  // Unavailable when the source cannot be reached, ...); a result cut by a
  // row limit is an error (ResourceExhausted), never silently partial.
  virtual absl::StatusOr<store::QueryResult> Query(const std::string& sql) = 0;

  // Where the rows come from, for messages: "database hlab-up/hlab.db".
  virtual std::string Describe() const = 0;

  // The local query engine when the source is a database file (fits can
  // then be computed with fits::FitSweepRuns); nullptr otherwise.
  virtual store::QueryEngine* LocalEngine() { return nullptr; }
};

// A database file opened read-only.
class DatabaseRowSource final : public RowSource {
 public:
  // NotFound when `path` does not exist or cannot be read (the message names
  // it and says to give the coordinator's database file); Unavailable when
  // it is not a database SQLite can open.
  static absl::StatusOr<std::unique_ptr<DatabaseRowSource>> Open(
      const std::string& path);

  absl::StatusOr<store::QueryResult> Query(const std::string& sql) override;
  std::string Describe() const override { return "database " + path_; }
  store::QueryEngine* LocalEngine() override { return engine_.get(); }

 private:
  DatabaseRowSource(std::string path,
                    std::unique_ptr<store::QueryEngine> engine)
      : path_(std::move(path)), engine_(std::move(engine)) {}

  const std::string path_;
  std::unique_ptr<store::QueryEngine> engine_;
};

// Cell helpers: a finite REAL or INTEGER as double; TEXT as string ("" for
// anything else).
std::optional<double> RealValue(const store::Value& value);
std::string TextValue(const store::Value& value);

}  // namespace hlab::report

#endif  // HLAB_REPORT_ROW_SOURCE_H_
