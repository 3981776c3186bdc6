// The store's versioned schema: an ordered list of migrations, applied at
// start-up, each in its own transaction, with PRAGMA user_version recording
// how many have been applied.
//
// Thread-safety: Migrate() runs on a connection no other thread uses (the
// store calls it before starting its writer thread).
//
//   HLAB_ASSIGN_OR_RETURN(auto db, Database::Open(path, Mode::kReadWrite));
//   HLAB_RETURN_IF_ERROR(Migrate(*db));  // now at kSchemaVersion
//
// Policy (docs/store.md): migrations are append-only. A released migration is
// never edited; a change is a new migration at the end of the list.
#ifndef HLAB_COORDINATOR_STORE_SCHEMA_H_
#define HLAB_COORDINATOR_STORE_SCHEMA_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/store/database.h"

namespace hlab::store {

struct Migration {
  int version;      // user_version after this migration (1, 2, ...)
  const char* sql;  // one or more statements
};

// All migrations in order; version i+1 at index i.
const std::vector<Migration>& Migrations();

// The schema version this binary writes: Migrations().size().
int SchemaVersion();

// Reads PRAGMA user_version.
absl::StatusOr<int> CurrentSchemaVersion(Database& db);

// Applies every migration past the database's user_version, each in one
// BEGIN IMMEDIATE transaction. Idempotent. Returns FailedPrecondition
// "database schema vN is newer than this hlab (vM): upgrade hlab" when the
// file was written by a newer hlab (nothing is changed then), or the SQLite
// error of a migration that failed (that migration is rolled back; earlier
// ones stay applied).
absl::Status Migrate(Database& db);

}  // namespace hlab::store

#endif  // HLAB_COORDINATOR_STORE_SCHEMA_H_
