// Automatic sweep fits (coordinator/server/fit_scheduler.h, hlab-sweep-fit) and
// `hlab fit --db`: the demo sweep's 48 runs are stored as finished, with
// validation losses drawn from a known law per architecture, directly
// through the store of an in-process coordinator.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"
#include "cli/cli.h"
#include "coordinator/planning/proto_mapping.h"
#include "coordinator/server/coordinator.h"
#include "coordinator/server/fit_scheduler.h"
#include "coordinator/server/lease_reaper.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_parser.h"
#include "tests/coordinator/server/coordinator_test_util.h"

namespace hlab::coordinator {
namespace {

using testing::FakeClock;
using testing::TempDir;

struct Law {
  double E, A, alpha, B, beta;
  double operator()(double n, double d) const {
    return E + A / std::pow(n, alpha) + B / std::pow(d, beta);
  }
};

// A different law per architecture, so a mix-up shows.
Law TruthFor(const std::string& arch) {
  static const std::map<std::string, double> kE = {
      {"full", 1.6}, {"swa-32", 1.7}, {"lightning", 1.8}, {"gdn", 1.9}};
  auto it = kE.find(arch);
  return Law{it == kE.end() ? 2.0 : it->second, 400, 0.34, 410, 0.28};
}

// The fitter runs hlab-sweep-fit; 32 starts around the truth keep the test
// fast (the coordinator's default is Chinchilla's 4500: 6.5 s for the demo
// sweep on 2 threads).
FitSchedulerOptions FitterOptions() {
  FitSchedulerOptions options;
  options.binary = HLAB_SWEEP_FIT_BINARY;
  options.quick_grid = true;
  return options;
}

class SweepFitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_ = testing::TestOptions(dir_.File("hlab.db"), &clock_);
    options_.auto_fit = false;
    coordinator_ = testing::StartOrDie(options_);
    ASSERT_NE(coordinator_, nullptr);
  }

  // Stores `spec` as a sweep whose runs all succeeded, each with a
  // "val_loss" point from its architecture's law.
  int64_t StoreFinishedSweep(const hlab::v1::SweepSpec& spec) {
    return StoreSweep(spec, [](const store::RunSpec&) { return true; });
  }

  // Leases and completes a run's task with a "val_loss" point from its
  // architecture's law (and a training loss that is never fitted).
  void Succeed(const store::RunSpec& run) {
    store::Store& store = *coordinator_->store();
    const std::string task = run.id + ".train";
    auto attempt = store.LeaseTask(task, "w1", clock_.Now(), absl::Seconds(30));
    ASSERT_TRUE(attempt.ok()) << attempt.status();
    store::MetricPoint loss;
    loss.name = "val_loss";
    loss.step = 10;
    loss.tokens = run.budget_tokens;
    loss.value = TruthFor(run.arch)(static_cast<double>(run.n_params),
                                    static_cast<double>(run.budget_tokens));
    store::MetricPoint train = loss;
    train.name = "train_loss";
    train.value = loss.value + 0.5;  // never fitted: val_loss comes first
    ASSERT_TRUE(
        store.RecordMetrics(task, *attempt, {loss, train}, clock_.Now()).ok());
    ASSERT_TRUE(store.CompleteTask(task, *attempt, clock_.Now()).ok());
  }

  // Stores `spec` as a sweep, each run with one TRAIN task; the runs for
  // which `succeeds` is true have succeeded (Succeed), the others are
  // pending.
  int64_t StoreSweep(const hlab::v1::SweepSpec& spec,
                     const std::function<bool(const store::RunSpec&)>& succeeds,
                     std::vector<store::RunSpec>* stored_runs = nullptr) {
    auto plan = sweep::PlanSweep(spec);
    EXPECT_TRUE(plan.ok()) << plan.status();
    store::Store& store = *coordinator_->store();
    store::SweepSpec stored;
    stored.name = plan->spec.name();
    stored.spec_hash = plan->spec_hash;
    stored.spec = sweep::SweepSpecToCanonicalJson(plan->spec);
    auto created = store.CreateSweep(stored, clock_.Now());
    EXPECT_TRUE(created.ok()) << created.status();
    const int64_t sweep_id = created->sweep_id;
    std::vector<store::RunSpec> runs;
    for (const hlab::v1::Run& r : plan->runs) runs.push_back(ToRunSpec(r, 3));
    EXPECT_TRUE(store.AddRuns(sweep_id, runs, clock_.Now()).ok());
    for (const store::RunSpec& run : runs) {
      store::TaskSpec task;
      task.id = run.id + ".train";
      task.sweep_id = sweep_id;
      task.run_id = run.id;
      EXPECT_TRUE(store.AddTasks({task}, clock_.Now()).ok());
      if (succeeds(run)) Succeed(run);
    }
    if (stored_runs != nullptr) *stored_runs = runs;
    return sweep_id;
  }

  std::vector<store::Event> FitEvents(int64_t sweep_id) {
    return EventsOfKind(sweep_id, "fits");
  }

  std::vector<store::Event> EventsOfKind(int64_t sweep_id,
                                         const std::string& kind) {
    auto events = coordinator_->store()->EventsSince(sweep_id, 0, 100000);
    EXPECT_TRUE(events.ok()) << events.status();
    std::vector<store::Event> out;
    if (!events.ok()) return out;
    for (const store::Event& e : *events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  store::QueryResult Query(const std::string& sql) {
    auto result = coordinator_->context()->query->Run(sql, {});
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : store::QueryResult();
  }

  // Series per family of the live predictions in the coordinator's
  // registry (what /metrics serves).
  std::map<std::string, int> PredictedSeries() {
    std::map<std::string, int> out;
    for (const auto& family : coordinator_->metrics()->registry()->Collect()) {
      if (family.name == "hlab_run_predicted_target" ||
          family.name == "hlab_sweep_prediction_generation") {
        out[family.name] = static_cast<int>(family.metric.size());
      }
    }
    return out;
  }

  FakeClock clock_;
  TempDir dir_;
  CoordinatorOptions options_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(SweepFitsTest, FinishedDemoSweepGetsOneFitPerArchitecture) {
  const int64_t sweep_id = StoreFinishedSweep(testing::DemoSpec());
  FitSchedulerOptions options = FitterOptions();
  options.bootstrap = 20;
  options.threads = 2;
  FitScheduler fitter(coordinator_->context(), options);
  const absl::Time start = absl::Now();
  auto handled = fitter.FitFinishedSweeps();
  std::cout << "fits of the 48-run demo sweep: "
            << absl::ToDoubleSeconds(absl::Now() - start) << " s\n";
  ASSERT_TRUE(handled.ok()) << handled.status();
  EXPECT_EQ(*handled, 1);

  store::QueryResult fits = Query(
      "SELECT arch, target, e, a, alpha, b, beta, r2_fit, r2_verify,"
      " n_points, ci FROM fit_summary ORDER BY arch");
  ASSERT_EQ(fits.rows.size(), 4u);  // loss only: no run has a LongPPL
  for (const auto& row : fits.rows) {
    const std::string arch = std::get<std::string>(row[0]);
    SCOPED_TRACE(arch);
    const Law truth = TruthFor(arch);
    EXPECT_EQ(std::get<std::string>(row[1]), "loss");
    // Noise-free points: the law is recovered; A and B trade off with the
    // exponents over 3 N and 9 D values, so they get a looser tolerance.
    EXPECT_NEAR(std::get<double>(row[2]), truth.E, 0.02);
    EXPECT_NEAR(std::get<double>(row[4]), truth.alpha, 0.01);
    EXPECT_NEAR(std::get<double>(row[6]), truth.beta, 0.01);
    EXPECT_NEAR(std::get<double>(row[3]) / truth.A, 1, 0.1);
    EXPECT_NEAR(std::get<double>(row[5]) / truth.B, 1, 0.1);
    EXPECT_GT(std::get<double>(row[7]), 0.9999);
    EXPECT_GT(std::get<double>(row[8]), 0.999);  // the 3 held-out S4 runs
    EXPECT_EQ(std::get<int64_t>(row[9]), 9);     // S1-S3 x 3 budgets
    auto ci = nlohmann::json::parse(std::get<std::string>(row[10]));
    EXPECT_EQ(ci["resamples"], 20);
    EXPECT_EQ(ci["method"], "profile");  // the profile-likelihood CIs
    EXPECT_LE(ci["alpha"][0].get<double>(), ci["alpha"][1].get<double>());
  }
  std::vector<store::Event> events = FitEvents(sweep_id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].message.find("fits ready: 4 of 8 stored"),
            std::string::npos)
      << events[0].message;
  EXPECT_NE(events[0].message.find("longppl/gdn: not fitted: too few points"),
            std::string::npos)
      << events[0].message;
  // Watchers saw the sweep end, then its fits.
  std::vector<store::Event> ended = EventsOfKind(sweep_id, "sweep_finished");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].message, "SUCCEEDED: 48 runs");
  EXPECT_LT(ended[0].seq, events[0].seq);
  EXPECT_EQ(ToProtoEvent(ended[0]).kind(), hlab::v1::SWEEP_FINISHED);
  EXPECT_EQ(ToProtoEvent(events[0]).kind(), hlab::v1::FIT_FINISHED);

  // Once per sweep, also for a restarted coordinator's new fitter.
  FitScheduler restarted(coordinator_->context(), options);
  auto again = restarted.FitFinishedSweeps();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 0);
  EXPECT_EQ(FitEvents(sweep_id).size(), 1u);

  // `hlab fit --db` fits the same points offline.
  std::ostringstream out, err;
  const int code = cli::RunCli(
      {"fit", "--db", dir_.File("hlab.db"), "--sweep", "demo", "--arch", "gdn",
       "--target", "loss", "--bootstrap", "10", "--json"},
      out, err);
  ASSERT_EQ(code, 0) << err.str();
  auto json = nlohmann::json::parse(out.str());
  ASSERT_TRUE(json.contains("gdn")) << out.str();
  for (const char* key :
       {"E", "A", "alpha", "B", "beta", "objective", "r2_fit", "r2_verify"}) {
    EXPECT_TRUE(json["gdn"].contains(key)) << key;
  }
  EXPECT_NEAR(json["gdn"]["alpha"].get<double>(), 0.34, 0.01);
  EXPECT_NEAR(json["gdn"]["E"].get<double>(), 1.9, 0.02);

  std::ostringstream text, text_err;
  ASSERT_EQ(
      cli::RunCli({"fit", "--db", dir_.File("hlab.db"), "--arch", "full",
                   "--target", "loss", "--bootstrap", "0", "--threads", "2"},
                  text, text_err),
      0)
      << text_err.str();
  EXPECT_NE(text.str().find("architecture full: 9 fit runs, 3 verify runs"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("alpha"), std::string::npos);
}

TEST_F(SweepFitsTest, TooFewPointsRecordsNothingAndSaysWhy) {
  // One architecture, one scale, two budgets: 2 runs.
  const int64_t sweep_id = StoreFinishedSweep(
      testing::Spec(testing::TinySpecYaml("tiny", "[5, 10]")));
  FitScheduler fitter(coordinator_->context(), FitterOptions());
  auto handled = fitter.FitFinishedSweeps();
  ASSERT_TRUE(handled.ok()) << handled.status();
  EXPECT_EQ(*handled, 1);
  EXPECT_TRUE(Query("SELECT * FROM fits").rows.empty());
  std::vector<store::Event> events = FitEvents(sweep_id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].message.find("no fits: 0 of 1 stored"), std::string::npos)
      << events[0].message;
  EXPECT_NE(events[0].message.find(
                "loss/full: not fitted: too few points: 2 succeeded runs"),
            std::string::npos)
      << events[0].message;
  // The "fits" event keeps a restarted coordinator from trying again.
  FitScheduler restarted(coordinator_->context(), FitterOptions());
  EXPECT_EQ(*restarted.FitFinishedSweeps(), 0);

  std::ostringstream out, err;
  EXPECT_EQ(
      cli::RunCli({"fit", "--db", dir_.File("hlab.db"), "--sweep", "tiny"}, out,
                  err),
      1);
  EXPECT_NE(err.str().find("too few points"), std::string::npos) << err.str();
}

TEST_F(SweepFitsTest, StopEndsAFitInProgress) {
  const int64_t sweep_id = StoreFinishedSweep(testing::DemoSpec());
  FitSchedulerOptions options = FitterOptions();
  options.quick_grid = false;  // 4500 starts: seconds, long enough to stop
  FitScheduler fitter(coordinator_->context(), options);
  absl::StatusOr<int> result = 0;
  std::thread round([&] { result = fitter.FitFinishedSweeps(); });
  absl::SleepFor(absl::Milliseconds(200));
  fitter.Stop();
  round.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled)
      << result.status();
  EXPECT_TRUE(FitEvents(sweep_id).empty());
  EXPECT_TRUE(Query("SELECT * FROM fits").rows.empty());
}

TEST_F(SweepFitsTest, FailedFitIsLoggedAndNotRetriedEveryRound) {
  const int64_t sweep_id = StoreFinishedSweep(
      testing::Spec(testing::TinySpecYaml("tiny", "[5, 10]")));
  FitSchedulerOptions options = FitterOptions();
  options.binary = "/bin/false";  // exits 1 without output
  FitScheduler fitter(coordinator_->context(), options);
  auto first = fitter.FitFinishedSweeps();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 0);
  EXPECT_TRUE(FitEvents(sweep_id).empty());
  EXPECT_EQ(*fitter.FitFinishedSweeps(), 0);
}

// Live predictions: with the fit scales trained and the S4 runs pending,
// the fitter predicts each S4 run's final loss from the law of its
// architecture; a run that finishes brings a new generation; a restarted
// fitter finds the stored one and does not refit; no prediction is ever a
// fit point or a measurement.
TEST_F(SweepFitsTest, RunningSweepGetsPredictionsOfItsPendingRuns) {
  std::vector<store::RunSpec> runs;
  const int64_t sweep_id = StoreSweep(
      testing::DemoSpec(),
      [](const store::RunSpec& run) { return run.scale != "S4"; }, &runs);
  FitSchedulerOptions options = FitterOptions();
  options.bootstrap = 0;
  FitScheduler fitter(coordinator_->context(), options);
  EXPECT_EQ(*fitter.FitFinishedSweeps(), 0);  // not finished: no final fit
  auto predicted = fitter.PredictRunningSweeps();
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  EXPECT_EQ(*predicted, 1);

  auto latest = coordinator_->store()->LatestPredictions(sweep_id);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->generation, 1);
  EXPECT_EQ((*latest)->n_succeeded, 36);
  std::map<std::string, store::RunSpec> by_id;
  for (const store::RunSpec& r : runs) by_id[r.id] = r;
  // loss only (no run has a LongPPL): the 12 pending S4 runs.
  ASSERT_EQ((*latest)->predictions.size(), 12u);
  for (const store::Prediction& p : (*latest)->predictions) {
    const store::RunSpec& run = by_id.at(p.run_id);
    SCOPED_TRACE(run.arch + "/" + run.scale);
    EXPECT_EQ(run.scale, "S4");
    EXPECT_EQ(p.target, "loss");
    EXPECT_EQ(p.method, "profile");
    EXPECT_EQ(p.n_points, 9);  // S1-S3 x 3 budgets, measured only
    const double truth =
        TruthFor(run.arch)(static_cast<double>(run.n_params),
                           static_cast<double>(run.budget_tokens));
    // Noise-free points: the extrapolation to S4 lands on the law.
    EXPECT_NEAR(p.predicted, truth, 0.01 * truth);
    ASSERT_TRUE(p.lower.has_value() && p.upper.has_value());
    EXPECT_LE(*p.lower, p.predicted);
    EXPECT_GE(*p.upper, p.predicted);
  }
  std::vector<store::Event> events = EventsOfKind(sweep_id, "predictions");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0].message.find(
                "generation 1 from 36 succeeded runs: 12 predictions"),
            std::string::npos)
      << events[0].message;

  // /metrics: mid, lo and hi of each pending run's prediction.
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  std::map<std::string, int> series = PredictedSeries();
  EXPECT_EQ(series["hlab_run_predicted_target"], 36);  // 12 runs x 3 bounds
  EXPECT_EQ(series["hlab_sweep_prediction_generation"], 1);

  // The CLI over gRPC: the sweep's line, and predicted against actual.
  {
    std::ostringstream out, err;
    ASSERT_EQ(
        cli::RunCli({"status", "demo", "--address", coordinator_->address()},
                    out, err),
        0)
        << err.str();
    EXPECT_NE(out.str().find("predictions: generation 1, 12 of 12 unfinished "
                             "runs predicted"),
              std::string::npos)
        << out.str();
  }
  {
    std::ostringstream out, err;
    ASSERT_EQ(cli::RunCli({"runs", "--sweep", "demo", "--format", "json",
                           "--address", coordinator_->address()},
                          out, err),
              0)
        << err.str();
    const nlohmann::json rows = nlohmann::json::parse(out.str());
    ASSERT_EQ(rows.size(), 48u);
    int predicted_rows = 0;
    for (const nlohmann::json& row : rows) {
      const bool pending = row["scale"] == "S4";
      EXPECT_EQ(row["predicted_loss"].is_number(), pending) << row.dump();
      EXPECT_EQ(row["final_val_loss"].is_number(), !pending) << row.dump();
      if (!pending) continue;
      ++predicted_rows;
      EXPECT_EQ(row["prediction_generation"], 1);
      EXPECT_LE(row["predicted_loss_lo"].get<double>(),
                row["predicted_loss"].get<double>());
    }
    EXPECT_EQ(predicted_rows, 12);
  }

  // Nothing finished since: no refit, also for a restarted coordinator.
  EXPECT_EQ(*fitter.PredictRunningSweeps(), 0);
  FitScheduler restarted(coordinator_->context(), options);
  EXPECT_EQ(*restarted.PredictRunningSweeps(), 0);

  // One S4 run finishes: a new generation without it, and its last
  // prediction stands against what it measured.
  const store::RunSpec& done = by_id.at((*latest)->predictions[0].run_id);
  Succeed(done);
  ASSERT_EQ(*restarted.PredictRunningSweeps(), 1);
  latest = coordinator_->store()->LatestPredictions(sweep_id);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->generation, 2);
  EXPECT_EQ((*latest)->n_succeeded, 37);
  EXPECT_EQ((*latest)->predictions.size(), 11u);
  for (const store::Prediction& p : (*latest)->predictions) {
    EXPECT_NE(p.run_id, done.id);
    // The verify scale's measured run is no fit point either.
    EXPECT_EQ(p.n_points, 9);
  }
  store::QueryResult row = Query(
      "SELECT generation, predicted, actual FROM run_predictions WHERE"
      " run_id = '" +
      done.id + "'");
  ASSERT_EQ(row.rows.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(row.rows[0][0]), 1);
  EXPECT_NEAR(std::get<double>(row.rows[0][2]),
              TruthFor(done.arch)(static_cast<double>(done.n_params),
                                  static_cast<double>(done.budget_tokens)),
              1e-9);
  EXPECT_NEAR(std::get<double>(row.rows[0][1]),
              std::get<double>(row.rows[0][2]),
              0.01 * std::get<double>(row.rows[0][2]));
  // The finished run's series are gone.
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  EXPECT_EQ(PredictedSeries()["hlab_run_predicted_target"], 33);
  // Predictions are never measurements nor final fits.
  EXPECT_TRUE(Query("SELECT * FROM fits").rows.empty());
  EXPECT_EQ(
      std::get<int64_t>(Query("SELECT count(*) FROM run_summary WHERE state ="
                              " 'PENDING' AND final_val_loss IS NOT NULL")
                            .rows[0][0]),
      0);
}

// A killed coordinator's successor serves the stored predictions at once
// (gRPC, /metrics) and does not refit until a run finishes.
TEST_F(SweepFitsTest, PredictionsSurviveACoordinatorRestart) {
  const int64_t sweep_id =
      StoreSweep(testing::DemoSpec(),
                 [](const store::RunSpec& run) { return run.scale != "S4"; });
  FitSchedulerOptions options = FitterOptions();
  options.bootstrap = 0;
  {
    FitScheduler fitter(coordinator_->context(), options);
    ASSERT_EQ(*fitter.PredictRunningSweeps(), 1);
  }
  coordinator_.reset();
  coordinator_ = testing::StartOrDie(options_);
  ASSERT_NE(coordinator_, nullptr);
  std::ostringstream out, err;
  ASSERT_EQ(cli::RunCli({"runs", "--state", "pending", "--format", "csv",
                         "--address", coordinator_->address()},
                        out, err),
            0)
      << err.str();
  // 12 rows, each with predicted_loss, _lo, _hi and generation 1 (the
  // demo's names have no commas to quote).
  std::istringstream lines(out.str());
  std::string line;
  std::getline(lines, line);
  const std::vector<std::string> header = absl::StrSplit(line, ',');
  const auto column = [&header](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    const std::vector<std::string> cells = absl::StrSplit(line, ',');
    ASSERT_EQ(cells.size(), header.size()) << line;
    EXPECT_FALSE(cells[column("predicted_loss")].empty()) << line;
    EXPECT_FALSE(cells[column("predicted_loss_lo")].empty()) << line;
    EXPECT_FALSE(cells[column("predicted_loss_hi")].empty()) << line;
    EXPECT_EQ(cells[column("prediction_generation")], "1") << line;
  }
  EXPECT_EQ(rows, 12);
  ASSERT_TRUE(coordinator_->reaper()->Tick().ok());
  EXPECT_EQ(PredictedSeries()["hlab_run_predicted_target"], 36);
  FitScheduler restarted(coordinator_->context(), options);
  EXPECT_EQ(*restarted.PredictRunningSweeps(), 0);
  auto latest = coordinator_->store()->LatestPredictions(sweep_id);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->generation, 1);
}

// With 5 fit points there is no profile interval: the bootstrap's
// percentile interval stands in. Architectures without a law get none.
TEST_F(SweepFitsTest, FiveFitPointsPredictWithTheBootstrap) {
  int fit_runs = 0;
  std::vector<store::RunSpec> runs;
  const int64_t sweep_id = StoreSweep(
      testing::DemoSpec(),
      [&fit_runs](const store::RunSpec& run) {
        return run.arch == "full" && run.scale != "S4" && fit_runs++ < 5;
      },
      &runs);
  FitSchedulerOptions options = FitterOptions();
  options.bootstrap = 50;
  FitScheduler fitter(coordinator_->context(), options);
  ASSERT_EQ(*fitter.PredictRunningSweeps(), 1);
  auto latest = coordinator_->store()->LatestPredictions(sweep_id);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  // full's 7 other runs: 4 of the fit scales, 3 of S4.
  ASSERT_EQ((*latest)->predictions.size(), 7u);
  std::map<std::string, store::RunSpec> by_id;
  for (const store::RunSpec& r : runs) by_id[r.id] = r;
  for (const store::Prediction& p : (*latest)->predictions) {
    const store::RunSpec& run = by_id.at(p.run_id);
    EXPECT_EQ(run.arch, "full");
    EXPECT_EQ(p.method, "bootstrap");
    EXPECT_EQ(p.n_points, 5);
    ASSERT_TRUE(p.lower.has_value() && p.upper.has_value());
    EXPECT_LE(*p.lower, *p.upper);
    const double truth =
        TruthFor(run.arch)(static_cast<double>(run.n_params),
                           static_cast<double>(run.budget_tokens));
    // Noise-free: the fit passes through the law, within a few percent
    // out to S4 from 5 points.
    EXPECT_NEAR(p.predicted, truth, 0.05 * truth);
  }
}

// A run in training also gets its final train loss from its own curve
// (the learning-rate-area law, analysis/curve_law.h), refreshed every
// curve_refresh while it trains, with no run finishing.
TEST_F(SweepFitsTest, ATrainingRunGetsItsOwnCurvesPrediction) {
  std::vector<store::RunSpec> runs;
  const int64_t sweep_id = StoreSweep(
      testing::DemoSpec(),
      [](const store::RunSpec& run) { return run.scale != "S4"; }, &runs);
  const store::RunSpec* s4 = nullptr;
  for (const store::RunSpec& r : runs) {
    if (r.scale == "S4" && s4 == nullptr) s4 = &r;
  }
  ASSERT_NE(s4, nullptr);
  const int64_t steps =
      nlohmann::json::parse(s4->config)["steps"].get<int64_t>();
  ASSERT_GT(steps, 200);
  // Half of its steps, the loss still falling.
  store::Store& store = *coordinator_->store();
  auto attempt =
      store.LeaseTask(s4->id + ".train", "w1", clock_.Now(), absl::Seconds(30));
  ASSERT_TRUE(attempt.ok()) << attempt.status();
  std::vector<store::MetricPoint> points;
  for (int64_t k = 1; k <= steps / 2; ++k) {
    store::MetricPoint p;
    p.name = "train_loss";
    p.step = k;
    p.tokens = k * (s4->budget_tokens / steps);
    p.value = 2.0 + 3.0 / std::sqrt(static_cast<double>(k));
    points.push_back(p);
  }
  const double last = points.back().value;
  ASSERT_TRUE(
      store.RecordMetrics(s4->id + ".train", *attempt, points, clock_.Now())
          .ok());
  FitSchedulerOptions options = FitterOptions();
  options.bootstrap = 0;
  FitScheduler fitter(coordinator_->context(), options);
  ASSERT_EQ(*fitter.PredictRunningSweeps(), 1);
  auto latest = store.LatestPredictions(sweep_id);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  const store::Prediction* curve = nullptr;
  int laws = 0;
  for (const store::Prediction& p : (*latest)->predictions) {
    if (p.target == "train_loss") {
      EXPECT_EQ(p.run_id, s4->id);  // the only run with a curve
      curve = &p;
    } else {
      ++laws;
    }
  }
  EXPECT_EQ(laws, 12);  // the laws' predictions are there too
  ASSERT_NE(curve, nullptr);
  EXPECT_EQ(curve->method, "curve");
  EXPECT_EQ(curve->n_points, steps / 2);
  // Below where it is now (it keeps falling, then decays), above the
  // curve's floor.
  EXPECT_LT(curve->predicted, last);
  EXPECT_GT(curve->predicted, 1.5);
  ASSERT_TRUE(curve->lower.has_value() && curve->upper.has_value());
  EXPECT_LE(*curve->lower, curve->predicted);
  EXPECT_GE(*curve->upper, curve->predicted);

  // hlab status: the active run's law and curve predictions.
  std::ostringstream out, err;
  ASSERT_EQ(
      cli::RunCli({"status", "demo", "--address", coordinator_->address()}, out,
                  err),
      0)
      << err.str();
  const std::string status = out.str();
  const size_t line = status.find("  " + s4->id + "  ");
  ASSERT_NE(line, std::string::npos) << status;
  const std::string active =
      status.substr(line, status.find('\n', line) - line);
  EXPECT_NE(active.find("predicted final "), std::string::npos) << active;
  EXPECT_NE(active.find("its curve: final train loss "), std::string::npos)
      << active;

  // No run finished: no refit until curve_refresh has passed.
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(*fitter.PredictRunningSweeps(), 0);
  clock_.Advance(options.curve_refresh);
  EXPECT_EQ(*fitter.PredictRunningSweeps(), 1);
  latest = store.LatestPredictions(sweep_id);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->generation, 2);
  EXPECT_EQ((*latest)->n_succeeded, 36);
}

// The coordinator's own fitter thread (CoordinatorOptions::
// live_predictions, on by default) predicts a running sweep's pending run
// by itself: one architecture at one scale, 6 of 7 budgets done.
TEST_F(SweepFitsTest, TheCoordinatorsFitterThreadPredictsByItself) {
  int n = 0;
  const int64_t sweep_id =
      StoreSweep(testing::Spec(testing::TinySpecYaml(
                     "tiny", "[5, 10, 20, 40, 80, 160, 320]")),
                 [&n](const store::RunSpec&) { return n++ < 6; });
  coordinator_.reset();
  CoordinatorOptions options = options_;
  options.start_reaper = true;  // starts the fitter thread too
  options.fit_binary = HLAB_SWEEP_FIT_BINARY;
  options.fit_interval = absl::Milliseconds(100);
  options.fit_bootstrap = 0;
  coordinator_ = testing::StartOrDie(options);
  ASSERT_NE(coordinator_, nullptr);
  std::optional<store::PredictionGeneration> latest;
  for (int i = 0; i < 600 && !latest; ++i) {  // the 4500-start grid: ~1 s
    absl::SleepFor(absl::Milliseconds(100));
    auto read = coordinator_->store()->LatestPredictions(sweep_id);
    ASSERT_TRUE(read.ok()) << read.status();
    latest = *read;
  }
  ASSERT_TRUE(latest.has_value()) << "no predictions within 60 s";
  EXPECT_EQ(latest->generation, 1);
  EXPECT_EQ(latest->n_succeeded, 6);
  ASSERT_EQ(latest->predictions.size(), 1u);  // the run not done
  EXPECT_EQ(latest->predictions[0].target, "loss");
  EXPECT_EQ(latest->predictions[0].n_points, 6);
  EXPECT_TRUE(std::isfinite(latest->predictions[0].predicted));
}

TEST_F(SweepFitsTest, TooFewSucceededRunsGetNoPredictions) {
  // 4 of the demo's runs succeeded: under kMinPredictionRuns, no refit.
  int n = 0;
  const int64_t sweep_id = StoreSweep(
      testing::DemoSpec(), [&n](const store::RunSpec&) { return n++ < 4; });
  FitScheduler fitter(coordinator_->context(), FitterOptions());
  EXPECT_EQ(*fitter.PredictRunningSweeps(), 0);
  auto latest = coordinator_->store()->LatestPredictions(sweep_id);
  ASSERT_TRUE(latest.ok());
  EXPECT_FALSE(latest->has_value());
}

TEST_F(SweepFitsTest, UnfinishedSweepIsNotFitted) {
  auto plan = sweep::PlanSweep(testing::DemoSpec());
  ASSERT_TRUE(plan.ok());
  store::SweepSpec stored;
  stored.name = "demo";
  stored.spec_hash = plan->spec_hash;
  stored.spec = sweep::SweepSpecToCanonicalJson(plan->spec);
  auto created = coordinator_->store()->CreateSweep(stored, clock_.Now());
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(coordinator_->store()
                  ->AddRuns(created->sweep_id, {ToRunSpec(plan->runs[0], 3)},
                            clock_.Now())
                  .ok());
  FitScheduler fitter(coordinator_->context(), FitterOptions());
  EXPECT_EQ(*fitter.FitFinishedSweeps(), 0);
  EXPECT_TRUE(FitEvents(created->sweep_id).empty());
}

}  // namespace
}  // namespace hlab::coordinator
