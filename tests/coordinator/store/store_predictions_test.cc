// Live predictions: generations per sweep, their round trip, what is
// refused, the run_predictions view, and durability across a reopen.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/store/query.h"
#include "coordinator/store/store.h"
#include "tests/coordinator/store/store_test_util.h"

namespace hlab::store {
namespace {

using testing::MakeRun;
using testing::MakeSweep;
using testing::MakeTask;
using testing::RawInt;
using testing::T;
using testing::TempDir;

Prediction Predict(const std::string& run, const std::string& target,
                   double value, std::optional<double> lower,
                   std::optional<double> upper) {
  Prediction p;
  p.run_id = run;
  p.target = target;
  p.predicted = value;
  p.lower = lower;
  p.upper = upper;
  p.method = lower || upper ? "profile" : "fit";
  p.n_points = 9;
  return p;
}

class StorePredictionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Store::Open(dir_.File("hlab.db"));
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(opened).value();
    auto sweep = store_->CreateSweep(MakeSweep("s"), T(0));
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = sweep->sweep_id;
    ASSERT_TRUE(
        store_->AddRuns(sweep_id_, {MakeRun("r1"), MakeRun("r2")}, T(0)).ok());
    ASSERT_TRUE(
        store_->AddTasks({MakeTask("r1.train", sweep_id_, "r1")}, T(0)).ok());
  }

  PredictionGeneration Generation(std::vector<Prediction> predictions) {
    PredictionGeneration g;
    g.sweep_id = sweep_id_;
    g.n_succeeded = 5;
    g.laws = R"([{"arch": "swa", "target": "loss"}])";
    g.predictions = std::move(predictions);
    return g;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  int64_t sweep_id_ = 0;
};

TEST_F(StorePredictionsTest, GenerationsRoundTripNewestFirst) {
  auto none = store_->LatestPredictions(sweep_id_);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  auto first = store_->RecordPredictions(
      Generation({Predict("r1", "loss", 3.0, 2.9, 3.1),
                  Predict("r2", "loss", 2.5, std::nullopt, 2.7)}),
      T(10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 1);
  auto second = store_->RecordPredictions(
      Generation({Predict("r1", "loss", 2.95, 2.9, 3.0),
                  Predict("r1", "longppl", 1.25, std::nullopt, std::nullopt)}),
      T(20));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, 2);

  auto latest = store_->LatestPredictions(sweep_id_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(latest->has_value());
  const PredictionGeneration& g = **latest;
  EXPECT_EQ(g.generation, 2);
  EXPECT_EQ(g.created_at, T(20));
  EXPECT_EQ(g.n_succeeded, 5);
  EXPECT_EQ(g.laws, R"([{"arch": "swa", "target": "loss"}])");
  ASSERT_EQ(g.predictions.size(), 2u);
  EXPECT_EQ(g.predictions[0].target, "longppl");  // by run, then target
  EXPECT_EQ(g.predictions[0].method, "fit");
  EXPECT_FALSE(g.predictions[0].lower.has_value());
  EXPECT_FALSE(g.predictions[0].upper.has_value());
  EXPECT_EQ(g.predictions[1].target, "loss");
  EXPECT_EQ(g.predictions[1].predicted, 2.95);
  EXPECT_EQ(g.predictions[1].lower, 2.9);
  EXPECT_EQ(g.predictions[1].upper, 3.0);
  EXPECT_EQ(g.predictions[1].n_points, 9);

  // Every generation is kept; the view shows each run's newest.
  EXPECT_EQ(RawInt(dir_.File("hlab.db"), "SELECT count(*) FROM predictions"),
            4);
  auto engine = QueryEngine::Open(dir_.File("hlab.db"));
  ASSERT_TRUE(engine.ok());
  auto rows = (*engine)->Run(
      "SELECT run_id, target, generation, predicted, lower, upper, actual"
      " FROM run_predictions ORDER BY run_id, target",
      QueryOptions());
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows.size(), 3u);
  EXPECT_EQ(std::get<std::string>(rows->rows[1][0]), "r1");
  EXPECT_EQ(std::get<int64_t>(rows->rows[1][2]), 2);
  EXPECT_EQ(std::get<double>(rows->rows[1][3]), 2.95);
  EXPECT_EQ(std::get<std::string>(rows->rows[2][0]), "r2");  // generation 1
  EXPECT_EQ(std::get<int64_t>(rows->rows[2][2]), 1);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(rows->rows[2][4]));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(rows->rows[1][6]));
}

TEST_F(StorePredictionsTest, ActualAppearsOnceTheRunSucceeds) {
  Prediction curve = Predict("r1", "train_loss", 25, 24, 26);
  curve.method = "curve";
  ASSERT_TRUE(
      store_
          ->RecordPredictions(
              Generation({Predict("r1", "loss", 3.0, 2.9, 3.1), curve}), T(1))
          .ok());
  auto attempt = store_->LeaseTask("r1.train", "w1", T(2), absl::Seconds(30));
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  MetricPoint val;
  val.name = "val_loss";
  val.step = 10;
  val.value = 3.05;
  // train_loss = step at steps 1..40: the final window is the last 32.
  std::vector<MetricPoint> points = {val};
  for (int step = 1; step <= 40; ++step) {
    MetricPoint p;
    p.name = "train_loss";
    p.step = step;
    p.tokens = step;
    p.value = step;
    points.push_back(p);
  }
  ASSERT_TRUE(store_->RecordMetrics("r1.train", *attempt, points, T(3)).ok());
  ASSERT_TRUE(store_->CompleteTask("r1.train", *attempt, T(4)).ok());
  auto engine = QueryEngine::Open(dir_.File("hlab.db"));
  ASSERT_TRUE(engine.ok());
  auto rows = (*engine)->Run(
      "SELECT state, predicted, actual FROM run_predictions ORDER BY target",
      QueryOptions());
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->rows.size(), 2u);
  EXPECT_EQ(std::get<double>(rows->rows[1][2]), 24.5);  // mean of 9..40
  EXPECT_EQ(std::get<std::string>(rows->rows[0][0]), "SUCCEEDED");
  EXPECT_EQ(std::get<double>(rows->rows[0][1]), 3.0);
  EXPECT_EQ(std::get<double>(rows->rows[0][2]), 3.05);
  // A prediction is never a measurement: the run's figures are its own.
  auto summary = (*engine)->Run(
      "SELECT final_val_loss FROM run_summary WHERE run_id = 'r1'",
      QueryOptions());
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(std::get<double>(summary->rows[0][0]), 3.05);
  EXPECT_EQ(RawInt(dir_.File("hlab.db"),
                   "SELECT count(*) FROM metrics WHERE run_id = 'r2'"),
            0);
}

TEST_F(StorePredictionsTest, BadPredictionsStoreNothing) {
  const std::vector<std::pair<const char*, Prediction>> bad = {
      {"target", Predict("r1", "val_loss", 3, 2, 4)},
      {"finite", Predict("r1", "loss", std::nan(""), 2, 4)},
      {"finite", Predict("r1", "loss", 3, 2, INFINITY)},
      {"not a run of sweep", Predict("nope", "loss", 3, 2, 4)},
  };
  for (const auto& [why, p] : bad) {
    auto result = store_->RecordPredictions(
        Generation({Predict("r2", "loss", 2.5, 2.4, 2.6), p}), T(1));
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << why;
    EXPECT_NE(std::string(result.status().message()).find(why),
              std::string::npos)
        << result.status();
  }
  Prediction method = Predict("r1", "loss", 3, 2, 4);
  method.method = "guess";
  EXPECT_EQ(
      store_->RecordPredictions(Generation({method}), T(1)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store_
          ->RecordPredictions(Generation({Predict("r1", "loss", 3, 2, 4),
                                          Predict("r1", "loss", 3.1, 2, 4)}),
                              T(1))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  PredictionGeneration unknown = Generation({});
  unknown.sweep_id = 999;
  EXPECT_EQ(store_->RecordPredictions(unknown, T(1)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->LatestPredictions(999).status().code(),
            absl::StatusCode::kNotFound);
  const std::string path = dir_.File("hlab.db");
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM prediction_generations"), 0);
  EXPECT_EQ(RawInt(path, "SELECT count(*) FROM predictions"), 0);
  // The next good one is generation 1.
  auto good = store_->RecordPredictions(
      Generation({Predict("r1", "loss", 3, 2, 4)}), T(2));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(*good, 1);
}

TEST_F(StorePredictionsTest, SurviveAReopen) {
  ASSERT_TRUE(store_
                  ->RecordPredictions(
                      Generation({Predict("r1", "loss", 3.0, 2.9, 3.1)}), T(1))
                  .ok());
  store_.reset();  // a coordinator killed and started again
  auto reopened = Store::Open(dir_.File("hlab.db"));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto latest = (*reopened)->LatestPredictions(sweep_id_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->generation, 1);
  ASSERT_EQ((*latest)->predictions.size(), 1u);
  EXPECT_EQ((*latest)->predictions[0].predicted, 3.0);
  auto next = (*reopened)->RecordPredictions(
      Generation({Predict("r1", "loss", 2.9, 2.8, 3.0)}), T(2));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, 2);
}

}  // namespace
}  // namespace hlab::store
