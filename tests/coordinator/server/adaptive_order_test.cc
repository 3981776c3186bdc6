// The adaptive order's ranking (coordinator/server/adaptive_order.h), on
// hand-made sweeps: the seeds before a law exists, the greedy variance
// reduction per FLOP once it does (checked against run_selection.h's
// criterion evaluated here), a shared trunk paid once and leased first,
// and the keys handed out from the sweep's own costs.
#include "coordinator/server/adaptive_order.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hlab::coordinator {
namespace {

constexpr double kN[] = {1e4, 2e4, 4e4, 8e4};  // S1..S4
constexpr double kD[] = {1e6, 2e6, 4e6};

std::string Scale(int s) { return absl::StrCat("S", s + 1); }
std::string Decay(int s, int b) {
  return absl::StrCat("decay-S", s + 1, "-", b);
}
std::string Trunk(int s) { return absl::StrCat("trunk-S", s + 1); }
// Segment b of scale s's trunk: from budget b - 1's branch point to b's.
std::string Segment(int s, int b) {
  return absl::StrCat("trunk-S", s + 1, "-segment", b);
}
double DecayFlops(int s, int b) { return 6 * kN[s] * 0.1 * kD[b]; }
double TrunkFlops(int s) { return 6 * kN[s] * 0.9 * kD[2]; }
double SegmentFlops(int s, int b) {
  return 6 * kN[s] * 0.9 * (kD[b] - (b > 0 ? kD[b - 1] : 0));
}

analysis::PowerLaw Law() {
  analysis::PowerLaw law;
  law.E = 1.7;
  law.A = 400;
  law.alpha = 0.34;
  law.B = 410;
  law.beta = 0.28;
  return law;
}

// One architecture, fit scales S1-S3, verify scale S4 (the target region
// at the largest budget); every (scale, budget) a DECAY candidate, its
// trunk pending unless the scale is in `trunks_done`; with `segmented`, the
// trunks are in segments (schedule_policy: adaptive's plan).
OrderInput Input(const std::vector<int>& trunks_done = {},
                 bool segmented = false) {
  OrderInput in;
  OrderArch& a = in.archs["full"];
  a.n_levels = 3;
  a.targets = {{kN[3], kD[2]}};
  for (int s = 0; s < 4; ++s) {
    const bool done = std::find(trunks_done.begin(), trunks_done.end(), s) !=
                      trunks_done.end();
    for (int b = 0; b < 3 && !done; ++b) {
      if (segmented) in.trunk_flops[Segment(s, b)] = SegmentFlops(s, b);
    }
    if (!done && !segmented) in.trunk_flops[Trunk(s)] = TrunkFlops(s);
    for (int b = 0; b < 3; ++b) {
      OrderCandidate c;
      c.task_id = Decay(s, b);
      c.run_id = absl::StrCat("run-", c.task_id);
      c.arch = "full";
      c.scale = Scale(s);
      c.n = kN[s];
      c.d = kD[b];
      c.flops = DecayFlops(s, b);
      if (!done && !segmented) c.trunk_tasks = {Trunk(s)};
      for (int k = 0; k <= b && !done && segmented; ++k) {
        c.trunk_tasks.push_back(Segment(s, k));
      }
      c.fit_scale = s < 3;
      in.candidates.push_back(c);
    }
  }
  return in;
}

// Removes the candidates at (s, b) and records them as measured.
void Measure(OrderInput* in, const std::vector<std::pair<int, int>>& cells) {
  for (const auto& [s, b] : cells) {
    const std::string id = Decay(s, b);
    in->candidates.erase(
        std::remove_if(
            in->candidates.begin(), in->candidates.end(),
            [&](const OrderCandidate& c) { return c.task_id == id; }),
        in->candidates.end());
    in->archs["full"].measured.push_back({kN[s], kD[b]});
  }
}

std::vector<std::string> Ids(const std::vector<store::TaskOrder>& order) {
  std::vector<std::string> ids;
  for (const store::TaskOrder& o : order) ids.push_back(o.task_id);
  return ids;
}

// Every task once, keys strictly ascending: the tasks' own costs sorted.
void ExpectKeysAreTheSweepsCosts(const OrderInput& in,
                                 const std::vector<store::TaskOrder>& order) {
  std::map<std::string, double> flops(in.trunk_flops.begin(),
                                      in.trunk_flops.end());
  for (const OrderCandidate& c : in.candidates) flops[c.task_id] = c.flops;
  std::vector<double> costs;
  std::map<std::string, int> seen;
  for (const store::TaskOrder& o : order) {
    ++seen[o.task_id];
    ASSERT_TRUE(flops.count(o.task_id)) << o.task_id;
    costs.push_back(flops[o.task_id]);
  }
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(order.size(), flops.size());
  // The costs sorted; an equal cost moved up by an ulp or so, so that the
  // keys strictly increase.
  std::sort(costs.begin(), costs.end());
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_NEAR(order[i].key, costs[i], 1e-12 * costs[i]) << i;
    if (i > 0) {
      EXPECT_GT(order[i].key, order[i - 1].key) << i;
    }
  }
}

TEST(AdaptiveOrderTest, SeedsAddMissingScalesAndBudgetsCheapestFirst) {
  const OrderInput in = Input();
  const std::vector<store::TaskOrder> order = RankAdaptive(in);
  ExpectKeysAreTheSweepsCosts(in, order);
  // S1's cheapest run with its trunk (adds a scale), S1's next budget
  // (adds a budget, its trunk paid), then S2 and S3 (each adds a scale).
  const std::vector<std::string> ids = Ids(order);
  ASSERT_GE(ids.size(), 7u);
  EXPECT_EQ(
      std::vector<std::string>(ids.begin(), ids.begin() + 7),
      (std::vector<std::string>{Trunk(0), Decay(0, 0), Decay(0, 1), Trunk(1),
                                Decay(1, 0), Trunk(2), Decay(2, 0)}));
  EXPECT_EQ(order[0].rank, 1);  // a trunk takes its first decay's rank
  EXPECT_EQ(order[1].rank, 1);
  EXPECT_EQ(order[2].rank, 2);
  EXPECT_EQ(order[6].rank, 4);
  EXPECT_EQ(order[1].reason, "seed: adds scale S1 to full's law");
  EXPECT_EQ(order[2].reason, "seed: adds a budget to full's law");
  EXPECT_EQ(order[0].reason,
            "trunk of run run-decay-S1-0: seed: adds scale S1 to full's law");
  // The fifth point makes the law identifiable: the cheapest remaining.
  EXPECT_EQ(order[7].task_id, Decay(0, 2));
  EXPECT_EQ(order[7].reason, "seed: full's law needs 5 runs");
  for (const store::TaskOrder& o : order) EXPECT_FALSE(o.score) << o.task_id;
  // Without a law, the other fit runs wait; the verify scale comes last.
  EXPECT_TRUE(absl::StrContains(order[8].reason, "has no law to narrow yet"))
      << order[8].reason;
  const std::vector<std::string> tail(ids.end() - 4, ids.end());
  EXPECT_EQ(tail, (std::vector<std::string>{Trunk(3), Decay(3, 0), Decay(3, 1),
                                            Decay(3, 2)}));
  EXPECT_EQ(order.back().reason, "scale S4 is not fitted: after the fit runs");
}

// The greedy choice, recomputed here from run_selection.h: the candidate
// with the largest dU per PFLOP on the design so far.
struct Expected {
  std::string task_id;
  double score = 0;
};
Expected BestByHand(const OrderInput& in,
                    const std::vector<analysis::DesignPoint>& design,
                    const std::vector<std::string>& taken,
                    const std::vector<std::string>& paid) {
  absl::StatusOr<analysis::LinearisedLaw> lin =
      analysis::LinearisedLaw::Create(Law(), design);
  EXPECT_TRUE(lin.ok()) << lin.status();
  Expected best;
  best.score = -1;
  for (const OrderCandidate& c : in.candidates) {
    if (!c.fit_scale ||
        std::find(taken.begin(), taken.end(), c.task_id) != taken.end()) {
      continue;
    }
    double cost = c.flops;
    for (const std::string& trunk : c.trunk_tasks) {
      if (std::find(paid.begin(), paid.end(), trunk) == paid.end()) {
        cost += in.trunk_flops.at(trunk);
      }
    }
    const double score =
        lin->VarianceReduction({c.n, c.d}, in.archs.at("full").targets) /
        (cost / 1e15);
    if (score > best.score) best = {c.task_id, score};
  }
  return best;
}

TEST(AdaptiveOrderTest, ScoredRunsFollowTheVarianceReductionPerFlop) {
  OrderInput in = Input(/*trunks_done=*/{0, 1});
  Measure(&in, {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}});
  in.archs["full"].law = Law();
  // S3's first run is measured, yet its trunk is still pending here: the
  // planner's trunk would be done; this keeps one trunk to pay for.
  const std::vector<store::TaskOrder> order = RankAdaptive(in);
  ExpectKeysAreTheSweepsCosts(in, order);
  std::vector<analysis::DesignPoint> design = in.archs["full"].measured;
  std::vector<std::string> taken, paid;
  // The first three picks, each on the design with the ones before added.
  size_t at = 0;
  for (int pick = 0; pick < 3; ++pick) {
    const Expected want = BestByHand(in, design, taken, paid);
    if (order[at].task_id == Trunk(2)) ++at;  // the trunk comes first
    ASSERT_LT(at, order.size());
    EXPECT_EQ(order[at].task_id, want.task_id) << "pick " << pick;
    ASSERT_TRUE(order[at].score.has_value());
    EXPECT_NEAR(*order[at].score, want.score, 1e-9 * want.score);
    EXPECT_TRUE(absl::StartsWith(order[at].reason, "narrows full's target"))
        << order[at].reason;
    EXPECT_EQ(order[at].rank, pick + 1);
    for (const OrderCandidate& c : in.candidates) {
      if (c.task_id != want.task_id) continue;
      design.push_back({c.n, c.d});
      paid.insert(paid.end(), c.trunk_tasks.begin(), c.trunk_tasks.end());
    }
    taken.push_back(want.task_id);
    ++at;
  }
  // The verify scale's runs narrow nothing (never fitted): last.
  EXPECT_EQ(order.back().task_id, Decay(3, 2));
  EXPECT_FALSE(order.back().score);
}

TEST(AdaptiveOrderTest, ATrunkIsPaidOnceJustBeforeItsFirstDecay) {
  OrderInput in = Input(/*trunks_done=*/{0, 1});
  Measure(&in, {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}});
  in.archs["full"].law = Law();
  const std::vector<store::TaskOrder> order = RankAdaptive(in);
  ExpectKeysAreTheSweepsCosts(in, order);
  const std::vector<std::string> ids = Ids(order);
  for (int s : {2, 3}) {
    auto trunk = std::find(ids.begin(), ids.end(), Trunk(s));
    ASSERT_NE(trunk, ids.end()) << Trunk(s);
    ASSERT_NE(trunk + 1, ids.end());
    // The next task is one of its decays, the first of them in the order.
    EXPECT_TRUE(absl::StartsWith(*(trunk + 1), absl::StrCat("decay-S", s + 1)))
        << *(trunk + 1);
    for (auto it = ids.begin(); it != trunk; ++it) {
      EXPECT_FALSE(absl::StartsWith(*it, absl::StrCat("decay-S", s + 1)))
          << *it << " before its trunk";
    }
    const size_t i = static_cast<size_t>(trunk - ids.begin());
    EXPECT_EQ(order[i].rank, order[i + 1].rank);
    EXPECT_EQ(order[i].score, order[i + 1].score);
  }
  // Once S3's trunk is paid, its other decays cost their own FLOPs only.
  const size_t first = static_cast<size_t>(
      std::find(ids.begin(), ids.end(), Trunk(2)) - ids.begin());
  std::map<std::string, double> own;
  for (const OrderCandidate& c : in.candidates) own[c.task_id] = c.flops;
  int later = 0;
  for (size_t i = first + 2; i < ids.size(); ++i) {
    if (!absl::StartsWith(ids[i], "decay-S3")) continue;
    ++later;
    EXPECT_TRUE(absl::StrContains(
        order[i].reason, absl::StrFormat("for %.3g PFLOP", own[ids[i]] / 1e15)))
        << order[i].reason;
  }
  EXPECT_EQ(later, 2);  // S3 has 3 pending decays: the first paid the trunk
}

// A trunk in segments is paid only up to the branch point of the run
// picked: each pick's cost counts its unpaid segments, which come just
// before it in chain order, and a later segment waits for a run that is
// worth it.
TEST(AdaptiveOrderTest, TrunkSegmentsArePaidUpToTheRunsBranchPoint) {
  OrderInput in = Input(/*trunks_done=*/{0, 1}, /*segmented=*/true);
  Measure(&in, {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}});
  in.archs["full"].law = Law();
  const std::vector<store::TaskOrder> order = RankAdaptive(in);
  ExpectKeysAreTheSweepsCosts(in, order);
  std::vector<analysis::DesignPoint> design = in.archs["full"].measured;
  std::vector<std::string> taken, paid;
  size_t at = 0;
  for (int pick = 0; pick < 3; ++pick) {
    const Expected want = BestByHand(in, design, taken, paid);
    const OrderCandidate* c = nullptr;
    for (const OrderCandidate& o : in.candidates) {
      if (o.task_id == want.task_id) c = &o;
    }
    ASSERT_NE(c, nullptr);
    // Its unpaid segments, in chain order, then the pick itself.
    for (const std::string& segment : c->trunk_tasks) {
      if (std::find(paid.begin(), paid.end(), segment) != paid.end()) {
        continue;
      }
      ASSERT_LT(at, order.size());
      EXPECT_EQ(order[at].task_id, segment) << "pick " << pick;
      EXPECT_EQ(order[at].rank, pick + 1);
      paid.push_back(segment);
      ++at;
    }
    ASSERT_LT(at, order.size());
    EXPECT_EQ(order[at].task_id, want.task_id) << "pick " << pick;
    ASSERT_TRUE(order[at].score.has_value());
    EXPECT_NEAR(*order[at].score, want.score, 1e-9 * want.score);
    design.push_back({c->n, c->d});
    taken.push_back(want.task_id);
    ++at;
  }
  // Every segment before each decay that needs it, in chain order.
  const std::vector<std::string> ids = Ids(order);
  auto position = [&](const std::string& id) {
    return std::find(ids.begin(), ids.end(), id) - ids.begin();
  };
  for (int s : {2, 3}) {
    for (int b = 0; b < 3; ++b) {
      if (b > 0) {
        EXPECT_LT(position(Segment(s, b - 1)), position(Segment(s, b)));
      }
      for (int k = b; k < 3; ++k) {
        if (s == 2 && k == 0) continue;  // measured
        EXPECT_LT(position(Segment(s, b)), position(Decay(s, k)))
            << Segment(s, b) << " after " << Decay(s, k);
      }
    }
  }
  // The verify scale's smallest decay pays its first segment only: its
  // later segments wait for its larger decays.
  EXPECT_EQ(position(Segment(3, 1)) + 1, position(Decay(3, 1)));
}

TEST(AdaptiveOrderTest, RunsOfAnArchitectureWithoutTargetsComeLast) {
  OrderInput in = Input();
  in.archs["full"].targets.clear();
  const std::vector<store::TaskOrder> order = RankAdaptive(in);
  ExpectKeysAreTheSweepsCosts(in, order);
  for (const store::TaskOrder& o : order) {
    EXPECT_FALSE(absl::StartsWith(o.reason, "seed")) << o.reason;
  }
  // Cheapest first: S1's trunk with its smallest decay.
  EXPECT_EQ(order[0].task_id, Trunk(0));
  EXPECT_EQ(order[1].task_id, Decay(0, 0));
  EXPECT_EQ(order[1].reason, "no target-region run of full");
}

TEST(AdaptiveOrderTest, NoCandidatesNoOrder) {
  OrderInput in;
  in.archs["full"].n_levels = 3;
  EXPECT_TRUE(RankAdaptive(in).empty());
}

}  // namespace
}  // namespace hlab::coordinator
