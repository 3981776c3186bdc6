#include "analysis/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "analysis/run_selection.h"
#include "analysis/verify.h"

namespace hlab::analysis {
namespace {

bool Positive(double x) { return std::isfinite(x) && x > 0; }

absl::Status ValidateRuns(absl::Span<const ReplayRun> runs) {
  std::set<std::string> ids;
  for (const ReplayRun& r : runs) {
    const std::string who = absl::StrCat("run ", r.run_id);
    if (!ids.insert(r.run_id).second) {
      return absl::InvalidArgumentError(absl::StrCat(who, " appears twice"));
    }
    if (!Positive(r.n)) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": N = ", r.n, " must be finite and > 0"));
    }
    if (!Positive(r.d)) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": D = ", r.d, " must be finite and > 0"));
    }
    if (!Positive(r.value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": the measured value ", r.value, " must be finite and > 0"));
    }
    if (!(r.trunk_flops >= 0) || !(r.own_flops >= 0) ||
        !std::isfinite(r.trunk_flops) || !std::isfinite(r.own_flops)) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": FLOPs (trunk ", r.trunk_flops, ", own ",
                       r.own_flops, ") must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

// One architecture's state in the simulation.
struct ArchState {
  std::vector<int> targets;     // indices into runs
  std::vector<int> trained;     // indices into runs, in order
  int n_levels = 0;             // distinct N among its candidates
  std::optional<PowerLaw> law;  // fitted on `trained` (>= 5 of them)
};

class Simulation {
 public:
  Simulation(absl::Span<const ReplayRun> runs, const ReplayOptions& options)
      : runs_(runs), options_(options) {}

  absl::StatusOr<ReplayResult> Run() {
    ReplayResult result;
    result.policy = options_.policy;
    result.trunk_cost = options_.trunk_cost;
    result.seed = options_.seed;
    std::map<std::string, std::set<double>> n_levels;
    std::map<std::string, double> trunk_total;
    for (size_t i = 0; i < runs_.size(); ++i) {
      const ReplayRun& r = runs_[i];
      ArchState& a = archs_[r.arch];
      if (r.target) {
        a.targets.push_back(static_cast<int>(i));
        ++result.targets;
        continue;
      }
      remaining_.push_back(static_cast<int>(i));
      n_levels[r.arch].insert(r.n);
      ++result.candidates;
      result.grid_flops += r.own_flops;
      if (r.trunk.empty()) {
        result.grid_flops += r.trunk_flops;
      } else {
        double& t = trunk_total[r.trunk];
        t = std::max(t, r.trunk_flops);
      }
    }
    for (const auto& [trunk, flops] : trunk_total) result.grid_flops += flops;
    trunk_total_ = trunk_total;
    if (result.candidates == 0) {
      return absl::InvalidArgumentError(
          "no candidate runs: every run is in the target region");
    }
    if (result.targets == 0) {
      return absl::InvalidArgumentError(
          "no target runs: name the target region's scales (by default the "
          "fit's verify_scales)");
    }
    for (auto& [arch, a] : archs_) {
      a.n_levels = static_cast<int>(n_levels[arch].size());
      int candidates = 0;
      for (int i : remaining_) candidates += runs_[i].arch == arch;
      if (!a.targets.empty() && candidates < kNumLogParams) {
        return absl::InvalidArgumentError(absl::StrCat(
            "architecture ", arch, " has ", a.targets.size(),
            " target runs but only ", candidates,
            " candidate runs; a law needs at least ", kNumLogParams));
      }
    }
    if (!(result.grid_flops > 0)) {
      return absl::InvalidArgumentError(
          "the candidate runs' FLOPs sum to 0; the runs carry no costs");
    }
    if (options_.policy == ReplayPolicy::kRandom) {
      std::mt19937_64 rng(options_.seed);
      // Fisher-Yates with a 64-bit draw: the same order on every platform.
      for (size_t i = remaining_.size(); i > 1; --i) {
        std::swap(remaining_[i - 1], remaining_[rng() % i]);
      }
    } else {
      std::stable_sort(remaining_.begin(), remaining_.end(), [&](int x, int y) {
        return runs_[x].default_rank < runs_[y].default_rank;
      });
    }
    double spent = 0;
    while (!remaining_.empty()) {
      size_t pick = 0;
      if (options_.policy == ReplayPolicy::kAdaptive) pick = AdaptivePick();
      const int i = remaining_[pick];
      remaining_.erase(remaining_.begin() + static_cast<std::ptrdiff_t>(pick));
      const ReplayRun& r = runs_[i];
      const double cost = Cost(r);
      if (!r.trunk.empty()) {
        double& pos = trunk_position_[r.trunk];
        pos = std::max(pos, options_.trunk_cost == TrunkCost::kWhole
                                ? trunk_total_.at(r.trunk)
                                : r.trunk_flops);
      }
      spent += cost;
      ArchState& a = archs_[r.arch];
      a.trained.push_back(i);
      Refit(a);
      ReplayStep step;
      step.run_id = r.run_id;
      step.arch = r.arch;
      step.cost = cost;
      step.flops = spent;
      step.fraction = spent / result.grid_flops;
      Score(&step);
      result.steps.push_back(std::move(step));
    }
    const ReplayStep& last = result.steps.back();
    result.full_r2_target = last.r2_target;
    result.full_median_abs_error = last.median_abs_error;
    if (last.r2_target) {
      result.flops_fraction_at_target =
          FirstFractionKept(result, [&](const ReplayStep& s) {
            return s.r2_target &&
                   *s.r2_target >= *last.r2_target - options_.r2_tolerance;
          });
    }
    if (last.median_abs_error) {
      result.flops_fraction_at_error =
          FirstFractionKept(result, [&](const ReplayStep& s) {
            return s.median_abs_error &&
                   *s.median_abs_error <=
                       *last.median_abs_error * options_.error_factor;
          });
    }
    return result;
  }

 private:
  double Cost(const ReplayRun& r) const {
    if (r.trunk.empty()) return r.trunk_flops + r.own_flops;
    auto it = trunk_position_.find(r.trunk);
    if (options_.trunk_cost == TrunkCost::kWhole) {
      return (it == trunk_position_.end() ? trunk_total_.at(r.trunk) : 0.0) +
             r.own_flops;
    }
    const double pos = it == trunk_position_.end() ? 0 : it->second;
    return std::max(0.0, r.trunk_flops - pos) + r.own_flops;
  }

  static std::vector<DesignPoint> Points(absl::Span<const ReplayRun> runs,
                                         const std::vector<int>& which) {
    std::vector<DesignPoint> out;
    out.reserve(which.size());
    for (int i : which) out.push_back({runs[i].n, runs[i].d});
    return out;
  }

  bool ArchIdentifiable(const ArchState& a) const {
    return Identifiable(Points(runs_, a.trained), std::min(3, a.n_levels));
  }

  void Refit(ArchState& a) {
    a.law.reset();
    if (a.trained.size() < static_cast<size_t>(kNumLogParams)) return;
    std::vector<ScalingPoint> points;
    for (int i : a.trained) {
      points.push_back({runs_[i].n, runs_[i].d, runs_[i].value});
    }
    FitOptions fit;
    fit.grid = options_.grid;
    fit.threads = options_.threads;
    absl::StatusOr<FitResult> r = FitPowerLaw(points, fit);
    if (r.ok()) a.law = r->law;
  }

  void Score(ReplayStep* step) const {
    std::vector<double> errors;
    double r2_sum = 0;
    int r2_count = 0;
    bool every_arch = true;
    for (const auto& [arch, a] : archs_) {
      if (a.targets.empty()) continue;
      if (!a.law) {
        every_arch = false;
        continue;
      }
      std::vector<ScalingPoint> truth;
      for (int i : a.targets) {
        const ReplayRun& r = runs_[i];
        truth.push_back({r.n, r.d, r.value});
        const double predicted = a.law->Predict(r.n, r.d);
        errors.push_back(std::abs(predicted - r.value) / r.value);
      }
      const double r2 = RSquared(*a.law, truth);
      if (std::isfinite(r2)) {
        r2_sum += r2;
        ++r2_count;
      } else if (!std::isnan(r2)) {
        every_arch = false;  // -inf: a prediction overflowed
      }
    }
    if (!every_arch) return;
    if (r2_count > 0) step->r2_target = r2_sum / r2_count;
    if (!errors.empty()) {
      std::sort(errors.begin(), errors.end());
      const size_t m = errors.size();
      step->median_abs_error =
          m % 2 ? errors[m / 2] : (errors[m / 2 - 1] + errors[m / 2]) / 2;
    }
  }

  // Index into remaining_ of the adaptive policy's next run.
  size_t AdaptivePick() const {
    // Seeding: an architecture whose trained runs cannot yet determine a
    // law takes its cheapest run that adds a missing scale or budget (else
    // its cheapest run); the cheapest such pick over all architectures.
    std::optional<size_t> seed_pick;
    double seed_key[3] = {0, 0, 0};  // (adds no level, cost, default rank)
    for (size_t k = 0; k < remaining_.size(); ++k) {
      const ReplayRun& r = runs_[remaining_[k]];
      const ArchState& a = archs_.at(r.arch);
      if (a.targets.empty() || (ArchIdentifiable(a) && a.law)) continue;
      std::set<double> ns, ds;
      for (int i : a.trained) {
        ns.insert(runs_[i].n);
        ds.insert(runs_[i].d);
      }
      const bool adds_level =
          (static_cast<int>(ns.size()) < std::min(3, a.n_levels) &&
           !ns.count(r.n)) ||
          (ds.size() < 2 && !ds.count(r.d));
      const double key[3] = {adds_level ? 0.0 : 1.0, Cost(r),
                             static_cast<double>(r.default_rank)};
      if (!seed_pick ||
          std::lexicographical_compare(key, key + 3, seed_key, seed_key + 3)) {
        seed_pick = k;
        std::copy(key, key + 3, seed_key);
      }
    }
    if (seed_pick) return *seed_pick;
    // Every law is identifiable: the largest variance reduction per FLOP.
    std::map<std::string, std::optional<LinearisedLaw>> lin;
    std::map<std::string, std::vector<DesignPoint>> targets;
    for (const auto& [arch, a] : archs_) {
      if (!a.law || a.targets.empty()) continue;
      absl::StatusOr<LinearisedLaw> l =
          LinearisedLaw::Create(*a.law, Points(runs_, a.trained));
      if (l.ok()) lin[arch] = *std::move(l);
      targets[arch] = Points(runs_, a.targets);
    }
    size_t best = 0;
    double best_score = -1;
    for (size_t k = 0; k < remaining_.size(); ++k) {
      const ReplayRun& r = runs_[remaining_[k]];
      auto it = lin.find(r.arch);
      // Runs of architectures without a target, or whose law could not be
      // linearised, go last, in the default order.
      double gain = 0;
      if (it != lin.end() && it->second) {
        gain = it->second->VarianceReduction({r.n, r.d}, targets[r.arch]);
      }
      const double cost = Cost(r);
      const double score =
          cost > 0 ? gain / cost : (gain > 0 ? kInfinity : 0.0);
      if (score > best_score) {
        best = k;
        best_score = score;
      }
    }
    return best;
  }

  template <typename Reached>
  static std::optional<double> FirstFractionKept(const ReplayResult& result,
                                                 Reached reached) {
    std::optional<double> fraction;
    for (auto it = result.steps.rbegin(); it != result.steps.rend(); ++it) {
      if (!reached(*it)) break;
      fraction = it->fraction;
    }
    return fraction;
  }

  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

  absl::Span<const ReplayRun> runs_;
  const ReplayOptions& options_;
  std::map<std::string, ArchState> archs_;
  std::vector<int> remaining_;
  // How far each trunk has been trained (FLOPs), and its whole cost.
  std::map<std::string, double> trunk_position_;
  std::map<std::string, double> trunk_total_;
};

}  // namespace

const char* ReplayPolicyName(ReplayPolicy policy) {
  switch (policy) {
    case ReplayPolicy::kDefault:
      return "default";
    case ReplayPolicy::kRandom:
      return "random";
    case ReplayPolicy::kAdaptive:
      return "adaptive";
  }
  return "?";
}

const char* TrunkCostName(TrunkCost cost) {
  return cost == TrunkCost::kWhole ? "whole" : "extend";
}

StartGrid ReplayOptions::CoarseReplayGrid() {
  StartGrid g;
  g.alpha = {0, 0.5, 1, 1.5, 2};
  g.beta = {0, 0.5, 1, 1.5, 2};
  g.e = {-1, 0, 1};
  g.a = {0, 10, 20};
  g.b = {0, 10, 20};
  return g;
}

absl::StatusOr<ReplayResult> Replay(absl::Span<const ReplayRun> runs,
                                    const ReplayOptions& options) {
  if (absl::Status s = ValidateRuns(runs); !s.ok()) return s;
  if (absl::Status s = options.grid.Validate(); !s.ok()) return s;
  if (!(options.r2_tolerance >= 0) || !(options.error_factor >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "r2_tolerance (", options.r2_tolerance,
        ") must be >= 0 and error_factor (", options.error_factor, ") >= 1"));
  }
  return Simulation(runs, options).Run();
}

namespace {

// `figure` of the last step at or before `fraction`.
std::optional<double> AtFraction(const ReplayResult& result, double fraction,
                                 std::optional<double> ReplayStep::*figure) {
  std::optional<double> out;
  for (const ReplayStep& s : result.steps) {
    if (s.fraction > fraction + 1e-12) break;
    out = s.*figure;
  }
  return out;
}

}  // namespace

std::optional<double> R2AtFraction(const ReplayResult& result,
                                   double fraction) {
  return AtFraction(result, fraction, &ReplayStep::r2_target);
}

std::optional<double> ErrorAtFraction(const ReplayResult& result,
                                      double fraction) {
  return AtFraction(result, fraction, &ReplayStep::median_abs_error);
}

}  // namespace hlab::analysis
