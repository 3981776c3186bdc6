// hlab-sweep-fit: the coordinator's automatic fit of one sweep, as a child
// process. The coordinator runs it (coordinator/server/fit_scheduler.h) so that
// hlab-coordinator does not link Ceres: Ceres's dependencies (OpenBLAS, METIS,
// glog) bring ~120 KiB of static TLS, more than civetweb's thread stacks, and
// the Prometheus exposer could not start its threads.
//
//   hlab-sweep-fit --db FILE --sweep ID [--bootstrap K] [--threads T]
//                  [--quick-grid] [--predict]
//
// Opens the database read-only, fits every architecture and target of the
// sweep's `fit` section (sweep_fits.h) and prints one JSON object:
// {"fits": [{"arch", "target", "fitted", "reason", "line", "record":
// {"e", "a", "alpha", "b", "beta", "ci", "r2_fit", "r2_verify", "n_points",
// "details"}}], "seconds"}. Exit 0, or 1 with a line on stderr; 2 for bad
// flags. --quick-grid fits from 32 starts instead of 4500 (tests).
// --predict (live predictions while the sweep runs; from 675 starts, the
// replay's grid, unless --quick-grid) also predicts every
// pending and running run (SweepFitOptions::predict_unfinished) and adds
// "predictions": [{"run_id", "target", "predicted", "lower", "upper",
// "method", "n_points"}] (an open side is null), and each of those runs
// that has training points also gets its final train loss from its own
// curve (target "train_loss", method "curve", n_points its newest step;
// fits/curve_backtest.h, PredictUnfinished).
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analysis/replay.h"
#include "coordinator/store/query.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_parser.h"
#include "fits/curve_backtest.h"
#include "fits/sweep_fits.h"

namespace {

int Fail(const std::string& message) {
  std::cerr << "hlab-sweep-fit: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db;
  int64_t sweep_id = 0;
  hlab::fits::SweepFitOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--predict") {
      options.predict_unfinished = true;
      continue;
    }
    if (flag == "--quick-grid") {
      options.grid = hlab::analysis::StartGrid{
          {0.25, 0.5}, {0.25, 0.5}, {0, 0.5}, {5, 6}, {5, 6}};
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "hlab-sweep-fit: " << flag << ": missing value\n";
      return 2;
    }
    const std::string value = argv[++i];
    bool ok = true;
    if (flag == "--db") {
      db = value;
    } else if (flag == "--sweep") {
      ok = absl::SimpleAtoi(value, &sweep_id) && sweep_id > 0;
    } else if (flag == "--bootstrap") {
      ok =
          absl::SimpleAtoi(value, &options.bootstrap) && options.bootstrap >= 0;
    } else if (flag == "--threads") {
      ok = absl::SimpleAtoi(value, &options.threads);
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "hlab-sweep-fit: bad flag " << flag << " " << value << "\n";
      return 2;
    }
  }
  if (db.empty() || sweep_id == 0) {
    std::cerr << "usage: hlab-sweep-fit --db FILE --sweep ID [--bootstrap K] "
                 "[--threads T] [--quick-grid] [--predict]\n";
    return 2;
  }
  // Live predictions refit as runs finish: 675 starts (the replay's grid)
  // instead of 4500 keep a refit of the demo near 1 s; the final fit of a
  // finished sweep keeps the full grid.
  if (options.predict_unfinished && !options.grid) {
    options.grid = hlab::analysis::ReplayOptions::CoarseReplayGrid();
  }
  const absl::Time start = absl::Now();
  auto query = hlab::store::QueryEngine::Open(db);
  if (!query.ok()) return Fail(std::string(query.status().message()));
  auto spec_rows = (*query)->Run(
      absl::StrCat("SELECT spec FROM sweeps WHERE id = ", sweep_id), {});
  if (!spec_rows.ok()) return Fail(std::string(spec_rows.status().message()));
  if (spec_rows->rows.empty()) {
    return Fail(absl::StrCat("no sweep ", sweep_id, " in ", db));
  }
  const auto* text = std::get_if<std::string>(&spec_rows->rows[0][0]);
  if (text == nullptr) return Fail("the sweep's spec is not text");
  auto spec = hlab::sweep::ParseSweepSpec(*text);
  if (!spec.ok()) return Fail(std::string(spec.status().message()));
  auto fits = hlab::fits::FitSweepRuns(
      **query, sweep_id, hlab::sweep::WithDefaults(*spec).fit(), options);
  if (!fits.ok()) return Fail(std::string(fits.status().message()));
  nlohmann::ordered_json out;
  out["fits"] = nlohmann::ordered_json::array();
  nlohmann::ordered_json predictions = nlohmann::ordered_json::array();
  for (const hlab::fits::SweepFit& f : *fits) {
    nlohmann::ordered_json j;
    j["arch"] = f.arch;
    j["target"] = f.target;
    j["fitted"] = f.fitted;
    j["reason"] = f.reason;
    j["line"] = hlab::fits::DescribeSweepFit(f);
    if (f.fitted) {
      const hlab::store::FitRecord r = hlab::fits::ToFitRecord(f);
      j["record"] = {{"e", r.e},
                     {"a", r.a},
                     {"alpha", r.alpha},
                     {"b", r.b},
                     {"beta", r.beta},
                     {"ci", r.ci},
                     {"r2_fit", r.r2_fit},
                     {"r2_verify", r.r2_verify},
                     {"n_points", r.n_points},
                     {"details", r.details}};
    }
    out["fits"].push_back(std::move(j));
    for (const hlab::store::Prediction& p : f.predictions) {
      auto bound = [](const std::optional<double>& v) {
        return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
      };
      predictions.push_back({{"run_id", p.run_id},
                             {"target", p.target},
                             {"predicted", p.predicted},
                             {"lower", bound(p.lower)},
                             {"upper", bound(p.upper)},
                             {"method", p.method},
                             {"n_points", p.n_points}});
    }
  }
  if (options.predict_unfinished) {
    // Each unfinished run with points: its final train loss from its own
    // curve (the learning-rate-area law, curve_backtest.h), as
    // `hlab-curve-backtest --live` gives it. A failure here leaves the
    // laws' predictions as they are.
    hlab::store::QueryOptions curve_query;
    curve_query.max_rows = 10'000'000;
    curve_query.time_limit = absl::Minutes(5);
    auto curves = hlab::fits::ReadRunCurves(
        [&](const std::string& sql) { return (*query)->Run(sql, curve_query); },
        sweep_id);
    using Rows = absl::StatusOr<std::vector<hlab::fits::BacktestRow>>;
    const Rows rows = curves.ok() ? hlab::fits::PredictUnfinished(*curves, {})
                                  : Rows(curves.status());
    if (!rows.ok()) {
      std::cerr << "hlab-sweep-fit: no curve predictions: "
                << rows.status().message() << "\n";
    } else {
      for (const hlab::fits::BacktestRow& r : *rows) {
        if (!r.predicted || !std::isfinite(*r.predicted)) continue;
        auto bound = [](const std::optional<double>& v) {
          return v && std::isfinite(*v) ? nlohmann::ordered_json(*v)
                                        : nlohmann::ordered_json();
        };
        predictions.push_back({{"run_id", r.run_id},
                               {"target", "train_loss"},
                               {"predicted", *r.predicted},
                               {"lower", bound(r.lower)},
                               {"upper", bound(r.upper)},
                               {"method", "curve"},
                               {"n_points", r.cutoff_step}});
      }
    }
    out["predictions"] = std::move(predictions);
  }
  out["seconds"] = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << out.dump() << "\n";
  return 0;
}
