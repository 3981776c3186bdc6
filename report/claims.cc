#include "report/claims.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "model/config/architectures.h"
#include "report/plots.h"

namespace hlab::report {
namespace {

using Figure = std::function<std::optional<double>(const RunRow&)>;

std::optional<double> ValLoss(const RunRow& r) { return r.Target("loss"); }
std::optional<double> LogLongPpl(const RunRow& r) { return r.log_longppl; }
std::optional<double> RetrievalScore(const RunRow& r) {
  return r.retrieval_score;
}

struct Mean {
  double value = 0;
  double lower = 0, upper = 0;  // the bootstrap interval
  int n = 0;
};

// The mean of `x` with a percentile-bootstrap interval.
Mean BootstrapMean(const std::vector<double>& x, const ClaimOptions& o,
                   uint64_t salt) {
  Mean m;
  m.n = static_cast<int>(x.size());
  if (x.empty()) return m;
  double sum = 0;
  for (double v : x) sum += v;
  m.value = sum / x.size();
  std::mt19937_64 rng(o.seed ^ (salt * 0x9E3779B97F4A7C15ull));
  std::uniform_int_distribution<size_t> pick(0, x.size() - 1);
  std::vector<double> means;
  means.reserve(o.resamples);
  for (int b = 0; b < o.resamples; ++b) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += x[pick(rng)];
    means.push_back(s / x.size());
  }
  std::sort(means.begin(), means.end());
  const double tail = (1 - o.confidence) / 2;
  auto at = [&](double q) {
    const size_t i =
        std::min(means.size() - 1, static_cast<size_t>(q * (means.size() - 1)));
    return means[i];
  };
  m.lower = at(tail);
  m.upper = at(1 - tail);
  return m;
}

// "+0.010 [+0.002, +0.018] (6 cells)"; `about_cells` goes inside the
// parentheses (", 2 with full's loss interpolated").
std::string Show(const Mean& m, const std::string& about_cells = "") {
  return absl::StrFormat("%+.3f [%+.3f, %+.3f] (%d cells%s)", m.value, m.lower,
                         m.upper, m.n, about_cells);
}

// Succeeded runs of `arch` with `figure`, by scale.
std::map<std::string, std::vector<const RunRow*>> RunsOf(
    const StudyData& study, const std::string& arch, const Figure& figure) {
  std::map<std::string, std::vector<const RunRow*>> out;
  for (const RunRow& r : study.runs) {
    if (r.arch == arch && r.succeeded() && figure(r) && r.n > 0) {
      out[r.scale].push_back(&r);
    }
  }
  return out;
}

// A scale and a training seed: runs are compared within one group only
// (two architectures' runs of the same seed share the data order).
using Group = std::pair<std::string, int64_t>;

// Succeeded runs of `arch` with `figure`, by scale and seed.
std::map<Group, std::vector<const RunRow*>> GroupsOf(const StudyData& study,
                                                     const std::string& arch,
                                                     const Figure& figure) {
  std::map<Group, std::vector<const RunRow*>> out;
  for (const auto& [scale, list] : RunsOf(study, arch, figure)) {
    for (const RunRow* r : list) out[{scale, r->seed}].push_back(r);
  }
  return out;
}

// Two runs are one cell: the same scale, the same seed, and D/N within 5%
// (appendix-B matching moves N a little).
bool SameCell(const RunRow& x, const RunRow& y) {
  return x.scale == y.scale && x.seed == y.seed &&
         std::abs((x.d / x.n) / (y.d / y.n) - 1) <= 0.05;
}

// b's figure in x's cell: a run of b there, else (with `interpolate`) the
// straight line in log D/N between b's runs at the nearest D/N below and
// above x's at x's scale; never beyond b's own budgets. `interpolated` says
// which. Absolute token budgets give an architecture whose N differs by more
// than 5% (Mamba-2 at micro widths, 4-13% above full) no cell of full's.
std::optional<double> FigureInCell(const RunRow& x,
                                   const std::vector<const RunRow*>& b_runs,
                                   const Figure& figure, bool interpolate,
                                   bool* interpolated) {
  *interpolated = false;
  for (const RunRow* y : b_runs) {
    if (SameCell(x, *y)) return figure(*y);
  }
  if (!interpolate) return std::nullopt;
  const double dn = x.d / x.n;
  const RunRow *below = nullptr, *above = nullptr;
  for (const RunRow* y : b_runs) {
    const double v = y->d / y->n;
    if (v < dn && (below == nullptr || v > below->d / below->n)) below = y;
    if (v > dn && (above == nullptr || v < above->d / above->n)) above = y;
  }
  if (below == nullptr || above == nullptr) return std::nullopt;
  const double lo = std::log(below->d / below->n);
  const double hi = std::log(above->d / above->n);
  const double t = (std::log(dn) - lo) / (hi - lo);
  *interpolated = true;
  return *figure(*below) + t * (*figure(*above) - *figure(*below));
}

// A matched cell: x's D/N and figure(a) - figure(b) there.
struct Cell {
  double dn = 0;
  double diff = 0;
  bool interpolated = false;  // b's figure interpolated (FigureInCell)
};

// figure(a) - figure(b) in each cell where both ran (or, with
// `interpolate`, where b's budgets bracket a's run), by scale and seed, each
// group's cells in run order.
std::map<Group, std::vector<Cell>> MatchedCells(const StudyData& study,
                                                const std::string& a,
                                                const std::string& b,
                                                const Figure& figure,
                                                bool interpolate = false) {
  const auto runs_a = GroupsOf(study, a, figure);
  const auto runs_b = GroupsOf(study, b, figure);
  std::map<Group, std::vector<Cell>> out;
  for (const auto& [group, list] : runs_a) {
    auto it = runs_b.find(group);
    if (it == runs_b.end()) continue;
    for (const RunRow* x : list) {
      bool interpolated = false;
      const std::optional<double> fb =
          FigureInCell(*x, it->second, figure, interpolate, &interpolated);
      if (fb) {
        out[group].push_back({x->d / x->n, *figure(*x) - *fb, interpolated});
      }
    }
  }
  return out;
}

// figure(a) - figure(b) over matched cells; `interpolated` (if given)
// counts the cells where b's figure was interpolated.
std::vector<double> PairedDifferences(const StudyData& study,
                                      const std::string& a,
                                      const std::string& b,
                                      const Figure& figure,
                                      bool interpolate = false,
                                      int* interpolated = nullptr) {
  std::vector<double> out;
  if (interpolated != nullptr) *interpolated = 0;
  for (const auto& [group, cells] :
       MatchedCells(study, a, b, figure, interpolate)) {
    for (const Cell& cell : cells) {
      out.push_back(cell.diff);
      if (interpolated != nullptr && cell.interpolated) ++*interpolated;
    }
  }
  return out;
}

// figure(a) - figure(b) at each group's lowest and highest matched D/N:
// one {low, high} per scale and seed with two or more matched cells.
std::vector<std::pair<double, double>> EndDifferences(const StudyData& study,
                                                      const std::string& a,
                                                      const std::string& b,
                                                      const Figure& figure) {
  std::vector<std::pair<double, double>> out;
  for (auto& [group, cells] : MatchedCells(study, a, b, figure)) {
    if (cells.size() < 2) continue;
    std::sort(cells.begin(), cells.end(),
              [](const Cell& x, const Cell& y) { return x.dn < y.dn; });
    out.push_back({cells.front().diff, cells.back().diff});
  }
  return out;
}

bool Has(const StudyData& study, const std::string& arch) {
  const std::vector<std::string> archs = study.Architectures();
  return std::find(archs.begin(), archs.end(), arch) != archs.end();
}

// A layer-wise SWA hybrid's window: the architecture (a name or a pattern)
// expands to SWA(w) and full attention 1:1 with RoPE, else nullopt.
std::optional<int64_t> SwaWindow(const std::string& arch) {
  const auto layers = model::ExpandArchitecture(arch, 2);
  if (!layers.ok() || (*layers)[0].kind != model::MixerKind::kSlidingWindow ||
      (*layers)[1].kind != model::MixerKind::kFull || (*layers)[1].nope) {
    return std::nullopt;
  }
  return (*layers)[0].window;
}

Verdict Combine(const std::vector<Verdict>& parts) {
  if (parts.empty()) return Verdict::kNotTested;
  bool all = true;
  for (Verdict v : parts) {
    if (v == Verdict::kNotReproduced) return Verdict::kNotReproduced;
    all = all && v == Verdict::kReproduced;
  }
  return all ? Verdict::kReproduced : Verdict::kInconclusive;
}

// Inside the overlap band: reproduced; wholly outside: not; else open.
Verdict Overlap(const Mean& m, double band) {
  if (m.lower >= -band && m.upper <= band) return Verdict::kReproduced;
  if (m.lower > band || m.upper < -band) return Verdict::kNotReproduced;
  return Verdict::kInconclusive;
}

// Above zero: reproduced; below: not; else open.
Verdict Positive(const Mean& m) {
  if (m.lower > 0) return Verdict::kReproduced;
  if (m.upper < 0) return Verdict::kNotReproduced;
  return Verdict::kInconclusive;
}

// Below zero: reproduced; above: not; else open.
Verdict Negative(const Mean& m) {
  if (m.upper < 0) return Verdict::kReproduced;
  if (m.lower > 0) return Verdict::kNotReproduced;
  return Verdict::kInconclusive;
}

// "No better" than by the band: wholly below -band (better) not
// reproduced; above -band reproduced; else open.
Verdict NoBetter(const Mean& m, double band) {
  if (m.upper < -band) return Verdict::kNotReproduced;
  if (m.lower > -band) return Verdict::kReproduced;
  return Verdict::kInconclusive;
}

ClaimResult LossLawsFit(const StudyData& study) {
  ClaimResult c;
  c.number = 1;
  c.claim = "Loss laws fit every architecture";
  c.rule =
      "each architecture's loss law has R^2 fit >= 0.98 and, on the held-out "
      "scales, R^2 verify >= 0.9: reproduced when every fitted architecture's "
      "does, not reproduced when one falls below either, inconclusive "
      "without held-out points. R^2 of the one fitted law: no interval";
  std::vector<std::string> parts;
  std::vector<Verdict> verdicts;
  for (const std::string& arch : study.Architectures()) {
    const FitRow* f = study.FindFit(arch, "loss");
    if (f == nullptr || !f->r2_fit) continue;
    Verdict v = Verdict::kInconclusive;
    if (*f->r2_fit < 0.98 || (f->r2_verify && *f->r2_verify < 0.9)) {
      v = Verdict::kNotReproduced;
    } else if (f->r2_verify) {
      v = Verdict::kReproduced;
    }
    verdicts.push_back(v);
    parts.push_back(absl::StrFormat(
        "%s %.3f / %s", arch, *f->r2_fit,
        f->r2_verify ? absl::StrFormat("%.3f", *f->r2_verify) : "-"));
  }
  if (verdicts.empty()) {
    c.needs = "fitted loss laws (fit.targets: [loss], 3+ scales and budgets)";
    return c;
  }
  c.measured = "R^2 fit / verify: " + absl::StrJoin(parts, "; ");
  c.verdict = Combine(verdicts);
  return c;
}

// Claims of the form "architecture X's `figure` matches Y's".
ClaimResult MatchClaim(
    const StudyData& study, int number, const std::string& claim,
    const std::string& what,
    const std::vector<std::pair<std::string, std::string>>& pairs,
    const std::string& needs, const ClaimOptions& o) {
  ClaimResult c;
  c.number = number;
  c.claim = claim;
  c.rule = absl::StrFormat(
      "per pair, the mean %s difference over matched cells, with its %.0f%% "
      "bootstrap interval: inside +-%.2f nats reproduced, wholly outside not "
      "reproduced, else inconclusive; all pairs must agree. A cell is the "
      "same scale and D/N within 5%%; where the second architecture has no "
      "run in the first's cell (its N differs by more than 5%%), its loss is "
      "interpolated linearly in log D/N between its neighbouring budgets at "
      "that scale, never extrapolated",
      what, 100 * o.confidence, o.overlap_nats);
  std::vector<std::string> parts;
  std::vector<Verdict> verdicts;
  for (const auto& [a, b] : pairs) {
    int interpolated = 0;
    const std::vector<double> diff =
        PairedDifferences(study, a, b, ValLoss, true, &interpolated);
    if (diff.empty()) continue;
    const Mean m = BootstrapMean(diff, o, number * 131 + parts.size());
    verdicts.push_back(Overlap(m, o.overlap_nats));
    const std::string about = interpolated > 0
                                  ? absl::StrCat(", ", interpolated, " with ",
                                                 b, "'s loss interpolated")
                                  : "";
    parts.push_back(absl::StrCat(a, " - ", b, ": ", Show(m, about)));
  }
  if (verdicts.empty()) {
    c.needs = needs;
    return c;
  }
  c.measured = absl::StrJoin(parts, "; ");
  c.verdict = Combine(verdicts);
  return c;
}

ClaimResult HybridsOverlapFull(const StudyData& study, const ClaimOptions& o) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (Has(study, "full")) {
    for (const std::string& arch : study.Architectures()) {
      if (arch != "full") pairs.push_back({arch, "full"});
    }
  }
  return MatchClaim(study, 2, "Hybrids' validation loss overlaps Full's",
                    "validation-loss", pairs,
                    "full and at least one hybrid, trained at the same scales "
                    "and budgets, with validation loss",
                    o);
}

ClaimResult LargeWindowWorst(const StudyData& study, const ClaimOptions& o) {
  ClaimResult c;
  c.number = 3;
  c.claim =
      "Large-window SWA has the worst log(LongPPL) at low D/N, and the gaps "
      "shrink as D/N grows";
  c.rule =
      "per scale, at its lowest and highest D/N: worst = large-window SWA's "
      "log(LongPPL) minus the highest of the other architectures' at the "
      "lowest D/N; shrink = its gap to full at the lowest D/N minus the gap "
      "at the highest. An architecture with no run at that D/N (its N "
      "differs by more than 5%) counts with its log(LongPPL) interpolated "
      "linearly in log D/N between its neighbouring budgets, never "
      "extrapolated. Means over scales with bootstrap intervals: both above "
      "0 reproduced, either below 0 not reproduced, else inconclusive";
  std::optional<std::string> large;
  std::optional<int64_t> large_window;
  int swa_count = 0;
  for (const std::string& arch : study.Architectures()) {
    const std::optional<int64_t> w = SwaWindow(arch);
    if (!w) continue;
    ++swa_count;
    if (!large || *w > *large_window) {
      large = arch;
      large_window = w;
    }
  }
  if (swa_count < 2 || !Has(study, "full")) {
    c.needs =
        "full and two layer-wise SWA windows (swa-W), with LongPPL evaluated";
    return c;
  }
  const auto large_runs = GroupsOf(study, *large, LogLongPpl);
  std::map<std::string, std::map<Group, std::vector<const RunRow*>>> others;
  for (const std::string& arch : study.Architectures()) {
    if (arch != *large) others[arch] = GroupsOf(study, arch, LogLongPpl);
  }
  std::vector<double> worst, shrink;
  for (const auto& [group, list] : large_runs) {
    if (list.size() < 2) continue;
    const Group scale_seed = group;  // a lambda cannot capture a binding
    auto by_dn = [](const RunRow* x, const RunRow* y) {
      return x->d / x->n < y->d / y->n;
    };
    const RunRow* low = *std::min_element(list.begin(), list.end(), by_dn);
    const RunRow* high = *std::max_element(list.begin(), list.end(), by_dn);
    // Another architecture's figure in `like`'s cell: its run there, else
    // interpolated between its neighbouring budgets (FigureInCell), so an
    // architecture whose N is further off (Mamba-2 at micro widths) is not
    // left out silently.
    auto at = [&](const std::string& arch,
                  const RunRow* like) -> std::optional<double> {
      auto of_arch = others.find(arch);
      if (of_arch == others.end()) return std::nullopt;
      auto it = of_arch->second.find(scale_seed);
      if (it == of_arch->second.end()) return std::nullopt;
      bool interpolated = false;
      return FigureInCell(*like, it->second, LogLongPpl, /*interpolate=*/true,
                          &interpolated);
    };
    std::optional<double> highest_other;
    for (const std::string& arch : study.Architectures()) {
      if (arch == *large) continue;
      const std::optional<double> v = at(arch, low);
      if (v && (!highest_other || *v > *highest_other)) highest_other = v;
    }
    const std::optional<double> full_low = at("full", low);
    const std::optional<double> full_high = at("full", high);
    if (!highest_other || !full_low || !full_high) continue;
    worst.push_back(*low->log_longppl - *highest_other);
    shrink.push_back((*low->log_longppl - *full_low) -
                     (*high->log_longppl - *full_high));
  }
  if (worst.empty()) {
    c.needs =
        absl::StrCat("log(LongPPL) for ", *large,
                     " and full at two or more budgets of the same scale");
    return c;
  }
  const Mean w = BootstrapMean(worst, o, 301);
  const Mean s = BootstrapMean(shrink, o, 302);
  c.measured = absl::StrCat(*large, ": worst ", Show(w), "; shrink ", Show(s));
  c.verdict = Combine({Positive(w), Positive(s)});
  return c;
}

ClaimResult NopeLowersLongPpl(const StudyData& study, const ClaimOptions& o) {
  ClaimResult c;
  c.number = 6;
  c.claim =
      "NoPE on the full layers of the small-window hybrid lowers "
      "log(LongPPL) with |delta loss| small";
  c.rule = absl::StrFormat(
      "per swa-W-nope and its swa-W: the mean log(LongPPL) difference "
      "(NoPE minus RoPE) over matched cells below 0 and the mean loss "
      "difference inside +-%.2f nats, by %.0f%% bootstrap intervals: both "
      "hold reproduced, either fails wholly not reproduced, else "
      "inconclusive",
      o.overlap_nats, 100 * o.confidence);
  std::vector<std::string> parts;
  std::vector<Verdict> verdicts;
  for (const std::string& arch : study.Architectures()) {
    if (!absl::EndsWith(arch, "-nope")) continue;
    const std::string base = arch.substr(0, arch.size() - 5);
    if (!Has(study, base)) continue;
    const std::vector<double> dl =
        PairedDifferences(study, arch, base, LogLongPpl);
    const std::vector<double> dv =
        PairedDifferences(study, arch, base, ValLoss);
    if (dl.empty() || dv.empty()) continue;
    const Mean ml = BootstrapMean(dl, o, 601 + parts.size());
    const Mean mv = BootstrapMean(dv, o, 701 + parts.size());
    verdicts.push_back(Combine({Negative(ml), Overlap(mv, o.overlap_nats)}));
    parts.push_back(absl::StrCat(arch, " - ", base, ": log(LongPPL) ", Show(ml),
                                 ", loss ", Show(mv)));
  }
  if (verdicts.empty()) {
    c.needs =
        "a NoPE variant (swa-W-nope) beside its swa-W, with LongPPL evaluated";
    return c;
  }
  c.measured = absl::StrJoin(parts, "; ");
  c.verdict = Combine(verdicts);
  return c;
}

// An efficient-layer change this small is float noise of an unchanged
// computation (SWA(w <= H + 1) under the restriction: 1e-8 seen).
constexpr double kNotBinding = 1e-6;

ClaimResult ReceptiveField(const StudyData& study, const ClaimOptions& o) {
  ClaimResult c;
  c.number = 8;
  c.claim =
      "Restricting full attention's receptive field raises log(LongPPL) far "
      "more than restricting the efficient layers";
  c.rule =
      "per hybrid architecture, over its runs with both restrictions: the "
      "mean of (full-restricted minus efficient-restricted) log(LongPPL) "
      "change with its bootstrap interval above 0 and the full change at "
      "least twice the efficient one on average: reproduced; interval below "
      "0: not reproduced; else inconclusive. An architecture whose efficient "
      "change is below 1e-6 in every run (layers inside the restriction's "
      "windows, e.g. SWA(w <= H + 1)) is left out: the restriction does not "
      "bind";
  std::map<std::string, std::vector<std::pair<double, double>>> by_arch;
  for (const RunRow& r : study.runs) {
    if (r.succeeded() && r.rf_full_delta_log_longppl &&
        r.rf_efficient_delta_log_longppl) {
      by_arch[r.arch].push_back(
          {*r.rf_full_delta_log_longppl, *r.rf_efficient_delta_log_longppl});
    }
  }
  std::vector<std::string> parts, skipped;
  std::vector<Verdict> verdicts;
  for (const auto& [arch, pairs] : by_arch) {
    std::vector<double> diff;
    double full = 0, efficient = 0;
    bool binds = false;
    for (const auto& [f, e] : pairs) {
      diff.push_back(f - e);
      full += f;
      efficient += e;
      binds = binds || std::abs(e) > kNotBinding;
    }
    if (!binds) {
      skipped.push_back(arch);
      continue;
    }
    full /= pairs.size();
    efficient /= pairs.size();
    const Mean m = BootstrapMean(diff, o, 801 + parts.size());
    Verdict v = Positive(m);
    if (v == Verdict::kReproduced && !(full >= 2 * efficient)) {
      v = Verdict::kInconclusive;
    }
    verdicts.push_back(v);
    parts.push_back(
        absl::StrFormat("%s: full %+.3f, efficient %+.3f, difference %s", arch,
                        full, efficient, Show(m)));
  }
  if (verdicts.empty()) {
    c.needs = "a hybrid with evaluation.receptive_field and LongPPL evaluated";
    return c;
  }
  c.measured = absl::StrJoin(parts, "; ");
  if (!skipped.empty()) {
    absl::StrAppend(&c.measured,
                    " (left out, not binding: ", absl::StrJoin(skipped, ", "),
                    ")");
  }
  c.verdict = Combine(verdicts);
  return c;
}

ClaimResult HeadwiseNoBetter(const StudyData& study, const ClaimOptions& o) {
  ClaimResult c;
  c.number = 5;
  c.claim =
      "Head-wise SWA is no better than layer-wise and converges more slowly "
      "on log(LongPPL)";
  c.rule = absl::StrFormat(
      "per swa-W-headwise and its layer-wise swa-W, log(LongPPL) head-wise "
      "minus layer-wise: no better = the mean over matched cells not below "
      "-%.2f nats; more slowly = the mean over scales of the difference at "
      "each scale's lowest D/N above 0 (head-wise behind early), by %.0f%% "
      "bootstrap intervals: both hold reproduced, either fails wholly not "
      "reproduced, else inconclusive",
      o.overlap_nats, 100 * o.confidence);
  std::vector<std::string> parts;
  std::vector<Verdict> verdicts;
  for (const std::string& arch : study.Architectures()) {
    if (!absl::EndsWith(arch, "-headwise")) continue;
    const std::string base = arch.substr(0, arch.size() - 9);
    if (!Has(study, base)) continue;
    const std::vector<double> all =
        PairedDifferences(study, arch, base, LogLongPpl);
    std::vector<double> low;
    for (const auto& [l, h] : EndDifferences(study, arch, base, LogLongPpl)) {
      low.push_back(l);
    }
    if (all.empty() || low.empty()) continue;
    const Mean ma = BootstrapMean(all, o, 501 + parts.size());
    const Mean ml = BootstrapMean(low, o, 511 + parts.size());
    verdicts.push_back(Combine({NoBetter(ma, o.overlap_nats), Positive(ml)}));
    parts.push_back(absl::StrCat(arch, " - ", base, ": log(LongPPL) ", Show(ma),
                                 "; at the lowest D/N ", Show(ml)));
  }
  if (verdicts.empty()) {
    c.needs =
        "swa-W-headwise beside its swa-W at two or more budgets of a scale, "
        "with LongPPL evaluated";
    return c;
  }
  c.measured = absl::StrJoin(parts, "; ");
  c.verdict = Combine(verdicts);
  return c;
}

ClaimResult ShortConvAdvantageCloses(const StudyData& study,
                                     const ClaimOptions& o) {
  ClaimResult c;
  c.number = 7;
  c.claim = "Short convolution's log(LongPPL) advantage closes with budget";
  c.rule = absl::StrFormat(
      "per X-conv (mamba2-conv, gdn-conv) and its X, the advantage = X's "
      "log(LongPPL) minus X-conv's, at each scale's lowest and highest "
      "matched D/N: an advantage at the lowest D/N (mean over scales above "
      "0) that closes (the lowest-D/N advantage minus the highest-D/N one "
      "above 0), by %.0f%% bootstrap intervals: both hold reproduced, either "
      "below 0 not reproduced, else inconclusive",
      100 * o.confidence);
  std::vector<std::string> parts;
  std::vector<Verdict> verdicts;
  for (const std::string& arch : study.Architectures()) {
    if (!absl::EndsWith(arch, "-conv")) continue;
    const std::string base = arch.substr(0, arch.size() - 5);
    if (!Has(study, base)) continue;
    std::vector<double> low, closes;
    for (const auto& [l, h] : EndDifferences(study, base, arch, LogLongPpl)) {
      low.push_back(l);
      closes.push_back(l - h);
    }
    if (low.empty()) continue;
    const Mean ml = BootstrapMean(low, o, 701 + parts.size());
    const Mean mc = BootstrapMean(closes, o, 711 + parts.size());
    verdicts.push_back(Combine({Positive(ml), Positive(mc)}));
    parts.push_back(absl::StrCat(arch, ": advantage at the lowest D/N ",
                                 Show(ml), ", closing by ", Show(mc)));
  }
  if (verdicts.empty()) {
    c.needs =
        "mamba2-conv or gdn-conv beside its mamba2 or gdn at two or more "
        "budgets of a scale, with LongPPL evaluated";
    return c;
  }
  c.measured = absl::StrJoin(parts, "; ");
  c.verdict = Combine(verdicts);
  return c;
}

ClaimResult RetrievalHeadsLater(const StudyData& study, const ClaimOptions& o) {
  ClaimResult c;
  c.number = 9;
  c.claim = "Retrieval heads form later with the larger window";
  c.rule = absl::StrFormat(
      "the smallest and the largest layer-wise SWA window (swa-W): the mean "
      "over matched cells of the top full-attention head's retrieval score, "
      "small window minus large (the small window's heads further along at "
      "the same budget), with its %.0f%% bootstrap interval: above 0 "
      "reproduced, below 0 not reproduced, else inconclusive. Shown beside "
      "it: each scale's formation D/N, the first budget whose score reaches "
      "%.1f",
      100 * o.confidence, kRetrievalFormation);
  std::optional<std::string> small, large;
  std::optional<int64_t> small_w, large_w;
  for (const std::string& arch : study.Architectures()) {
    const std::optional<int64_t> w = SwaWindow(arch);
    if (!w || RunsOf(study, arch, RetrievalScore).empty()) continue;
    if (!small || *w < *small_w) {
      small = arch;
      small_w = w;
    }
    if (!large || *w > *large_w) {
      large = arch;
      large_w = w;
    }
  }
  if (!small || *small_w == *large_w) {
    c.needs =
        "two layer-wise SWA windows (swa-W) with "
        "evaluation.retrieval_heads";
    return c;
  }
  const std::vector<double> diff =
      PairedDifferences(study, *small, *large, RetrievalScore);
  if (diff.empty()) {
    c.needs = absl::StrCat("retrieval_heads for ", *small, " and ", *large,
                           " at the same scales and budgets");
    return c;
  }
  // Formation D/N per scale: "-" where no budget reaches the threshold.
  auto formation = [&](const std::string& arch) {
    std::vector<std::string> out;
    for (auto& [scale, list] : RunsOf(study, arch, RetrievalScore)) {
      std::optional<double> first;
      for (const RunRow* r : list) {
        const double dn = r->d / r->n;
        if (*r->retrieval_score >= kRetrievalFormation &&
            (!first || dn < *first)) {
          first = dn;
        }
      }
      out.push_back(absl::StrCat(
          scale, " ", first ? absl::StrFormat("%.3g", *first) : "-"));
    }
    return absl::StrJoin(out, ", ");
  };
  const Mean m = BootstrapMean(diff, o, 901);
  c.measured =
      absl::StrCat(*small, " - ", *large, ": retrieval score ", Show(m),
                   "; formation D/N ", *small, " (", formation(*small), "), ",
                   *large, " (", formation(*large), ")");
  c.verdict = Positive(m);
  return c;
}

}  // namespace

std::string VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kReproduced:
      return "reproduced";
    case Verdict::kNotReproduced:
      return "not reproduced";
    case Verdict::kInconclusive:
      return "inconclusive";
    case Verdict::kNotTested:
      return "not tested";
  }
  return "not tested";
}

std::vector<ClaimResult> EvaluateClaims(const StudyData& study,
                                        const ClaimOptions& options) {
  std::vector<std::pair<std::string, std::string>> ratio_pairs;
  for (const std::string& arch : study.Architectures()) {
    if (absl::EndsWith(arch, "-1to3")) {
      const std::string base = arch.substr(0, arch.size() - 5);
      if (Has(study, base)) ratio_pairs.push_back({arch, base});
    }
  }
  return {
      LossLawsFit(study),
      HybridsOverlapFull(study, options),
      LargeWindowWorst(study, options),
      MatchClaim(study, 4, "1:3 matches 1:1 on loss", "validation-loss",
                 ratio_pairs, "a 1:3 hybrid (swa-W-1to3) beside its 1:1 swa-W",
                 options),
      HeadwiseNoBetter(study, options),
      NopeLowersLongPpl(study, options),
      ShortConvAdvantageCloses(study, options),
      ReceptiveField(study, options),
      RetrievalHeadsLater(study, options),
  };
}

Table ClaimsTable(const std::vector<ClaimResult>& claims) {
  Table t;
  t.columns = {"claim", "verdict", "hlab's figures", "rule"};
  for (const ClaimResult& c : claims) {
    const std::string claim = absl::StrCat(c.number, ". ", c.claim);
    const std::string verdict =
        c.verdict == Verdict::kNotTested
            ? absl::StrCat("not tested: needs ", c.needs)
            : VerdictName(c.verdict);
    t.rows.push_back({{claim, claim},
                      {verdict, verdict},
                      {c.measured, c.measured},
                      {c.rule, c.rule}});
  }
  return t;
}

}  // namespace hlab::report
