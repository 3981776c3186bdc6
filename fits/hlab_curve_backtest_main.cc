// hlab-curve-backtest: how well the learning-rate-area law predicts a run's
// final training loss from part of its curve, measured on a finished sweep
// database (fits/curve_backtest.h).
//
//   hlab-curve-backtest --db FILE [--sweep ID] [--fractions 0.25,0.5,0.75]
//                       [--no-siblings] [--no-prior] [--no-model-error]
//                       [--decay LAMBDA]
//                       [--min-updates K] [--runs] [--json]
//
// Opens the database read-only. For every succeeded run and fraction f:
// fits on the points up to f of its steps, predicts the mean train loss of
// its last 1% of steps (at least 32), and compares with the measured value and
// with the last value at f (the last point, and the mean of the last 1% window
// there). Prints one line per fraction (median absolute error of the law
// and of both baselines, the share of runs where the law is closer, the
// coverage of the 95% intervals); --runs adds a line per prediction; --json
// prints everything as one JSON object instead. The sweep defaults to the
// database's only (or first) sweep. --live instead predicts the runs that
// have not finished, each from everything stored now (PredictUnfinished),
// one line each (or JSON); --decay sets lambda of S2 (0.999),
// --min-updates leaves out points measured after fewer updates (1). Exit 0, 1
// with a line on stderr for an unreadable database or sweep, 2 for bad flags.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "coordinator/store/query.h"
#include "fits/curve_backtest.h"

namespace {

using hlab::fits::BacktestRow;
using hlab::fits::CurveBacktest;
using hlab::fits::FractionSummary;

int Usage() {
  std::cerr << "usage: hlab-curve-backtest --db FILE [--sweep ID] "
               "[--fractions 0.25,0.5,0.75] [--no-siblings] [--no-prior] "
               "[--no-model-error] [--decay LAMBDA] [--min-updates K] "
               "[--runs] [--live] [--json]\n";
  return 2;
}

int Fail(const std::string& message) {
  std::cerr << "hlab-curve-backtest: " << message << "\n";
  return 1;
}

nlohmann::json Optional(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

// One prediction: the run, its cutoff step and the law's figures.
nlohmann::json RowJson(const BacktestRow& r) {
  return {{"run_id", r.run_id},
          {"arch", r.arch},
          {"scale", r.scale},
          {"steps", r.steps},
          {"step", r.cutoff_step},
          {"predicted", Optional(r.predicted)},
          {"lower", Optional(r.lower)},
          {"upper", Optional(r.upper)},
          {"last_point", r.last_point},
          {"last_window", r.last_window},
          {"c_from_data", r.c_from_data},
          {"siblings_used", r.siblings_used},
          {"alpha", r.alpha},
          {"c", r.c},
          {"model_error", Optional(r.model_error)},
          {"error", r.error}};
}

nlohmann::json ToJson(const CurveBacktest& b, int64_t sweep,
                      const hlab::fits::BacktestOptions& options) {
  nlohmann::json j;
  j["sweep"] = sweep;
  j["runs"] = b.runs;
  j["skipped"] = b.skipped;
  j["max_lr_mismatch"] = b.max_lr_mismatch;
  j["predicted"] = "mean train_loss over the last 1% of steps, at least 32";
  j["decay"] = options.law.decay;
  j["min_updates"] = options.law.min_updates;
  j["siblings"] = options.siblings;
  j["prior"] = options.prior;
  j["model_error"] = options.model_error;
  for (const FractionSummary& s : b.summaries) {
    j["fractions"].push_back(
        {{"fraction", s.fraction},
         {"runs", s.runs},
         {"failed", s.failed},
         {"median_abs_error", s.median_abs_error},
         {"median_abs_error_last_point", s.median_abs_error_last_point},
         {"median_abs_error_last_window", s.median_abs_error_last_window},
         {"median_abs_relative_error", s.median_abs_relative_error},
         {"better_than_last_point", s.better_than_last_point},
         {"better_than_last_window", s.better_than_last_window},
         {"coverage", s.coverage},
         {"median_interval_width", s.median_interval_width},
         {"c_from_data", s.c_from_data}});
  }
  for (const BacktestRow& r : b.rows) {
    nlohmann::json row = RowJson(r);
    row.erase("step");
    row["cutoff_step"] = r.cutoff_step;
    row["fraction"] = r.fraction;
    row["measured"] = r.measured;
    j["predictions"].push_back(std::move(row));
  }
  return j;
}

// --live: the unfinished runs' predicted final train loss.
int PrintLive(const std::vector<hlab::fits::RunCurve>& curves,
              const hlab::fits::BacktestOptions& options, bool json) {
  auto rows = hlab::fits::PredictUnfinished(curves, options);
  if (!rows.ok()) {
    std::cerr << "hlab-curve-backtest: " << rows.status().message() << "\n";
    return 2;
  }
  if (json) {
    nlohmann::json j = {{"predicted",
                         "mean train_loss over the last 1% of steps, at "
                         "least 32"},
                        {"runs", nlohmann::json::array()}};
    for (const BacktestRow& r : *rows) j["runs"].push_back(RowJson(r));
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  if (rows->empty()) std::cout << "no unfinished run with points\n";
  for (const BacktestRow& r : *rows) {
    if (!r.predicted) {
      std::cout << absl::StrFormat(
          "%s %s %s step %d of %d: no prediction: %s\n", r.run_id, r.arch,
          r.scale, r.cutoff_step, r.steps, r.error);
      continue;
    }
    std::cout << absl::StrFormat(
        "%s %-7s %s step %5d of %5d: final train loss %.4f [%.4f, %.4f] "
        "(now %.4f)%s\n",
        r.run_id, r.arch, r.scale, r.cutoff_step, r.steps, *r.predicted,
        *r.lower, *r.upper, r.last_window,
        r.c_from_data ? "" : " (C from the prior)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db;
  int64_t sweep = 0;
  bool json = false, runs = false, live = false;
  hlab::fits::BacktestOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      json = true;
    } else if (flag == "--runs") {
      runs = true;
    } else if (flag == "--no-siblings") {
      options.siblings = false;
    } else if (flag == "--live") {
      live = true;
    } else if (flag == "--no-model-error") {
      options.model_error = false;
    } else if (flag == "--no-prior") {
      options.prior = false;
    } else if (i + 1 < argc && flag == "--db") {
      db = argv[++i];
    } else if (i + 1 < argc && flag == "--sweep") {
      if (!absl::SimpleAtoi(argv[++i], &sweep) || sweep <= 0) return Usage();
    } else if (i + 1 < argc && flag == "--decay") {
      if (!absl::SimpleAtod(argv[++i], &options.law.decay)) return Usage();
    } else if (i + 1 < argc && flag == "--min-updates") {
      if (!absl::SimpleAtoi(argv[++i], &options.law.min_updates)) {
        return Usage();
      }
    } else if (i + 1 < argc && flag == "--fractions") {
      options.fractions.clear();
      for (absl::string_view part : absl::StrSplit(argv[++i], ',')) {
        double f = 0;
        if (!absl::SimpleAtod(part, &f)) return Usage();
        options.fractions.push_back(f);
      }
    } else {
      std::cerr << "hlab-curve-backtest: unknown flag or missing value: "
                << flag << "\n";
      return Usage();
    }
  }
  if (db.empty()) return Usage();
  auto engine = hlab::store::QueryEngine::Open(db);
  if (!engine.ok()) return Fail(std::string(engine.status().message()));
  hlab::store::QueryOptions query_options;
  query_options.max_rows = 10'000'000;
  query_options.time_limit = absl::Minutes(5);
  const hlab::fits::RunQuery query = [&](const std::string& sql) {
    return (*engine)->Run(sql, query_options);
  };
  if (sweep == 0) {
    auto first = query("SELECT MIN(id) FROM sweeps");
    if (!first.ok()) return Fail(std::string(first.status().message()));
    if (first->rows.empty() ||
        !std::holds_alternative<int64_t>(first->rows[0][0])) {
      return Fail("no sweep in database " + db);
    }
    sweep = std::get<int64_t>(first->rows[0][0]);
  }
  auto curves = hlab::fits::ReadRunCurves(query, sweep);
  if (!curves.ok()) return Fail(std::string(curves.status().message()));
  if (curves->empty()) {
    return Fail("no runs in sweep " + std::to_string(sweep) + " of " + db);
  }
  if (live) return PrintLive(*curves, options, json);
  auto backtest = hlab::fits::BacktestCurves(*curves, options);
  if (!backtest.ok()) {
    std::cerr << "hlab-curve-backtest: " << backtest.status().message() << "\n";
    return 2;
  }
  if (json) {
    std::cout << ToJson(*backtest, sweep, options).dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat(
      "sweep %d: %d runs backtested, %d skipped; predicted: the mean "
      "train_loss over the last 1%% of steps (at least 32); schedule check: "
      "max |lr "
      "stored - planned| / planned = %.2g\n",
      sweep, backtest->runs, backtest->skipped, backtest->max_lr_mismatch);
  for (const hlab::fits::RunCurve& r : *curves) {
    if (!r.skipped.empty()) {
      std::cout << "skipped " << r.run_id << ": " << r.skipped << "\n";
    }
  }
  std::cout << "fraction  runs  failed  |err| law  last point  last window  "
               "rel err  law better (point / window)  coverage 95%  width  "
               "C from decays\n";
  for (const FractionSummary& s : backtest->summaries) {
    std::cout << absl::StrFormat(
        "%8.2f  %4d  %6d  %9.4f  %10.4f  %11.4f  %6.2f%%  %12.0f%% / %3.0f%%  "
        "%11.0f%%  %5.3f  %d\n",
        s.fraction, s.runs, s.failed, s.median_abs_error,
        s.median_abs_error_last_point, s.median_abs_error_last_window,
        100 * s.median_abs_relative_error, 100 * s.better_than_last_point,
        100 * s.better_than_last_window, 100 * s.coverage,
        s.median_interval_width, s.c_from_data);
  }
  if (runs) {
    for (const BacktestRow& r : backtest->rows) {
      if (!r.predicted) {
        std::cout << absl::StrFormat("%s %s %s f=%.2f: no prediction: %s\n",
                                     r.run_id, r.arch, r.scale, r.fraction,
                                     r.error);
        continue;
      }
      std::cout << absl::StrFormat(
          "%s %-7s %s steps %5d f=%.2f measured %.4f predicted %.4f [%.4f, "
          "%.4f] last %.4f / %.4f alpha %.3f C %.3g%s siblings %d\n",
          r.run_id, r.arch, r.scale, r.steps, r.fraction, r.measured,
          *r.predicted, *r.lower, *r.upper, r.last_point, r.last_window,
          r.alpha, r.c, r.c_from_data ? "" : " (prior)", r.siblings_used);
    }
  }
  return 0;
}
