// Replay (analysis/replay.h): the cost of each run under trunk sharing, the
// policies' orders, the figures of the last step against an independent
// full-grid fit, the fraction at which a policy reaches the target, and bad
// input.
#include "analysis/replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "analysis/run_selection.h"
#include "analysis/verify.h"
#include "tests/analysis/synthetic.h"

namespace hlab::analysis {
namespace {

using testing::kTrueLaw;
using testing::SyntheticRng;

constexpr double kNs[] = {1e7, 3e7, 1e8, 3e8};  // the last is the target
constexpr double kDs[] = {2e8, 1e9, 5e9};

// Two architectures (the second's law a little worse) x 4 scales x 3
// budgets; one trunk per (architecture, scale) branching at 80% of D, 6 N D
// FLOPs per run; the largest scale is the target region.
std::vector<ReplayRun> Pool(double noise) {
  SyntheticRng rng(11);
  std::vector<ReplayRun> runs;
  int64_t rank = 0;
  for (const char* arch : {"full", "swa"}) {
    PowerLaw law = kTrueLaw;
    if (std::string(arch) == "swa") law.E *= 1.02;
    for (double n : kNs) {
      for (double d : kDs) {
        ReplayRun r;
        r.arch = arch;
        r.run_id = absl::StrCat(arch, "-", n, "-", d);
        r.n = n;
        r.d = d;
        r.value = law.Predict(n, d) * std::exp(noise * rng.Normal());
        r.target = n == kNs[3];
        r.trunk = absl::StrCat(arch, "@", n);
        r.trunk_flops = 6 * n * 0.8 * d;
        r.own_flops = 6 * n * 0.2 * d;
        r.default_rank = rank++;
        runs.push_back(r);
      }
    }
  }
  return runs;
}

// 32 starts instead of the replay's 675: every fit of these tests, the
// replay's and the independent ones, uses it (the laws here are smooth).
StartGrid TestGrid() {
  StartGrid g;
  g.alpha = {0.3, 0.7};
  g.beta = {0.3, 0.7};
  g.e = {-1, 0.5};
  g.a = {5, 15};
  g.b = {5, 15};
  return g;
}

ReplayOptions Quick() {
  ReplayOptions options;
  options.grid = TestGrid();
  return options;
}

double GridFlops(const std::vector<ReplayRun>& runs) {
  double total = 0;
  for (const ReplayRun& r : runs) {
    if (r.target) continue;
    total += r.own_flops;
    if (r.d == kDs[2]) total += r.trunk_flops;  // each trunk's longest
  }
  return total;
}

TEST(ReplayTest, DefaultFollowsTheRankAndChargesTrunksOnce) {
  const std::vector<ReplayRun> runs = Pool(0.005);
  ReplayOptions options = Quick();
  options.trunk_cost = TrunkCost::kExtend;
  absl::StatusOr<ReplayResult> r = Replay(runs, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->candidates, 18);
  EXPECT_EQ(r->targets, 6);
  EXPECT_DOUBLE_EQ(r->grid_flops, GridFlops(runs));
  ASSERT_EQ(r->steps.size(), 18u);
  std::vector<std::string> expected;
  for (const ReplayRun& x : runs) {
    if (!x.target) expected.push_back(x.run_id);
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(r->steps[i].run_id, expected[i]) << "step " << i;
  }
  // Budgets ascending within a trunk: each run extends the trunk from the
  // previous branch point, so its cost is 6 N (0.8 d - 0.8 d_prev + 0.2 d).
  const ReplayStep& second = r->steps[1];
  EXPECT_DOUBLE_EQ(second.cost,
                   6 * kNs[0] * (0.8 * (kDs[1] - kDs[0]) + 0.2 * kDs[1]));
  EXPECT_DOUBLE_EQ(r->steps.back().flops, r->grid_flops);
  EXPECT_DOUBLE_EQ(r->steps.back().fraction, 1.0);
}

TEST(ReplayTest, AWholeTrunkIsPaidByItsFirstRun) {
  const std::vector<ReplayRun> runs = Pool(0.005);
  absl::StatusOr<ReplayResult> r = Replay(runs, Quick());  // TrunkCost::kWhole
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->grid_flops, GridFlops(runs));
  // Budgets ascending: the smallest pays the trunk to the largest's branch
  // point, the others only their decays.
  EXPECT_DOUBLE_EQ(r->steps[0].cost,
                   6 * kNs[0] * (0.8 * kDs[2] + 0.2 * kDs[0]));
  EXPECT_DOUBLE_EQ(r->steps[1].cost, 6 * kNs[0] * 0.2 * kDs[1]);
  EXPECT_DOUBLE_EQ(r->steps.back().flops, r->grid_flops);
}

TEST(ReplayTest, ARunBehindItsTrunkCostsOnlyItsDecay) {
  std::vector<ReplayRun> runs = Pool(0.005);
  // Rank the largest budget of each trunk first.
  for (ReplayRun& r : runs) {
    if (r.d == kDs[2]) r.default_rank -= 1000;
  }
  ReplayOptions options = Quick();
  options.trunk_cost = TrunkCost::kExtend;
  absl::StatusOr<ReplayResult> r = Replay(runs, options);
  ASSERT_TRUE(r.ok());
  for (const ReplayStep& s : r->steps) {
    const auto it = std::find_if(runs.begin(), runs.end(), [&](const auto& x) {
      return x.run_id == s.run_id;
    });
    if (it->d != kDs[2]) {
      EXPECT_DOUBLE_EQ(s.cost, it->own_flops) << s.run_id;
    }
  }
  EXPECT_DOUBLE_EQ(r->grid_flops, GridFlops(runs));
}

TEST(ReplayTest, TheLastStepIsTheFullGridsFit) {
  const std::vector<ReplayRun> runs = Pool(0.01);
  ReplayOptions options = Quick();
  options.policy = ReplayPolicy::kRandom;
  options.seed = 3;
  absl::StatusOr<ReplayResult> r = Replay(runs, options);
  ASSERT_TRUE(r.ok());
  // Fit every candidate of each architecture independently, as the replay
  // says it does, and score the target runs.
  double r2_sum = 0;
  std::vector<double> errors;
  for (const char* arch : {"full", "swa"}) {
    std::vector<ScalingPoint> fit, truth;
    for (const ReplayRun& x : runs) {
      if (x.arch != arch) continue;
      (x.target ? truth : fit).push_back({x.n, x.d, x.value});
    }
    FitOptions fit_options;
    fit_options.grid = TestGrid();
    absl::StatusOr<FitResult> f = FitPowerLaw(fit, fit_options);
    ASSERT_TRUE(f.ok());
    r2_sum += RSquared(f->law, truth);
    for (const ScalingPoint& p : truth) {
      errors.push_back(std::abs(f->law.Predict(p.n, p.d) - p.loss) / p.loss);
    }
  }
  std::sort(errors.begin(), errors.end());
  ASSERT_TRUE(r->full_r2_target.has_value());
  // The replay adds the points in its own order, which changes the
  // objective's sums in the last bits.
  EXPECT_NEAR(*r->full_r2_target, r2_sum / 2, 1e-6);
  EXPECT_NEAR(*r->full_median_abs_error, (errors[2] + errors[3]) / 2, 1e-8);
  // Undefined until both architectures have 5 runs.
  EXPECT_FALSE(r->steps[0].r2_target.has_value());
}

TEST(ReplayTest, TheTargetFractionIsWhereTheFigureStaysWithinTolerance) {
  absl::StatusOr<ReplayResult> r = Replay(Pool(0.01), Quick());
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->flops_fraction_at_target.has_value());
  const double full = *r->full_r2_target;
  bool reached = false;
  for (const ReplayStep& s : r->steps) {
    if (s.fraction < *r->flops_fraction_at_target) {
      continue;
    }
    reached = true;
    ASSERT_TRUE(s.r2_target.has_value());
    EXPECT_GE(*s.r2_target, full - 0.02) << s.run_id;
  }
  EXPECT_TRUE(reached);
  // The step just before it (if any) was outside the tolerance.
  for (size_t i = 1; i < r->steps.size(); ++i) {
    if (r->steps[i].fraction == *r->flops_fraction_at_target) {
      const auto& before = r->steps[i - 1].r2_target;
      EXPECT_TRUE(!before || *before < full - 0.02);
    }
  }
}

TEST(ReplayTest, RandomOrdersAreSeededPermutations) {
  const std::vector<ReplayRun> runs = Pool(0.005);
  ReplayOptions a = Quick();
  a.policy = ReplayPolicy::kRandom;
  a.seed = 1;
  ReplayOptions b = a;
  b.seed = 2;
  absl::StatusOr<ReplayResult> r1 = Replay(runs, a), r1again = Replay(runs, a),
                               r2 = Replay(runs, b);
  ASSERT_TRUE(r1.ok() && r1again.ok() && r2.ok());
  std::vector<std::string> o1, o1again, o2;
  for (const auto& s : r1->steps) o1.push_back(s.run_id);
  for (const auto& s : r1again->steps) o1again.push_back(s.run_id);
  for (const auto& s : r2->steps) o2.push_back(s.run_id);
  EXPECT_EQ(o1, o1again);
  EXPECT_NE(o1, o2);
  EXPECT_EQ(std::set<std::string>(o1.begin(), o1.end()),
            std::set<std::string>(o2.begin(), o2.end()));
}

TEST(ReplayTest, AdaptiveSeedsEachLawWithCheapRunsThenFollowsTheGain) {
  const std::vector<ReplayRun> runs = Pool(0.005);
  ReplayOptions options = Quick();
  options.policy = ReplayPolicy::kAdaptive;
  absl::StatusOr<ReplayResult> r = Replay(runs, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->steps.size(), 18u);
  // The first ten runs make both laws identifiable: per architecture, all
  // three candidate scales and two budgets among its first five.
  for (const char* arch : {"full", "swa"}) {
    std::set<double> ns, ds;
    int seen = 0;
    for (size_t i = 0; i < 10; ++i) {
      if (r->steps[i].arch != arch) continue;
      ++seen;
      for (const ReplayRun& x : runs) {
        if (x.run_id == r->steps[i].run_id) {
          ns.insert(x.n);
          ds.insert(x.d);
        }
      }
    }
    EXPECT_EQ(seen, 5) << arch;
    EXPECT_EQ(ns.size(), 3u) << arch;
    EXPECT_GE(ds.size(), 2u) << arch;
  }
  // The next pick is the run with the largest variance reduction of its
  // architecture's target runs per FLOP, computed here from the two laws
  // refitted on the first ten runs.
  std::map<std::string, std::vector<ScalingPoint>> trained;
  std::set<std::string> taken, trunks;
  for (size_t i = 0; i < 10; ++i) {
    for (const ReplayRun& x : runs) {
      if (x.run_id != r->steps[i].run_id) continue;
      trained[x.arch].push_back({x.n, x.d, x.value});
      taken.insert(x.run_id);
      trunks.insert(x.trunk);
    }
  }
  std::string best;
  double best_score = -1;
  for (const ReplayRun& x : runs) {
    if (x.target || taken.count(x.run_id)) continue;
    FitOptions fit;
    fit.grid = TestGrid();
    absl::StatusOr<FitResult> f = FitPowerLaw(trained[x.arch], fit);
    ASSERT_TRUE(f.ok());
    std::vector<DesignPoint> measured, targets;
    for (const ScalingPoint& p : trained[x.arch])
      measured.push_back({p.n, p.d});
    for (const ReplayRun& t : runs) {
      if (t.target && t.arch == x.arch) targets.push_back({t.n, t.d});
    }
    absl::StatusOr<LinearisedLaw> lin = LinearisedLaw::Create(f->law, measured);
    ASSERT_TRUE(lin.ok());
    // kWhole: a trunk not yet started costs all of it (its longest run's
    // trunk_flops).
    double cost = x.own_flops;
    if (!trunks.count(x.trunk)) cost += 6 * x.n * 0.8 * kDs[2];
    const double score = lin->VarianceReduction({x.n, x.d}, targets) / cost;
    if (score > best_score) {
      best_score = score;
      best = x.run_id;
    }
  }
  EXPECT_EQ(r->steps[10].run_id, best);
}

TEST(ReplayTest, BadPoolsAreRefusedNamingTheRun) {
  std::vector<ReplayRun> runs = Pool(0.005);
  runs[3].value = -1;
  absl::StatusOr<ReplayResult> r = Replay(runs, Quick());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(runs[3].run_id), std::string::npos);
  EXPECT_NE(r.status().message().find("measured value"), std::string::npos);

  runs = Pool(0.005);
  runs[4].run_id = runs[3].run_id;
  EXPECT_NE(Replay(runs, Quick()).status().message().find("appears twice"),
            std::string::npos);

  runs = Pool(0.005);
  for (ReplayRun& x : runs) x.target = false;
  EXPECT_NE(Replay(runs, Quick()).status().message().find("no target runs"),
            std::string::npos);

  // An architecture with a target but only 3 candidates.
  runs = Pool(0.005);
  runs.erase(std::remove_if(runs.begin(), runs.end(),
                            [](const ReplayRun& x) {
                              return x.arch == "swa" && !x.target &&
                                     x.n != kNs[0];
                            }),
             runs.end());
  r = Replay(runs, Quick());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("architecture swa"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace hlab::analysis
