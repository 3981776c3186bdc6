// Read-only queries: results, typed values, and every kind of write refused
// with the database left unchanged.
#include <sqlite3.h>

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using testing::Fixture;
using testing::T;

// Everything a write could change: schema, every row of every table, and the
// pragmas a write could flip. Read with a plain sqlite3 connection.
std::string Snapshot(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  std::string out;
  auto dump = [&](const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr),
              SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        const unsigned char* text = sqlite3_column_text(stmt, i);
        out += text ? reinterpret_cast<const char*>(text) : "NULL";
        out += '|';
      }
      out += '\n';
    }
    sqlite3_finalize(stmt);
  };
  dump("PRAGMA user_version");
  dump("PRAGMA journal_mode");
  dump("SELECT type, name, sql FROM sqlite_schema ORDER BY name");
  std::vector<std::string> tables;
  {
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT name FROM sqlite_schema WHERE type = 'table'"
                       " ORDER BY name",
                       -1, &stmt, nullptr);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      tables.push_back(
          reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
    }
    sqlite3_finalize(stmt);
  }
  for (const std::string& table : tables) {
    out += "== " + table + "\n";
    dump("SELECT * FROM \"" + table + "\" ORDER BY 1, 2");
  }
  sqlite3_close(db);
  return out;
}

class StoreQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        f_.store->LeaseTask("r1.train", "w1", T(0), absl::Seconds(30)).ok());
    MetricPoint p;
    p.name = "train_loss";
    p.step = 1;
    p.value = 4.5;
    ASSERT_TRUE(f_.store->RecordMetrics("r1.train", 1, {p}, T(1)).ok());
    auto engine = QueryEngine::Open(f_.store->path());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(engine).value();
  }

  Fixture f_;
  std::unique_ptr<QueryEngine> engine_;
};

TEST_F(StoreQueryTest, ReturnsColumnsAndTypedValues) {
  auto result = engine_->Run(
      "SELECT 1 AS i, 2.5 AS r, 'x' AS t, NULL AS n, x'00ff' AS b", {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->columns,
            (std::vector<std::string>{"i", "r", "t", "n", "b"}));
  ASSERT_EQ(result->rows.size(), 1u);
  const auto& row = result->rows[0];
  EXPECT_EQ(std::get<int64_t>(row[0]), 1);
  EXPECT_EQ(std::get<double>(row[1]), 2.5);
  EXPECT_EQ(std::get<std::string>(row[2]), "x");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(row[3]));
  EXPECT_EQ(std::get<Blob>(row[4]).bytes, std::string("\0\xff", 2));
  EXPECT_EQ(ValueToString(row[1]), "2.5");
  EXPECT_EQ(ValueToString(row[4]), "x'00ff'");
}

TEST_F(StoreQueryTest, ReadsTablesViewsAndSafePragmas) {
  auto runs = engine_->Run(
      "-- leading comment\nSELECT run_id, state FROM run_summary; -- done", {});
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(runs->rows[0][1]), "RUNNING");
  auto with = engine_->Run(
      "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n"
      " WHERE x < 5) SELECT sum(x) FROM n",
      {});
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(std::get<int64_t>(with->rows[0][0]), 15);
  auto info = engine_->Run("PRAGMA table_info(runs)", {});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->rows.size(), 5u);
  auto version = engine_->Run("PRAGMA user_version", {});
  ASSERT_TRUE(version.ok()) << version.status();
  auto check = engine_->Run("PRAGMA quick_check", {});
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(std::get<std::string>(check->rows[0][0]), "ok");
}

TEST_F(StoreQueryTest, RowLimitTruncates) {
  QueryOptions options;
  options.max_rows = 3;
  auto result = engine_->Run(
      "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n"
      " WHERE x < 100) SELECT x FROM n",
      options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->rows.size(), 3u);
  EXPECT_TRUE(result->truncated);
}

TEST_F(StoreQueryTest, EveryWriteIsRefusedAndNothingChanges) {
  const std::string path = f_.store->path();
  const std::string before = Snapshot(path);
  const std::vector<std::string> kWrites = {
      "INSERT INTO runs (id) VALUES ('evil')",
      "UPDATE runs SET state = 'SUCCEEDED'",
      "DELETE FROM runs",
      "DELETE FROM metrics",
      "DROP TABLE metrics",
      "DROP VIEW run_summary",
      "CREATE TABLE evil (x)",
      "CREATE TEMP TABLE evil (x)",
      "CREATE INDEX evil ON runs (arch)",
      "ALTER TABLE runs ADD COLUMN evil TEXT",
      "ATTACH DATABASE ':memory:' AS evil",
      "ATTACH DATABASE '" + path + ".evil' AS evil",
      "DETACH DATABASE main",
      "PRAGMA journal_mode = DELETE",
      "PRAGMA user_version = 9",
      "PRAGMA foreign_keys = OFF",
      "PRAGMA query_only = 0",
      "PRAGMA writable_schema = 1",
      "PRAGMA wal_checkpoint(TRUNCATE)",
      "VACUUM",
      "VACUUM INTO '" + path + ".copy'",
      "REINDEX",
      "ANALYZE",
      "BEGIN",
      "SAVEPOINT x",
      "SELECT 1; DELETE FROM runs",
      "SELECT 1; SELECT 2",
      "WITH x AS (SELECT 1) DELETE FROM runs",
      "WITH x AS (SELECT 1) UPDATE runs SET state = 'FAILED'",
      "WITH x AS (SELECT 1) INSERT INTO runs (id) SELECT * FROM x",
      "REPLACE INTO workers (id, address, registered_at, last_heartbeat)"
      " VALUES ('x', 'y', 0, 0)",
      "SELECT load_extension('/tmp/evil.so')",
      "",
      "   -- only a comment",
      "SELEC 1",
  };
  for (const std::string& sql : kWrites) {
    auto result = engine_->Run(sql, {});
    EXPECT_FALSE(result.ok()) << "not refused: " << sql;
    if (!result.ok()) {
      EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
          << sql << ": " << result.status();
    }
  }
  // The connections still work after all the refusals.
  EXPECT_TRUE(engine_->Run("SELECT count(*) FROM runs", {}).ok());
  EXPECT_EQ(Snapshot(path), before);
  EXPECT_TRUE(f_.store->GetRun("r1").ok());
}

TEST_F(StoreQueryTest, HugeValuesAreRefused) {
  auto result = engine_->Run("SELECT length(randomblob(1000000000))", {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
}

TEST_F(StoreQueryTest, LongQueryHitsTheTimeLimit) {
  const std::string before = Snapshot(f_.store->path());
  QueryOptions options;
  options.time_limit = absl::Milliseconds(50);
  // Never ends on its own.
  auto result = engine_->Run(
      "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)"
      " SELECT count(*) FROM n",
      options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << result.status();
  EXPECT_EQ(Snapshot(f_.store->path()), before);
  EXPECT_TRUE(engine_->Run("SELECT 1", {}).ok());
}

TEST(StoreQueryOpenTest, MissingDatabaseIsUnavailable) {
  testing::TempDir dir;
  auto engine = QueryEngine::Open(dir.File("missing.db"));
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(engine.status().message(), "missing.db"));
}

TEST(StoreQueryTextTest, WhitespaceAndComments) {
  EXPECT_TRUE(IsOnlyWhitespaceOrComments(""));
  EXPECT_TRUE(IsOnlyWhitespaceOrComments("  \n -- x\n /* y */ "));
  EXPECT_FALSE(IsOnlyWhitespaceOrComments(" DELETE FROM runs"));
  EXPECT_FALSE(IsOnlyWhitespaceOrComments("/* c */ ;"));
}

}  // namespace
}  // namespace hlab::store
