// Partial-curve prediction on a sweep's runs (fits/curve_backtest.h): the
// reader of each run's schedule and curve, against canned rows of two runs
// that share a WSD trunk with losses drawn from a known law, and the
// backtest on them.
#include "fits/curve_backtest.h"
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "model/config/model_config.h"
#include "task/lr_schedule.h"
#include "task/run_config.h"

namespace hlab::fits {
namespace {

using store::Value;

const analysis::CurveLaw kTruth{/*l0=*/1.5, /*a=*/0.8, /*alpha=*/0.5,
                                /*c=*/0.4, /*decay=*/0.999};

std::string Config(int64_t steps) {
  task::RunConfig run;
  run.model = *model::ModelConfigFromJson(
      R"({"arch": "full", "d_model": 24, "n_layers": 2, "n_heads": 4,
          "n_kv_heads": 2})");
  run.seq_len = 128;
  run.batch_tokens = 512;
  run.tokens = steps * 512;
  run.steps = steps;
  run.data.seed = 0;
  run.data.corpus_version = task::kSyntheticCorpusVersion;
  run.schedule.peak_lr = 3e-3;
  run.schedule.warmup_steps = 10;
  return task::RunConfigToJson(run);
}

// The planned LR of each update of a run with `steps` updates.
std::vector<double> Schedule(int64_t steps) {
  task::WsdConfig c;
  c.peak_lr = 3e-3;
  c.warmup_steps = 10;
  c.total_steps = steps;
  const task::WsdSchedule s(c);
  std::vector<double> lr(steps);
  for (int64_t i = 0; i < steps; ++i) lr[i] = s.LearningRate(i);
  return lr;
}

// train_loss and lr rows (name, step, value) of a run: the law plus noise.
// Trunk points (step <= the run's branch step) get noise seeded by step
// alone, so two runs of one trunk hold the same values there, as the
// coordinator copies them.
std::vector<std::vector<Value>> Metrics(int64_t steps, uint32_t seed) {
  const std::vector<double> lr = Schedule(steps);
  const analysis::ScheduleAreas areas =
      analysis::ComputeScheduleAreas(lr, 10, kTruth.decay);
  const int64_t branch = steps - steps / 10;
  std::vector<std::vector<Value>> rows;
  for (int64_t k = 1; k <= steps; ++k) {
    std::mt19937_64 rng(k <= branch ? k : seed * 100000 + k);
    std::normal_distribution<double> noise(0, 0.005);
    const double loss =
        k == 1 ? 5.0 : kTruth.Loss(areas.s1[k - 1], areas.s2[k - 1]);
    rows.push_back({std::string("train_loss"), k, loss + noise(rng)});
  }
  for (int64_t k = 1; k <= steps; ++k) {
    rows.push_back({std::string("lr"), k, lr[k - 1]});
  }
  return rows;
}

struct CannedDb {
  std::vector<std::string> asked;
  RunQuery Query() {
    return
        [this](const std::string& sql) -> absl::StatusOr<store::QueryResult> {
          asked.push_back(sql);
          store::QueryResult r;
          if (sql.find("FROM runs r") != std::string::npos) {
            r.rows.push_back({std::string("short"), std::string("full"),
                              std::string("S1"), std::string("SUCCEEDED"),
                              int64_t{1000 * 512}, int64_t{12800}, Config(1000),
                              std::string("trunk-1")});
            r.rows.push_back({std::string("long"), std::string("full"),
                              std::string("S1"), std::string("SUCCEEDED"),
                              int64_t{4000 * 512}, int64_t{12800}, Config(4000),
                              std::string("trunk-1")});
            r.rows.push_back({std::string("broken"), std::string("full"),
                              std::string("S2"), std::string("SUCCEEDED"),
                              int64_t{512}, int64_t{12800},
                              std::string("{\"format\": \"other\"}"), Value{}});
            return r;
          }
          if (sql.find("'short'") != std::string::npos)
            r.rows = Metrics(1000, 1);
          if (sql.find("'long'") != std::string::npos)
            r.rows = Metrics(4000, 2);
          return r;
        };
  }
};

TEST(CurveBacktestTest, ReadsEachRunsScheduleTrunkAndCurve) {
  CannedDb db;
  absl::StatusOr<std::vector<RunCurve>> runs = ReadRunCurves(db.Query(), 3);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_NE(db.asked[0].find("sr.sweep_id = 3"), std::string::npos);
  EXPECT_NE(db.asked[0].find("'DECAY'"), std::string::npos);
  ASSERT_EQ(runs->size(), 3u);
  const RunCurve& s = (*runs)[0];
  EXPECT_EQ(s.run_id, "short");
  EXPECT_EQ(s.trunk, "trunk-1");
  EXPECT_EQ(s.steps, 1000);
  EXPECT_EQ(s.branch_step, 900);
  EXPECT_EQ(s.warmup_steps, 10);
  ASSERT_EQ(s.lr.size(), 1000u);
  EXPECT_DOUBLE_EQ(s.lr[500], 3e-3);
  EXPECT_EQ(s.train_loss.size(), 1000u);
  EXPECT_EQ(s.lr_mismatch, 0);
  EXPECT_EQ((*runs)[1].branch_step, 3600);
  EXPECT_TRUE(s.skipped.empty());
  const RunCurve& broken = (*runs)[2];
  EXPECT_NE(broken.skipped.find("config: "), std::string::npos)
      << broken.skipped;
  EXPECT_EQ(db.asked.size(), 3u);  // no metrics query for a skipped run
}

TEST(CurveBacktestTest, TheLawBeatsTheLastValueOnceASiblingHasDecayed) {
  CannedDb db;
  absl::StatusOr<std::vector<RunCurve>> runs = ReadRunCurves(db.Query(), 1);
  ASSERT_TRUE(runs.ok()) << runs.status();
  BacktestOptions options;
  options.law.min_updates = 20;
  absl::StatusOr<CurveBacktest> b = BacktestCurves(*runs, options);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->runs, 2);
  EXPECT_EQ(b->skipped, 1);
  ASSERT_EQ(b->rows.size(), 6u);
  ASSERT_EQ(b->summaries.size(), 3u);
  std::map<std::pair<std::string, double>, BacktestRow> rows;
  for (const BacktestRow& r : b->rows) rows[{r.run_id, r.fraction}] = r;
  // The long run at 50% (step 2000) sees the short run's decay (steps
  // 901-1000): C is measured, the final loss predicted within 0.01.
  const BacktestRow& half = rows[{"long", 0.5}];
  ASSERT_TRUE(half.predicted.has_value()) << half.error;
  EXPECT_EQ(half.cutoff_step, 2000);
  EXPECT_EQ(half.siblings_used, 1);
  EXPECT_TRUE(half.c_from_data);
  EXPECT_NEAR(*half.predicted, half.measured, 0.01);
  EXPECT_LT(std::abs(*half.predicted - half.measured),
            std::abs(half.last_window - half.measured));
  EXPECT_LE(*half.lower, half.measured);
  EXPECT_GE(*half.upper, half.measured);
  EXPECT_NEAR(half.c, kTruth.c, 0.1);
  // The interval is widened by the law's error on the run's own first half.
  ASSERT_TRUE(half.model_error.has_value());
  EXPECT_GE(*half.model_error, 0);
  EXPECT_LT(*half.model_error, 0.05);
  // The short run never sees a decay before its end, and with one other
  // group there is no prior: C = 0, flagged.
  const BacktestRow& short_half = rows[{"short", 0.5}];
  ASSERT_TRUE(short_half.predicted.has_value()) << short_half.error;
  EXPECT_FALSE(short_half.c_from_data);
  EXPECT_EQ(short_half.siblings_used, 0);
  EXPECT_EQ(short_half.c, 0);
  EXPECT_EQ(b->summaries[1].runs, 2);
  EXPECT_EQ(b->summaries[1].c_from_data, 1);

  // Without siblings the long run's C is not measured at 50% either.
  options.siblings = false;
  b = BacktestCurves(*runs, options);
  ASSERT_TRUE(b.ok()) << b.status();
  for (const BacktestRow& r : b->rows) {
    if (r.run_id == "long" && r.fraction == 0.5) {
      EXPECT_FALSE(r.c_from_data);
      EXPECT_EQ(r.siblings_used, 0);
    }
  }
}

// A run in progress: everything stored now predicts its final window.
TEST(CurveBacktestTest, PredictsARunInProgressFromWhatIsStored) {
  CannedDb db;
  absl::StatusOr<std::vector<RunCurve>> runs = ReadRunCurves(db.Query(), 1);
  ASSERT_TRUE(runs.ok()) << runs.status();
  RunCurve& long_run = (*runs)[1];
  ASSERT_EQ(long_run.run_id, "long");
  double final_mean = 0;
  for (const auto& [step, loss] : long_run.train_loss) {
    if (step > 4000 - 40) final_mean += loss / 40;
  }
  long_run.state = "RUNNING";
  long_run.train_loss.resize(2000);  // steps 1-2000
  absl::StatusOr<std::vector<BacktestRow>> rows =
      PredictUnfinished(*runs, BacktestOptions());
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);  // the finished run is not predicted
  const BacktestRow& r = (*rows)[0];
  EXPECT_EQ(r.run_id, "long");
  EXPECT_EQ(r.cutoff_step, 2000);
  EXPECT_DOUBLE_EQ(r.fraction, 0.5);
  ASSERT_TRUE(r.predicted.has_value()) << r.error;
  EXPECT_TRUE(r.c_from_data);  // the short run's decay
  EXPECT_NEAR(*r.predicted, final_mean, 0.01);
  EXPECT_LE(*r.lower, final_mean);
  EXPECT_GE(*r.upper, final_mean);
}

// The queries run on the store's real schema (an empty sweep).
TEST(CurveBacktestTest, QueriesRunOnTheStoresSchema) {
  std::string dir = ::testing::TempDir() + "hlab_curves_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string db = dir + "/hlab.db";
  {
    auto store = store::Store::Open(db);
    ASSERT_TRUE(store.ok()) << store.status();
  }
  auto engine = store::QueryEngine::Open(db);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const RunQuery query = [&](const std::string& sql) {
    return (*engine)->Run(sql, {});
  };
  absl::StatusOr<std::vector<RunCurve>> runs = ReadRunCurves(query, 1);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_TRUE(runs->empty());
  absl::StatusOr<store::QueryResult> metrics = query(
      "SELECT name, step, value FROM metrics WHERE run_id = 'x' AND name IN "
      "('train_loss', 'lr') ORDER BY name, step");
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  engine->reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(CurveBacktestTest, BadOptionsNameTheField) {
  BacktestOptions options;
  options.fractions = {0.5, 1.0};
  EXPECT_NE(BacktestCurves({}, options).status().message().find("fractions"),
            std::string::npos);
  options.fractions = {0.5};
  options.final_window = 0;
  EXPECT_NE(BacktestCurves({}, options).status().message().find("final_window"),
            std::string::npos);
}

}  // namespace
}  // namespace hlab::fits
