// `hlab backup`: flags, the copy of a database that a store holds open and
// writes to, and the refusal to overwrite.
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "cli/cli.h"
#include "coordinator/store/store.h"

namespace hlab::cli {
namespace {

namespace fs = std::filesystem;

struct Output {
  int code;
  std::string out, err;
};

Output Hlab(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunCli(args, out, err);
  return {code, out.str(), err.str()};
}

int64_t Count(const std::string& path, const std::string& table) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  const std::string sql = "SELECT count(*) FROM " + table;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK);
  int64_t n = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return n;
}

class BackupCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "hlab_backup_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto store = store::Store::Open(dir_ + "/hlab.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    store::SweepSpec sweep;
    sweep.name = "b";
    sweep.spec_hash = "h";
    sweep.spec = "{}";
    sweep.max_retries = 1;
    ASSERT_TRUE(store_->CreateSweep(sweep, absl::Now()).ok());
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<store::Store> store_;  // the "coordinator", still open
};

TEST_F(BackupCommandTest, CopiesALiveDatabaseAndRefusesToOverwrite) {
  const std::string copy = dir_ + "/copy.db";
  const Output first = Hlab(
      {"backup", "--db", dir_ + "/hlab.db", "--out", copy, "--pages", "1"});
  ASSERT_EQ(first.code, kExitOk) << first.err;
  EXPECT_NE(first.out.find("integrity ok"), std::string::npos) << first.out;
  EXPECT_NE(first.err.find("100%"), std::string::npos) << first.err;
  EXPECT_EQ(Count(copy, "sweeps"), 1);

  const Output again =
      Hlab({"backup", "--db", dir_ + "/hlab.db", "--out", copy, "--quiet"});
  EXPECT_EQ(again.code, kExitFailed);
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;

  store::SweepSpec second;
  second.name = "c";
  second.spec_hash = "h2";
  second.spec = "{}";
  second.max_retries = 1;
  ASSERT_TRUE(store_->CreateSweep(second, absl::Now()).ok());
  const Output forced = Hlab({"backup", "--db", dir_ + "/hlab.db", "--out",
                              copy, "--force", "--quiet"});
  ASSERT_EQ(forced.code, kExitOk) << forced.err;
  EXPECT_EQ(forced.err, "");
  EXPECT_EQ(Count(copy, "sweeps"), 2);
}

TEST_F(BackupCommandTest, BadFlagsAreUsageErrors) {
  EXPECT_EQ(Hlab({"backup", "--out", dir_ + "/x.db"}).code, kExitUsage);
  EXPECT_EQ(Hlab({"backup", "--db", dir_ + "/hlab.db"}).code, kExitUsage);
  const Output pages = Hlab({"backup", "--db", dir_ + "/hlab.db", "--out",
                             dir_ + "/x.db", "--pages", "0"});
  EXPECT_EQ(pages.code, kExitUsage);
  EXPECT_NE(pages.err.find("--pages"), std::string::npos) << pages.err;
  const Output missing =
      Hlab({"backup", "--db", dir_ + "/nope.db", "--out", dir_ + "/x.db"});
  EXPECT_EQ(missing.code, kExitFailed);
  EXPECT_NE(missing.err.find("nope.db"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(dir_ + "/x.db"));
}

}  // namespace
}  // namespace hlab::cli
