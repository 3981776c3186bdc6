#include "coordinator/server/adaptive_order.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/planning/sweep_catalog.h"
#include "coordinator/store/store.h"

namespace hlab::coordinator {
namespace {

constexpr double kPetaFlop = 1e15;

struct Pick {
  size_t candidate = 0;
  std::optional<double> score;
  std::string reason;
};

// The greedy order of RankAdaptive.
class Ranking {
 public:
  explicit Ranking(const OrderInput& input) : in_(input) {
    for (size_t i = 0; i < in_.candidates.size(); ++i) remaining_.insert(i);
    for (const auto& [arch, a] : in_.archs) design_[arch] = a.measured;
  }

  std::vector<Pick> Run() {
    Seed();
    Score();
    Rest();
    return std::move(picks_);
  }

 private:
  double Cost(const OrderCandidate& c) const {
    double cost = c.flops;
    for (const std::string& trunk : c.trunk_tasks) {
      if (paid_.count(trunk) > 0) continue;
      auto it = in_.trunk_flops.find(trunk);
      if (it != in_.trunk_flops.end()) cost += it->second;
    }
    return cost;
  }

  const OrderArch* Arch(const std::string& arch) const {
    auto it = in_.archs.find(arch);
    return it == in_.archs.end() ? nullptr : &it->second;
  }

  // Whether c can narrow its architecture's law in the target region.
  bool Useful(const OrderCandidate& c) const {
    const OrderArch* a = Arch(c.arch);
    return c.fit_scale && a != nullptr && !a->targets.empty();
  }

  bool Seeded(const std::string& arch) const {
    const OrderArch* a = Arch(arch);
    return analysis::Identifiable(design_.at(arch), std::min(3, a->n_levels));
  }

  void Take(size_t i, std::optional<double> score, std::string reason) {
    const OrderCandidate& c = in_.candidates[i];
    remaining_.erase(i);
    paid_.insert(c.trunk_tasks.begin(), c.trunk_tasks.end());
    design_[c.arch].push_back({c.n, c.d});
    picks_.push_back({i, score, std::move(reason)});
  }

  // Seeds: while an architecture cannot determine a law, its cheapest run
  // that adds a missing scale or budget (else its cheapest), the cheapest
  // such pick over all architectures first.
  void Seed() {
    while (true) {
      std::optional<size_t> best;
      std::tuple<int, double, std::string> best_key;
      std::string best_reason;
      for (size_t i : remaining_) {
        const OrderCandidate& c = in_.candidates[i];
        if (!Useful(c) || Seeded(c.arch)) continue;
        const OrderArch& a = *Arch(c.arch);
        std::set<double> ns, ds;
        for (const analysis::DesignPoint& p : design_.at(c.arch)) {
          ns.insert(p.n);
          ds.insert(p.d);
        }
        const bool adds_scale =
            static_cast<int>(ns.size()) < std::min(3, a.n_levels) &&
            ns.count(c.n) == 0;
        const bool adds_budget = ds.size() < 2 && ds.count(c.d) == 0;
        const auto key = std::make_tuple(adds_scale || adds_budget ? 0 : 1,
                                         Cost(c), c.task_id);
        if (!best || key < best_key) {
          best = i;
          best_key = key;
          best_reason =
              adds_scale ? absl::StrFormat("seed: adds scale %s to %s's law",
                                           c.scale, c.arch)
              : adds_budget
                  ? absl::StrFormat("seed: adds a budget to %s's law", c.arch)
                  : absl::StrFormat("seed: %s's law needs %d runs", c.arch,
                                    analysis::kNumLogParams);
        }
      }
      if (!best) return;
      Take(*best, std::nullopt, best_reason);
    }
  }

  // Scored: the largest variance reduction per PFLOP, over every
  // architecture with a law, each pick added to its law's design.
  void Score() {
    std::map<std::string, std::optional<analysis::LinearisedLaw>> lin;
    auto linearise = [&](const std::string& arch) {
      const OrderArch& a = *Arch(arch);
      absl::StatusOr<analysis::LinearisedLaw> l =
          analysis::LinearisedLaw::Create(*a.law, design_.at(arch));
      lin[arch] =
          l.ok() ? std::optional<analysis::LinearisedLaw>(*l) : std::nullopt;
    };
    for (const auto& [arch, a] : in_.archs) {
      if (a.law && !a.targets.empty()) linearise(arch);
    }
    while (true) {
      std::optional<size_t> best;
      double best_score = -1, best_cost = 0, best_gain = 0;
      for (size_t i : remaining_) {
        const OrderCandidate& c = in_.candidates[i];
        if (!Useful(c)) continue;
        auto it = lin.find(c.arch);
        if (it == lin.end() || !it->second) continue;
        const double gain =
            it->second->VarianceReduction({c.n, c.d}, Arch(c.arch)->targets);
        const double cost = Cost(c);
        const double score =
            cost > 0 ? gain / (cost / kPetaFlop)
                     : (gain > 0 ? std::numeric_limits<double>::infinity() : 0);
        const bool better =
            !best || score > best_score ||
            (score == best_score &&
             std::make_pair(cost, c.task_id) <
                 std::make_pair(best_cost, in_.candidates[*best].task_id));
        if (better) {
          best = i;
          best_score = score;
          best_cost = cost;
          best_gain = gain;
        }
      }
      if (!best) return;
      const std::string arch = in_.candidates[*best].arch;
      Take(*best, best_score,
           absl::StrFormat("narrows %s's target predictions: dU %.3g for "
                           "%.3g PFLOP",
                           arch, best_gain, best_cost / kPetaFlop));
      linearise(arch);
    }
  }

  // The rest, cheapest first.
  void Rest() {
    while (!remaining_.empty()) {
      size_t best = *remaining_.begin();
      for (size_t i : remaining_) {
        const OrderCandidate& c = in_.candidates[i];
        const OrderCandidate& b = in_.candidates[best];
        if (std::make_pair(Cost(c), c.task_id) <
            std::make_pair(Cost(b), b.task_id)) {
          best = i;
        }
      }
      const OrderCandidate& c = in_.candidates[best];
      const OrderArch* a = Arch(c.arch);
      std::string reason;
      if (!c.fit_scale) {
        reason = absl::StrFormat("scale %s is not fitted: after the fit runs",
                                 c.scale);
      } else if (a == nullptr || a->targets.empty()) {
        reason = absl::StrFormat("no target-region run of %s", c.arch);
      } else {
        reason = absl::StrFormat("%s has no law to narrow yet", c.arch);
      }
      Take(best, std::nullopt, reason);
    }
  }

  const OrderInput& in_;
  std::set<size_t> remaining_;
  std::set<std::string> paid_;  // trunk tasks ordered already
  std::map<std::string, std::vector<analysis::DesignPoint>> design_;
  std::vector<Pick> picks_;
};

// The law of `arch` for `target` in a generation's laws JSON, when fitted.
std::optional<analysis::PowerLaw> LawOf(const nlohmann::json& laws,
                                        const std::string& arch,
                                        const std::string& target) {
  if (!laws.is_array()) return std::nullopt;
  for (const nlohmann::json& l : laws) {
    if (!l.is_object() || l.value("arch", "") != arch ||
        l.value("target", "") != target) {
      continue;
    }
    analysis::PowerLaw law;
    const std::pair<const char*, double*> fields[] = {
        {"e", &law.E}, {"a", &law.A},       {"alpha", &law.alpha},
        {"b", &law.B}, {"beta", &law.beta},
    };
    for (const auto& [key, out] : fields) {
      auto v = l.find(key);
      if (v == l.end() || !v->is_number()) return std::nullopt;
      *out = v->get<double>();
      if (!std::isfinite(*out)) return std::nullopt;
    }
    return law;
  }
  return std::nullopt;
}

// The first step a training task trains (a trunk segment's start).
int64_t StartStep(const store::Task& task) {
  const nlohmann::json payload =
      nlohmann::json::parse(task.spec.payload, nullptr, false);
  if (!payload.is_object()) return 0;
  const auto it = payload.find("start_step");
  return it != payload.end() && it->is_number_integer() ? it->get<int64_t>()
                                                        : 0;
}

bool Has(const google::protobuf::RepeatedPtrField<std::string>& list,
         const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

std::vector<store::TaskOrder> RankAdaptive(const OrderInput& input) {
  const std::vector<Pick> picks = Ranking(input).Run();
  std::vector<store::TaskOrder> out;
  std::vector<double> keys;
  std::set<std::string> trunks;
  int64_t rank = 0;
  for (const Pick& p : picks) {
    const OrderCandidate& c = input.candidates[p.candidate];
    ++rank;
    for (const std::string& trunk : c.trunk_tasks) {
      if (!trunks.insert(trunk).second) continue;
      auto it = input.trunk_flops.find(trunk);
      keys.push_back(it == input.trunk_flops.end() ? 0 : it->second);
      out.push_back(
          {trunk, 0, rank, p.score,
           absl::StrFormat("trunk of run %s: %s", c.run_id, p.reason)});
    }
    keys.push_back(c.flops);
    out.push_back({c.task_id, 0, rank, p.score, p.reason});
  }
  // Strictly increasing, so that the lease order within the sweep is the
  // rank order (tasks of equal cost would otherwise go by id).
  std::sort(keys.begin(), keys.end());
  for (size_t i = 1; i < keys.size(); ++i) {
    keys[i] = std::max(
        keys[i],
        std::nextafter(keys[i - 1], std::numeric_limits<double>::infinity()));
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].key = keys[i];
  return out;
}

absl::StatusOr<int> OrderAdaptiveSweep(ServiceContext& context,
                                       int64_t sweep_id) {
  HLAB_ASSIGN_OR_RETURN(std::shared_ptr<const sweep::SweepPlan> plan,
                        context.catalog->Plan(sweep_id));
  const hlab::v1::SweepSpec& spec = plan->spec;
  if (spec.schedule_policy() != "adaptive") return 0;
  const hlab::v1::FitSpec& fit = spec.fit();
  const hlab::v1::TargetRegion& region = spec.adaptive().target();
  const auto& target_scales =
      region.scales().empty() ? fit.verify_scales() : region.scales();
  const int largest =
      region.has_largest_budgets() ? region.largest_budgets() : 1;
  auto fitted = [&](const std::string& scale) {
    if (Has(fit.verify_scales(), scale)) return false;
    return fit.fit_scales().empty() || Has(fit.fit_scales(), scale);
  };
  store::RunFilter run_filter;
  run_filter.sweep_id = sweep_id;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Run> runs,
                        context.store->ListRuns(run_filter));
  store::TaskFilter task_filter;
  task_filter.sweep_id = sweep_id;
  HLAB_ASSIGN_OR_RETURN(std::vector<store::Task> tasks,
                        context.store->ListTasks(task_filter));
  HLAB_ASSIGN_OR_RETURN(std::optional<store::PredictionGeneration> newest,
                        context.store->LatestPredictions(sweep_id));
  const nlohmann::json laws =
      newest ? nlohmann::json::parse(newest->laws, nullptr, false)
             : nlohmann::json::array();
  const std::string law_target =
      fit.targets().empty() ? "loss" : fit.targets(0);

  OrderInput input;
  std::map<std::string, const store::Run*> by_id;
  // Per (architecture, scale): its budgets, for the target region's largest.
  std::map<std::pair<std::string, std::string>, std::set<int64_t>> budgets;
  std::map<std::string, std::set<int64_t>> levels;
  for (const store::Run& r : runs) {
    by_id[r.spec.id] = &r;
    budgets[{r.spec.arch, r.spec.scale}].insert(r.spec.budget_tokens);
    OrderArch& a = input.archs[r.spec.arch];
    if (!fitted(r.spec.scale)) continue;
    levels[r.spec.arch].insert(r.spec.n_params);
    if (r.state == store::RunState::kSucceeded) {
      a.measured.push_back({static_cast<double>(r.spec.n_params),
                            static_cast<double>(r.spec.budget_tokens)});
    }
  }
  for (const store::Run& r : runs) {
    if (!Has(target_scales, r.spec.scale)) continue;
    const std::set<int64_t>& b = budgets[{r.spec.arch, r.spec.scale}];
    const int above = static_cast<int>(
        std::distance(b.upper_bound(r.spec.budget_tokens), b.end()));
    if (above >= largest) continue;
    input.archs[r.spec.arch].targets.push_back(
        {static_cast<double>(r.spec.n_params),
         static_cast<double>(r.spec.budget_tokens)});
  }
  for (auto& [arch, a] : input.archs) {
    a.n_levels = static_cast<int>(levels[arch].size());
    a.law = LawOf(laws, arch, law_target);
  }
  std::map<std::string, const store::Task*> task_by_id;
  for (const store::Task& t : tasks) task_by_id[t.spec.id] = &t;
  for (const store::Task& t : tasks) {
    if (t.state != store::TaskState::kPending || t.spec.on_demand ||
        (t.spec.kind != store::TaskKind::kTrain &&
         t.spec.kind != store::TaskKind::kDecay)) {
      continue;
    }
    auto run = by_id.find(t.spec.run_id);
    if (run == by_id.end()) continue;
    OrderCandidate c;
    c.task_id = t.spec.id;
    c.run_id = t.spec.run_id;
    c.arch = run->second->spec.arch;
    c.scale = run->second->spec.scale;
    c.n = static_cast<double>(run->second->spec.n_params);
    c.d = static_cast<double>(run->second->spec.budget_tokens);
    c.flops = t.spec.cost_flops;
    c.fit_scale = fitted(c.scale);
    // Its pending trunk tasks in training order: a DECAY depends on every
    // segment of its trunk up to its branch point.
    std::vector<std::pair<int64_t, std::string>> trunks;
    for (const std::string& dep : t.spec.depends_on) {
      auto u = task_by_id.find(dep);
      if (u == task_by_id.end() ||
          u->second->spec.kind != store::TaskKind::kTrunk ||
          u->second->state != store::TaskState::kPending) {
        continue;
      }
      trunks.push_back({StartStep(*u->second), dep});
      input.trunk_flops[dep] = u->second->spec.cost_flops;
    }
    std::sort(trunks.begin(), trunks.end());
    for (const auto& [start, id] : trunks) c.trunk_tasks.push_back(id);
    input.candidates.push_back(std::move(c));
  }
  const std::vector<store::TaskOrder> order = RankAdaptive(input);
  HLAB_ASSIGN_OR_RETURN(int set, context.store->SetTaskOrder(sweep_id, order));
  if (!order.empty()) {
    HLAB_LOG(INFO) << "sweep " << sweep_id << ": adaptive order of "
                   << input.candidates.size() << " runs ("
                   << (newest ? absl::StrFormat("generation %d",
                                                newest->generation)
                              : std::string("no law yet"))
                   << "), next " << order.front().task_id << ": "
                   << order.front().reason;
  }
  return set;
}

}  // namespace hlab::coordinator
