// `hlab report` from a running coordinator (the Query RPC): the same demo
// sweep, stored through an in-process coordinator's store, gives the same
// tables as the report from its database file; without stored fits the
// report says how to get them.
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "coordinator/server/coordinator.h"
#include "tests/coordinator/server/coordinator_test_util.h"
#include "tests/report/report_test_util.h"

namespace hlab::report {
namespace {

namespace fs = std::filesystem;
using coordinator::testing::FakeClock;
using coordinator::testing::TempDir;
using testing::Hlab;
using testing::ReadCsv;
using testing::ReadFile;
using testing::Result;

class ReportRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator::CoordinatorOptions options =
        coordinator::testing::TestOptions(dir_.File("hlab.db"), &clock_);
    options.auto_fit = false;
    coordinator_ = coordinator::testing::StartOrDie(options);
    ASSERT_NE(coordinator_, nullptr);
  }

  Result Report(const std::string& out, bool from_db) {
    if (from_db) {
      return Hlab({"report", "--db", dir_.File("hlab.db"), "--sweep", "demo",
                   "--out", out});
    }
    return Hlab({"report", "--sweep", "demo", "--out", out, "--address",
                 coordinator_->address()});
  }

  FakeClock clock_;
  TempDir dir_;
  std::unique_ptr<coordinator::Coordinator> coordinator_;
};

TEST_F(ReportRemoteTest, SameTablesAsFromTheDatabase) {
  store::Store& store = *coordinator_->store();
  const int64_t sweep_id = testing::StoreDemoSweep(store, {});
  testing::StoreTrueFits(store, sweep_id, "loss");
  testing::StoreTrueFits(store, sweep_id, "longppl");

  const std::string remote = dir_.File("remote");
  const std::string local = dir_.File("local");
  const Result r = Report(remote, /*from_db=*/false);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("48 runs, 8 fits, 8 figures"), std::string::npos)
      << r.out;
  const Result l = Report(local, /*from_db=*/true);
  ASSERT_EQ(l.code, 0) << l.err;
  for (const char* file : {"runs.csv", "fits.csv", "data/loss_gdn.dat",
                           "loss_vs_tokens.gp", "longppl_residuals.gp"}) {
    SCOPED_TRACE(file);
    const std::string text = ReadFile(fs::path(remote) / file);
    EXPECT_GT(text.size(), 100u);
    EXPECT_EQ(text, ReadFile(fs::path(local) / file));
  }
  EXPECT_EQ(ReadCsv(fs::path(remote) / "runs.csv").rows.size(), 48u);
  const std::string index = ReadFile(fs::path(remote) / "index.html");
  EXPECT_NE(index.find("from the coordinator at " + coordinator_->address()),
            std::string::npos);
}

TEST_F(ReportRemoteTest, WithoutStoredFitsSaysHowToGetThem) {
  testing::StoreDemoSweep(*coordinator_->store(), {});
  const Result r = Report(dir_.File("remote"), /*from_db=*/false);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("no fits are stored for sweep 1 yet"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("hlab report --db"), std::string::npos);
  EXPECT_NE(r.out.find("48 runs, 0 fits, 4 figures"), std::string::npos)
      << r.out;

  const Result unknown =
      Hlab({"report", "--sweep", "nope", "--out", dir_.File("x"), "--address",
            coordinator_->address()});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("no sweep 'nope' in the coordinator at"),
            std::string::npos)
      << unknown.err;
}

}  // namespace
}  // namespace hlab::report
