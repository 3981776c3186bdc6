// `hlab replay`: a finished sweep's schedule simulated on its measured
// results, once per scheduling policy (analysis/replay.h, the pool from
// fits/replay_pool.h): how much of the grid's compute each order of
// training the runs needs before the fitted laws predict the target region
// as well as the whole grid does. docs/analysis.md, "Replay".
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "analysis/replay.h"
#include "cli/client_commands.h"
#include "cli/flags.h"
#include "coordinator/store/query.h"
#include "coordinator/sweep/expand.h"
#include "coordinator/sweep/spec_defaults.h"
#include "coordinator/sweep/spec_parser.h"
#include "fits/replay_pool.h"
#include "fits/run_figures.h"
#include "fits/sweep_fits.h"
#include "report/plots.h"
#include "report/replay_figure.h"

namespace hlab::cli {
namespace {

constexpr char kName[] = "replay";
// The compute fractions the table compares the policies at.
constexpr double kFractions[] = {0.2, 0.4, 0.6};

nlohmann::ordered_json OptionalJson(const std::optional<double>& x) {
  return x ? nlohmann::ordered_json(*x) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json ResultJson(const analysis::ReplayResult& r) {
  nlohmann::ordered_json j;
  j["policy"] = analysis::ReplayPolicyName(r.policy);
  j["trunks"] = analysis::TrunkCostName(r.trunk_cost);
  if (r.policy == analysis::ReplayPolicy::kRandom) j["seed"] = r.seed;
  j["flops_fraction_at_target"] = OptionalJson(r.flops_fraction_at_target);
  j["flops_fraction_at_error"] = OptionalJson(r.flops_fraction_at_error);
  nlohmann::ordered_json curve = nlohmann::ordered_json::array();
  for (const analysis::ReplayStep& s : r.steps) {
    curve.push_back({{"run_id", s.run_id},
                     {"arch", s.arch},
                     {"flops", s.flops},
                     {"fraction", s.fraction},
                     {"r2_target", OptionalJson(s.r2_target)},
                     {"median_abs_error", OptionalJson(s.median_abs_error)}});
  }
  j["curve"] = std::move(curve);
  return j;
}

std::string Percent(const std::optional<double>& x) {
  return x ? absl::StrFormat("%.0f%%", 100 * *x) : std::string("-");
}

// x with `digits` decimals, or "-".
std::string Fixed(const std::optional<double>& x, int digits) {
  return x ? absl::StrFormat("%.*f", digits, *x) : std::string("-");
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size();
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

// The plan and the measured values: from a database (--db) or from a
// report's runs.csv with the spec it ran (--runs-csv, --spec).
struct Inputs {
  std::string label;
  v1::SweepSpec spec;
  fits::MeasuredValues measured;
};

absl::StatusOr<Inputs> ReadInputs(const ParsedArgs& args,
                                  const std::string& target) {
  Inputs in;
  std::string spec_text;
  if (args.Has("db")) {
    const std::string path = args.Get("db");
    if (access(path.c_str(), R_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(
          "cannot read ", path, "; give the coordinator's database file"));
    }
    absl::StatusOr<std::unique_ptr<store::QueryEngine>> query =
        store::QueryEngine::Open(path);
    if (!query.ok()) return query.status();
    int64_t sweep_id = 0;
    absl::Status found = fits::FindStoredSweep(**query, args.Get("sweep"),
                                               &sweep_id, &spec_text);
    if (!found.ok()) return found;
    store::QueryOptions options;
    options.max_rows = 1000000;
    absl::StatusOr<std::vector<fits::RunFigures>> runs = fits::ReadRunFigures(
        [&](const std::string& sql) { return (*query)->Run(sql, options); },
        sweep_id);
    if (!runs.ok()) return runs.status();
    in.measured = fits::MeasuredFromRuns(*runs, target);
    in.label = absl::StrCat(path, ", sweep ", sweep_id);
  } else {
    const std::string csv = args.Get("runs-csv"), spec = args.Get("spec");
    if (csv.empty() || spec.empty()) {
      return absl::InvalidArgumentError(
          "give --db FILE, or --runs-csv FILE with --spec FILE");
    }
    absl::StatusOr<fits::MeasuredValues> measured =
        fits::ReadMeasuredCsv(csv, target);
    if (!measured.ok()) return measured.status();
    in.measured = *std::move(measured);
    absl::StatusOr<v1::SweepSpec> parsed = sweep::LoadSweepSpec(spec);
    if (!parsed.ok()) return parsed.status();
    in.spec = *std::move(parsed);
    in.label = csv;
    return in;
  }
  absl::StatusOr<v1::SweepSpec> spec =
      sweep::ParseSweepSpec(spec_text, sweep::SpecFormat::kAuto);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the stored spec does not parse: ", spec.status().message()));
  }
  in.spec = *std::move(spec);
  return in;
}

int RunReplay(const std::vector<std::string>& argv, std::ostream& out,
              std::ostream& err) {
  const std::vector<FlagDef> flags = {
      {"db", true},     {"sweep", true},         {"runs-csv", true},
      {"spec", true},   {"target", true},        {"policy", true},
      {"seeds", true},  {"target-scales", true}, {"threads", true},
      {"trunks", true}, {"plot", true},          {"json", false},
      {"curve", false}};
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, flags);
  if (!args.ok()) return UsageError(err, kName, args.status().message());
  if (!args->positional().empty()) {
    return UsageError(err, kName,
                      "unexpected argument '" + args->positional()[0] + "'");
  }
  const std::string target = args->Get("target", "loss");
  if (target != "loss" && target != "longppl") {
    return UsageError(err, kName,
                      "--target must be loss or longppl, got '" + target + "'");
  }
  std::vector<analysis::ReplayPolicy> policies;
  for (absl::string_view p :
       absl::StrSplit(args->Get("policy", "adaptive,default,random"), ',')) {
    if (p == "adaptive") {
      policies.push_back(analysis::ReplayPolicy::kAdaptive);
    } else if (p == "default") {
      policies.push_back(analysis::ReplayPolicy::kDefault);
    } else if (p == "random") {
      policies.push_back(analysis::ReplayPolicy::kRandom);
    } else {
      return UsageError(err, kName,
                        absl::StrCat("--policy: unknown policy '", p,
                                     "' (adaptive, default or random)"));
    }
  }
  std::vector<analysis::TrunkCost> trunk_costs;
  for (absl::string_view t :
       absl::StrSplit(args->Get("trunks", "whole"), ',')) {
    if (t == "whole") {
      trunk_costs.push_back(analysis::TrunkCost::kWhole);
    } else if (t == "extend") {
      trunk_costs.push_back(analysis::TrunkCost::kExtend);
    } else {
      return UsageError(err, kName,
                        absl::StrCat("--trunks: unknown cost model '", t,
                                     "' (whole or extend)"));
    }
  }
  int64_t seeds = 5, threads = 1;
  for (auto [flag, value] : {std::pair<const char*, int64_t*>{"seeds", &seeds},
                             {"threads", &threads}}) {
    const std::string text = args->Get(flag, "");
    if (text.empty()) continue;
    if (!absl::SimpleAtoi(text, value) || *value < 1 || *value > 1000) {
      return UsageError(err, kName,
                        absl::StrCat("--", flag,
                                     ": expected an integer in [1, 1000], "
                                     "got '",
                                     text, "'"));
    }
  }
  if (!args->Has("db") && !args->Has("runs-csv")) {
    return UsageError(err, kName,
                      "give --db FILE, or --runs-csv FILE with --spec FILE");
  }
  absl::StatusOr<Inputs> in = ReadInputs(*args, target);
  if (!in.ok()) return Failure(err, kName, in.status().message());
  const v1::SweepSpec spec = sweep::WithDefaults(in->spec);
  std::vector<std::string> target_scales;
  if (args->Has("target-scales")) {
    target_scales =
        absl::StrSplit(args->Get("target-scales"), ',', absl::SkipEmpty());
  } else {
    target_scales.assign(spec.fit().verify_scales().begin(),
                         spec.fit().verify_scales().end());
  }
  if (target_scales.empty()) {
    return Failure(err, kName,
                   "the sweep's fit section has no verify_scales; name the "
                   "target region with --target-scales S4[,S5...]");
  }
  absl::StatusOr<sweep::SweepPlan> plan = sweep::PlanSweep(spec);
  if (!plan.ok()) {
    return Failure(err, kName,
                   absl::StrCat("the sweep's spec does not plan: ",
                                plan.status().message()));
  }
  absl::StatusOr<fits::ReplayPool> pool =
      fits::BuildReplayPool(*plan, in->measured, target_scales);
  if (!pool.ok()) return Failure(err, kName, pool.status().message());

  std::vector<analysis::ReplayResult> results;
  for (analysis::TrunkCost trunk_cost : trunk_costs) {
    for (analysis::ReplayPolicy policy : policies) {
      const int64_t n = policy == analysis::ReplayPolicy::kRandom ? seeds : 1;
      for (int64_t s = 1; s <= n; ++s) {
        analysis::ReplayOptions options;
        options.policy = policy;
        options.trunk_cost = trunk_cost;
        options.seed = static_cast<uint64_t>(s);
        options.threads = static_cast<int>(threads);
        err << "hlab replay: " << analysis::ReplayPolicyName(policy)
            << (n > 1 ? absl::StrCat(" seed ", s) : "") << ", trunks "
            << analysis::TrunkCostName(trunk_cost) << "\n";
        absl::StatusOr<analysis::ReplayResult> r =
            analysis::Replay(pool->runs, options);
        if (!r.ok()) return Failure(err, kName, r.status().message());
        results.push_back(*std::move(r));
      }
    }
  }
  const analysis::ReplayResult& first = results.front();
  if (args->Has("plot")) {
    const std::string dir = args->Get("plot");
    absl::StatusOr<report::Plot> plot = report::WriteReplayFigure(
        results, absl::StrCat("Replay of ", in->label, ": ", target), dir);
    if (!plot.ok()) return Failure(err, kName, plot.status().message());
    std::vector<report::Plot> plots = {*plot};
    absl::Status drawn = report::RenderPlots(dir, {}, &plots);
    if (!drawn.ok()) return Failure(err, kName, drawn.message());
    err << "hlab replay: figure " << dir << "/replay.svg"
        << (plots[0].png ? absl::StrCat(" and ", dir, "/replay.png") : "")
        << "\n";
  }
  if (args->Has("json")) {
    nlohmann::ordered_json j;
    j["source"] = in->label;
    j["target"] = target;
    j["target_scales"] = target_scales;
    j["candidates"] = first.candidates;
    j["targets"] = first.targets;
    j["planned_runs"] = pool->planned;
    j["measured_runs"] = pool->measured;
    j["grid_flops"] = first.grid_flops;
    j["full_r2_target"] = OptionalJson(first.full_r2_target);
    j["full_median_abs_error"] = OptionalJson(first.full_median_abs_error);
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    // (policy, trunks) -> each seed's fraction; a seed that never reaches
    // the target counts as the whole grid.
    std::map<std::pair<std::string, std::string>, std::vector<double>>
        fractions;
    for (const analysis::ReplayResult& r : results) {
      all.push_back(ResultJson(r));
      fractions[{analysis::ReplayPolicyName(r.policy),
                 analysis::TrunkCostName(r.trunk_cost)}]
          .push_back(r.flops_fraction_at_target.value_or(1.0));
    }
    nlohmann::ordered_json summary = nlohmann::ordered_json::array();
    for (const auto& [key, f] : fractions) {
      summary.push_back({{"policy", key.first},
                         {"trunks", key.second},
                         {"runs", f.size()},
                         {"median_flops_fraction_at_target", Median(f)}});
    }
    j["summary"] = std::move(summary);
    j["replays"] = std::move(all);
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  out << absl::StrFormat(
      "%s: target %s, %d candidate runs (%.3g FLOPs, trunks shared), %d "
      "target runs (%s)\n",
      in->label, target, first.candidates, first.grid_flops, first.targets,
      absl::StrJoin(target_scales, ","));
  if (pool->measured < pool->planned) {
    out << absl::StrFormat(
        "  %d of the %d planned runs have no measured %s; "
        "they are left out\n",
        pool->planned - pool->measured, pool->planned, target);
  }
  out << absl::StrFormat(
      "full grid: R^2 on the target runs %s (mean over architectures), "
      "median |relative error| %s\n",
      Fixed(first.full_r2_target, 4),
      first.full_median_abs_error
          ? absl::StrFormat("%.2f%%", 100 * *first.full_median_abs_error)
          : "-");
  out << absl::StrFormat("%-9s %-7s %5s %14s %13s", "policy", "trunks", "seed",
                         "FLOPs at R^2", "FLOPs at err");
  for (double f : kFractions) {
    out << absl::StrFormat(" %8s", absl::StrFormat("R^2@%.0f%%", 100 * f));
  }
  for (double f : kFractions) {
    out << absl::StrFormat(" %8s", absl::StrFormat("err@%.0f%%", 100 * f));
  }
  out << "\n";
  for (const analysis::ReplayResult& r : results) {
    out << absl::StrFormat(
        "%-9s %-7s %5s %14s %13s", analysis::ReplayPolicyName(r.policy),
        analysis::TrunkCostName(r.trunk_cost),
        r.policy == analysis::ReplayPolicy::kRandom ? absl::StrCat(r.seed)
                                                    : "-",
        Percent(r.flops_fraction_at_target),
        Percent(r.flops_fraction_at_error));
    for (double f : kFractions) {
      out << absl::StrFormat(" %8s", Fixed(analysis::R2AtFraction(r, f), 3));
    }
    for (double f : kFractions) {
      const std::optional<double> e = analysis::ErrorAtFraction(r, f);
      out << absl::StrFormat(
          " %8s", e ? absl::StrFormat("%.2f%%", 100 * *e) : std::string("-"));
    }
    out << "\n";
  }
  if (args->Has("curve")) {
    for (const analysis::ReplayResult& r : results) {
      out << "\n"
          << analysis::ReplayPolicyName(r.policy) << ", trunks "
          << analysis::TrunkCostName(r.trunk_cost);
      if (r.policy == analysis::ReplayPolicy::kRandom)
        out << " seed " << r.seed;
      out << ": step, run, architecture, FLOPs fraction, R^2 target, median "
             "|error|\n";
      for (size_t i = 0; i < r.steps.size(); ++i) {
        const analysis::ReplayStep& s = r.steps[i];
        out << absl::StrFormat(
            "  %3d %s %-14s %6.3f %9s %9s\n", i + 1, s.run_id, s.arch,
            s.fraction, Fixed(s.r2_target, 4),
            s.median_abs_error
                ? absl::StrFormat("%.2f%%", 100 * *s.median_abs_error)
                : "-");
      }
    }
  }
  return kExitOk;
}

}  // namespace

Command ReplayCommand() {
  Command c;
  c.name = kName;
  c.summary = "simulate a finished sweep's schedule under other run orders";
  c.usage =
      "usage:\n"
      "  hlab replay --db FILE.db [--sweep S] [--target loss|longppl]\n"
      "              [--policy adaptive,default,random] [--seeds K]\n"
      "              [--target-scales S4,...] [--trunks whole,extend]\n"
      "              [--threads T] [--curve] [--plot DIR] [--json]\n"
      "  hlab replay --runs-csv runs.csv --spec SPEC.yaml [the same options]\n"
      "trains the sweep's runs again in simulation, one at a time in each "
      "policy's\n"
      "order, each costing its planned FLOPs (WSD trunks shared), refits each\n"
      "architecture's law after every run and scores its predictions of the "
      "target\n"
      "region (default: the fit's verify scales; never trained): R^2 (mean "
      "over\n"
      "architectures) and the median |relative error|. Prints, per policy, "
      "the\n"
      "fraction of the grid's FLOPs from which on R^2 stays within 0.02 of "
      "the full\n"
      "grid's ('FLOPs at R^2') and the median error within 1.5x ('FLOPs at "
      "err').\n"
      "Policies: adaptive (the largest expected reduction of the target "
      "region's\n"
      "predictive variance per FLOP; docs/analysis.md), default (hlab's lease "
      "order),\n"
      "random (--seeds K orders, default 5). --trunks: a shared trunk is "
      "paid\n"
      "whole by its first run (whole: the default order's trunks) or "
      "extended only as\n"
      "far as the runs taken need (extend: schedule_policy adaptive's trunk\n"
      "segments). --runs-csv takes a report's runs.csv "
      "with\n"
      "the spec that made it. --json: one object per replay with its curve, "
      "and a\n"
      "summary per policy (the median over seeds). --plot DIR: the curves "
      "as a\n"
      "gnuplot figure, DIR/replay.gp, .svg and .png.\n";
  c.run = RunReplay;
  return c;
}

}  // namespace hlab::cli
