// The claims' computations (report/claims.h) on studies built in memory
// with known answers: each rule's reproduced, not-reproduced and
// inconclusive sides, and "not tested: needs ..." for sweeps whose
// architectures or evaluations cannot test a claim.
#include "report/claims.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hlab::report {
namespace {

// A succeeded run of `arch` at `scale` (N = n) with D = dn * n.
RunRow MakeRun(const std::string& arch, const std::string& scale, double n,
               double dn, double loss, std::optional<double> log_longppl = {}) {
  RunRow r;
  r.run_id = arch + "-" + scale + "-" + std::to_string(dn);
  r.arch = arch;
  r.scale = scale;
  r.state = "SUCCEEDED";
  r.n = n;
  r.d = dn * n;
  r.val_loss = loss;
  r.log_longppl = log_longppl;
  return r;
}

const ClaimResult& Claim(const std::vector<ClaimResult>& claims, int number) {
  return claims.at(number - 1);
}

TEST(ClaimsTest, LossLawsFitByTheirRSquared) {
  StudyData study;
  study.runs = {MakeRun("full", "S1", 1e4, 10, 2.0),
                MakeRun("gdn", "S1", 1e4, 10, 2.1)};
  FitRow good;
  good.arch = "full";
  good.target = "loss";
  good.r2_fit = 0.99;
  good.r2_verify = 0.95;
  FitRow bad = good;
  bad.arch = "gdn";
  bad.r2_verify = -1.2;
  study.fits = {good};
  EXPECT_EQ(Claim(EvaluateClaims(study), 1).verdict, Verdict::kReproduced);
  study.fits = {good, bad};
  const ClaimResult c = Claim(EvaluateClaims(study), 1);
  EXPECT_EQ(c.verdict, Verdict::kNotReproduced);
  EXPECT_NE(c.measured.find("gdn 0.990 / -1.200"), std::string::npos)
      << c.measured;
  good.r2_verify.reset();  // no held-out points
  study.fits = {good};
  EXPECT_EQ(Claim(EvaluateClaims(study), 1).verdict, Verdict::kInconclusive);
  study.fits = {};
  EXPECT_EQ(Claim(EvaluateClaims(study), 1).verdict, Verdict::kNotTested);
}

TEST(ClaimsTest, HybridsOverlapFullWithinTheBand) {
  StudyData study;
  for (const char* scale : {"S1", "S2", "S3"}) {
    for (double dn : {5.0, 20.0}) {
      study.runs.push_back(MakeRun("full", scale, 1e4, dn, 2.0));
      study.runs.push_back(MakeRun("swa-16", scale, 1e4, dn, 2.01));
      // GDN's N differs a little (appendix B): still matched cells.
      study.runs.push_back(MakeRun("gdn", scale, 1.0006e4, dn, 2.2));
    }
  }
  ClaimResult c = Claim(EvaluateClaims(study), 2);
  // swa-16 is 0.01 above full everywhere (inside +-0.05), gdn 0.2 (outside).
  EXPECT_EQ(c.verdict, Verdict::kNotReproduced);
  EXPECT_NE(c.measured.find("swa-16 - full: +0.010 [+0.010, +0.010] (6 cells)"),
            std::string::npos)
      << c.measured;
  EXPECT_NE(c.measured.find("gdn - full: +0.200"), std::string::npos);
  study.runs.erase(
      std::remove_if(study.runs.begin(), study.runs.end(),
                     [](const RunRow& r) { return r.arch == "gdn"; }),
      study.runs.end());
  EXPECT_EQ(Claim(EvaluateClaims(study), 2).verdict, Verdict::kReproduced);
  // Differences of -0.1 and +0.1 (mean 0, interval across the band's
  // edges): inconclusive.
  for (RunRow& r : study.runs) {
    if (r.arch == "swa-16") r.val_loss = r.scale == "S1" ? 1.9 : 2.1;
  }
  EXPECT_EQ(Claim(EvaluateClaims(study), 2).verdict, Verdict::kInconclusive);
}

// The same token budgets give an architecture whose N is 10% above full's
// (Mamba-2 at micro widths) D/N 9% below full's: no cell within 5%. Full's
// loss is interpolated in log D/N between its neighbouring budgets, never
// extrapolated below its lowest.
TEST(ClaimsTest, ALossComparisonInterpolatesFullAcrossADifferentN) {
  StudyData study;
  const auto loss = [](double offset, double dn) {
    return offset - 0.1 * std::log(dn);
  };
  for (double tokens : {1e5, 2e5, 4e5, 8e5}) {
    study.runs.push_back(
        MakeRun("full", "S1", 1e4, tokens / 1e4, loss(3.0, tokens / 1e4)));
    study.runs.push_back(MakeRun("mamba2", "S1", 1.1e4, tokens / 1.1e4,
                                 loss(3.02, tokens / 1.1e4)));
  }
  ClaimResult c = Claim(EvaluateClaims(study), 2);
  EXPECT_EQ(c.verdict, Verdict::kReproduced) << c.measured;
  EXPECT_EQ(c.measured,
            "mamba2 - full: +0.020 [+0.020, +0.020] (3 cells, 3 with full's "
            "loss interpolated)");
  EXPECT_NE(c.rule.find("interpolated linearly in log D/N"), std::string::npos);
  for (RunRow& r : study.runs) {
    if (r.arch == "mamba2") r.val_loss = loss(3.2, r.d / r.n);
  }
  c = Claim(EvaluateClaims(study), 2);
  EXPECT_EQ(c.verdict, Verdict::kNotReproduced) << c.measured;
  EXPECT_NE(c.measured.find("mamba2 - full: +0.200"), std::string::npos)
      << c.measured;
}

// Two seeds whose losses differ by 0.4: each run is compared with the
// other architecture's run of its own seed, never across seeds.
TEST(ClaimsTest, CellsAreMatchedWithinASeed) {
  StudyData study;
  for (int64_t seed : {0, 1}) {
    for (const char* scale : {"S1", "S2"}) {
      for (double dn : {5.0, 20.0}) {
        for (const char* arch : {"full", "swa-16"}) {
          RunRow r = MakeRun(arch, scale, 1e4, dn, seed == 0 ? 2.0 : 2.4,
                             seed == 0 ? 1.0 : 3.0);
          r.seed = seed;
          r.run_id += "-seed" + std::to_string(seed);
          study.runs.push_back(r);
        }
      }
    }
  }
  const std::vector<ClaimResult> claims = EvaluateClaims(study);
  EXPECT_EQ(Claim(claims, 2).verdict, Verdict::kReproduced);
  EXPECT_EQ(Claim(claims, 2).measured,
            "swa-16 - full: +0.000 [+0.000, +0.000] (8 cells)");
}

// Claim 3's cells at one scale: at D/N 5 swa-64 is worst (3.0 against 2.6
// and 2.5); at D/N 40 its gap to full is 0.1, down from 0.5.
void AddLargeWindowCells(const char* scale, StudyData* study) {
  study->runs.push_back(MakeRun("full", scale, 1e4, 5, 2.0, 2.5));
  study->runs.push_back(MakeRun("swa-16", scale, 1e4, 5, 2.0, 2.6));
  study->runs.push_back(MakeRun("swa-64", scale, 1e4, 5, 2.0, 3.0));
  study->runs.push_back(MakeRun("full", scale, 1e4, 40, 1.5, 1.0));
  study->runs.push_back(MakeRun("swa-16", scale, 1e4, 40, 1.5, 1.05));
  study->runs.push_back(MakeRun("swa-64", scale, 1e4, 40, 1.5, 1.1));
}

TEST(ClaimsTest, LargeWindowWorstAtLowBudgetAndConverging) {
  StudyData study;
  for (const char* scale : {"S1", "S2", "S3"}) {
    AddLargeWindowCells(scale, &study);
  }
  ClaimResult c = Claim(EvaluateClaims(study), 3);
  EXPECT_EQ(c.verdict, Verdict::kReproduced) << c.measured;
  EXPECT_NE(c.measured.find("swa-64: worst +0.400"), std::string::npos)
      << c.measured;
  EXPECT_NE(c.measured.find("shrink +0.400"), std::string::npos);
  // The gaps grow instead: not reproduced.
  for (RunRow& r : study.runs) {
    if (r.arch == "swa-64" && r.d / r.n > 10) r.log_longppl = 2.0;
  }
  EXPECT_EQ(Claim(EvaluateClaims(study), 3).verdict, Verdict::kNotReproduced);
  // One SWA window only: not tested, and the table says what it needs.
  study.runs.erase(
      std::remove_if(study.runs.begin(), study.runs.end(),
                     [](const RunRow& r) { return r.arch == "swa-16"; }),
      study.runs.end());
  c = Claim(EvaluateClaims(study), 3);
  EXPECT_EQ(c.verdict, Verdict::kNotTested);
  const Table t = ClaimsTable(EvaluateClaims(study));
  EXPECT_EQ(t.rows[2][1].exact,
            "not tested: needs full and two layer-wise SWA windows (swa-W), "
            "with LongPPL evaluated");
}

// An architecture whose N is 10% off (Mamba-2 at micro widths) has no run in
// the large window's lowest cell; its log(LongPPL) there is interpolated
// between its budgets around it, so it still counts among "the others".
TEST(ClaimsTest, LargeWindowWorstCountsAnArchitectureOfAnotherN) {
  StudyData study;
  for (const char* scale : {"S1", "S2", "S3"}) {
    AddLargeWindowCells(scale, &study);
    // The same token budgets at N 10% larger: D/N 4.5 and 36.4, around
    // swa-64's 5; in log D/N, 5 is 4.8% of the way: 3.5 - 0.048 * 2.5.
    study.runs.push_back(MakeRun("mamba2", scale, 1.1e4, 5 / 1.1, 2.0, 3.5));
    study.runs.push_back(MakeRun("mamba2", scale, 1.1e4, 40 / 1.1, 1.5, 1.0));
  }
  const ClaimResult c = Claim(EvaluateClaims(study), 3);
  const double t = std::log(1.1) / std::log(8.0);
  char worst[64];
  std::snprintf(worst, sizeof(worst), "swa-64: worst %+.3f",
                3.0 - (3.5 - t * 2.5));
  EXPECT_NE(c.measured.find(worst), std::string::npos) << c.measured;
  EXPECT_EQ(c.verdict, Verdict::kNotReproduced) << c.measured;
}

TEST(ClaimsTest, ReceptiveFieldRestrictionsCompared) {
  StudyData study;
  auto with_rf = [](RunRow r, double full, double efficient) {
    r.rf_full_delta_log_longppl = full;
    r.rf_efficient_delta_log_longppl = efficient;
    return r;
  };
  for (double dn : {5.0, 20.0, 40.0}) {
    study.runs.push_back(
        with_rf(MakeRun("swa-64", "S4", 1e5, dn, 1.2), 2.0, 0.3));
    // SWA(16) inside the restriction's windows: 0 up to float noise.
    study.runs.push_back(
        with_rf(MakeRun("swa-16", "S4", 1e5, dn, 1.2), 4.0, -1e-8));
  }
  ClaimResult c = Claim(EvaluateClaims(study), 8);
  EXPECT_EQ(c.verdict, Verdict::kReproduced) << c.measured;
  EXPECT_NE(c.measured.find("left out, not binding: swa-16"), std::string::npos)
      << c.measured;
  // A hybrid whose recurrent layers carry the long range: not reproduced.
  for (double dn : {5.0, 20.0, 40.0}) {
    study.runs.push_back(with_rf(MakeRun("gdn", "S4", 1e5, dn, 1.2), 0.6, 3.2));
  }
  c = Claim(EvaluateClaims(study), 8);
  EXPECT_EQ(c.verdict, Verdict::kNotReproduced);
  EXPECT_NE(c.measured.find("gdn: full +0.600, efficient +3.200"),
            std::string::npos)
      << c.measured;
}

TEST(ClaimsTest, NopeAndRatioVariantsAgainstTheirBase) {
  StudyData study;
  for (const char* scale : {"S1", "S2"}) {
    for (double dn : {5.0, 20.0}) {
      study.runs.push_back(MakeRun("swa-16", scale, 1e4, dn, 2.0, 2.0));
      study.runs.push_back(MakeRun("swa-16-nope", scale, 1e4, dn, 2.01, 1.7));
      study.runs.push_back(MakeRun("swa-16-1to3", scale, 1e4, dn, 2.02, 2.1));
    }
  }
  const std::vector<ClaimResult> claims = EvaluateClaims(study);
  EXPECT_EQ(Claim(claims, 4).verdict, Verdict::kReproduced);
  EXPECT_EQ(Claim(claims, 6).verdict, Verdict::kReproduced)
      << Claim(claims, 6).measured;
}

TEST(ClaimsTest, HeadwiseBehindEarlyAndNoBetter) {
  StudyData study;
  for (const char* scale : {"S1", "S2", "S3"}) {
    // Behind by 0.4 at D/N 5, level at D/N 40: reproduced.
    study.runs.push_back(MakeRun("swa-16", scale, 1e4, 5, 2.0, 2.0));
    study.runs.push_back(MakeRun("swa-16-headwise", scale, 1e4, 5, 2.0, 2.4));
    study.runs.push_back(MakeRun("swa-16", scale, 1e4, 40, 1.5, 1.0));
    study.runs.push_back(MakeRun("swa-16-headwise", scale, 1e4, 40, 1.5, 1.0));
  }
  ClaimResult c = Claim(EvaluateClaims(study), 5);
  EXPECT_EQ(c.verdict, Verdict::kReproduced) << c.measured;
  EXPECT_NE(c.measured.find("swa-16-headwise - swa-16: log(LongPPL) +0.200"),
            std::string::npos)
      << c.measured;
  EXPECT_NE(c.measured.find("at the lowest D/N +0.400"), std::string::npos)
      << c.measured;
  // Head-wise clearly better everywhere: not reproduced.
  for (RunRow& r : study.runs) {
    if (r.arch == "swa-16-headwise") r.log_longppl = *r.log_longppl - 0.6;
  }
  EXPECT_EQ(Claim(EvaluateClaims(study), 5).verdict, Verdict::kNotReproduced);
  // One budget per scale cannot show convergence: not tested.
  study.runs.erase(
      std::remove_if(study.runs.begin(), study.runs.end(),
                     [](const RunRow& r) { return r.d / r.n > 10; }),
      study.runs.end());
  c = Claim(EvaluateClaims(study), 5);
  EXPECT_EQ(c.verdict, Verdict::kNotTested);
  EXPECT_NE(c.needs.find("two or more budgets"), std::string::npos);
}

TEST(ClaimsTest, ShortConvAdvantageClosesWithBudget) {
  StudyData study;
  for (const char* scale : {"S1", "S2", "S3"}) {
    // gdn-conv ahead by 0.3 at D/N 5, by 0.02 at D/N 40.
    study.runs.push_back(MakeRun("gdn", scale, 1e4, 5, 2.0, 2.3));
    study.runs.push_back(MakeRun("gdn-conv", scale, 1e4, 5, 1.98, 2.0));
    study.runs.push_back(MakeRun("gdn", scale, 1e4, 40, 1.5, 1.02));
    study.runs.push_back(MakeRun("gdn-conv", scale, 1e4, 40, 1.48, 1.0));
  }
  ClaimResult c = Claim(EvaluateClaims(study), 7);
  EXPECT_EQ(c.verdict, Verdict::kReproduced) << c.measured;
  EXPECT_NE(c.measured.find("gdn-conv: advantage at the lowest D/N +0.300"),
            std::string::npos)
      << c.measured;
  EXPECT_NE(c.measured.find("closing by +0.280"), std::string::npos)
      << c.measured;
  // The advantage widens with budget: not reproduced.
  for (RunRow& r : study.runs) {
    if (r.arch == "gdn-conv" && r.d / r.n > 10) r.log_longppl = 0.2;
  }
  EXPECT_EQ(Claim(EvaluateClaims(study), 7).verdict, Verdict::kNotReproduced);
}

TEST(ClaimsTest, RetrievalHeadsOfTheLargeWindowBehind) {
  StudyData study;
  auto traced = [](RunRow r, double score) {
    r.retrieval_score = score;
    return r;
  };
  for (const char* scale : {"S3", "S4"}) {
    for (double dn : {5.0, 20.0, 40.0}) {
      // swa-16 forms at D/N 20; swa-64 never does (0.1 below at each).
      const double s16 = dn < 10 ? 0.3 : 0.6;
      study.runs.push_back(
          traced(MakeRun("swa-16", scale, 1e4, dn, 2.0, 2.0), s16));
      study.runs.push_back(
          traced(MakeRun("swa-64", scale, 1e4, dn, 2.0, 2.0), s16 - 0.15));
      study.runs.push_back(
          traced(MakeRun("swa-32", scale, 1e4, dn, 2.0, 2.0), s16 - 0.05));
    }
  }
  ClaimResult c = Claim(EvaluateClaims(study), 9);
  EXPECT_EQ(c.verdict, Verdict::kReproduced) << c.measured;
  EXPECT_NE(c.measured.find("swa-16 - swa-64: retrieval score +0.150"),
            std::string::npos)
      << c.measured;
  EXPECT_NE(c.measured.find("swa-16 (S3 20, S4 20), swa-64 (S3 -, S4 -)"),
            std::string::npos)
      << c.measured;
  // The large window's heads ahead instead: not reproduced.
  for (RunRow& r : study.runs) {
    if (r.arch == "swa-64") r.retrieval_score = *r.retrieval_score + 0.3;
  }
  EXPECT_EQ(Claim(EvaluateClaims(study), 9).verdict, Verdict::kNotReproduced);
  // Without traces of the large window: only one window left, not tested.
  for (RunRow& r : study.runs) {
    if (r.arch != "swa-16") r.retrieval_score.reset();
  }
  EXPECT_EQ(Claim(EvaluateClaims(study), 9).verdict, Verdict::kNotTested);
}

// A sweep of one architecture tests nothing but its own law, and every
// other claim says what it needs instead of a verdict.
TEST(ClaimsTest, AFullOnlySweepGetsNeedsNotVerdicts) {
  StudyData study;
  study.runs = {MakeRun("full", "S1", 1e4, 5, 2.0, 2.5),
                MakeRun("full", "S1", 1e4, 20, 1.8, 2.0)};
  const std::vector<ClaimResult> claims = EvaluateClaims(study);
  ASSERT_EQ(claims.size(), 9u);
  for (const ClaimResult& c : claims) {
    EXPECT_EQ(c.verdict, Verdict::kNotTested) << c.number;
    EXPECT_FALSE(c.needs.empty()) << c.number;
  }
  EXPECT_EQ(Claim(claims, 9).needs,
            "two layer-wise SWA windows (swa-W) with "
            "evaluation.retrieval_heads");
}

}  // namespace
}  // namespace hlab::report
