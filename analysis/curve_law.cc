#include "analysis/curve_law.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "analysis/profile.h"

namespace hlab::analysis {
namespace {

// One fitted point: ln S1, S2 and the loss, in curve order.
struct Row {
  double log_s1 = 0;
  double s2 = 0;
  double y = 0;
  int curve = 0;
};

// The least-squares solution for one alpha: (L0, A, C) >= 0, the free set
// it was solved on and (G_ff)^-1 on that set, for the interval.
struct LinearFit {
  std::array<double, 3> theta{0, 0, 0};
  std::array<bool, 3> free{false, false, false};
  std::array<std::array<double, 3>, 3> inverse{};  // on the free set
  double rss = std::numeric_limits<double>::infinity();
};

// Inverts the submatrix of `g` on the indices `idx` by Gauss-Jordan with
// partial pivoting into `out`; false when (near) singular.
bool Invert(const std::array<std::array<double, 3>, 3>& g,
            const std::vector<int>& idx,
            std::array<std::array<double, 3>, 3>* out) {
  const int k = static_cast<int>(idx.size());
  double a[3][6] = {};
  double scale = 0;
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) a[i][j] = g[idx[i]][idx[j]];
    a[i][k + i] = 1;
    scale = std::max(scale, std::abs(g[idx[i]][idx[i]]));
  }
  for (int col = 0; col < k; ++col) {
    int pivot = col;
    for (int r = col + 1; r < k; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (!(std::abs(a[pivot][col]) > 1e-13 * scale)) return false;
    for (int j = 0; j < 2 * k; ++j) std::swap(a[col][j], a[pivot][j]);
    const double p = a[col][col];
    for (int j = 0; j < 2 * k; ++j) a[col][j] /= p;
    for (int r = 0; r < k; ++r) {
      if (r == col) continue;
      const double f = a[r][col];
      for (int j = 0; j < 2 * k; ++j) a[r][j] -= f * a[col][j];
    }
  }
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) (*out)[i][j] = a[i][k + j];
  }
  return true;
}

// The design row of a point: [1, S1^-alpha, -S2] (the last only when C is
// fitted).
std::array<double, 3> DesignRow(double log_s1, double s2, double alpha) {
  return {1.0, std::exp(-alpha * log_s1), -s2};
}

// Least squares under theta >= 0 for fixed alpha: every free set of the
// `p` columns, the feasible solution of least RSS. `y` already has a fixed
// C's term added back.
// A Gaussian prior on C as a penalty weight * (C - center)^2 added to the
// RSS (weight 0: none).
struct Ridge {
  double weight = 0;
  double center = 0;
};

LinearFit SolveLinear(const std::vector<Row>& rows, double alpha, int p,
                      double c_fixed, Ridge ridge = {}) {
  std::array<std::array<double, 3>, 3> g{};
  std::array<double, 3> b{0, 0, 0};
  double yy = 0;
  for (const Row& r : rows) {
    const std::array<double, 3> x = DesignRow(r.log_s1, r.s2, alpha);
    const double y = r.y + c_fixed * r.s2;
    for (int i = 0; i < p; ++i) {
      b[i] += x[i] * y;
      for (int j = 0; j < p; ++j) g[i][j] += x[i] * x[j];
    }
    yy += y * y;
  }
  if (p == 3 && ridge.weight > 0) {
    g[2][2] += ridge.weight;
    b[2] += ridge.weight * ridge.center;
    yy += ridge.weight * ridge.center * ridge.center;
  }
  LinearFit best;
  best.rss = yy;  // the empty set
  for (int mask = 1; mask < (1 << p); ++mask) {
    std::vector<int> idx;
    for (int i = 0; i < p; ++i) {
      if (mask & (1 << i)) idx.push_back(i);
    }
    std::array<std::array<double, 3>, 3> inv{};
    if (!Invert(g, idx, &inv)) continue;
    std::array<double, 3> theta{0, 0, 0};
    bool feasible = true;
    for (size_t i = 0; i < idx.size(); ++i) {
      for (size_t j = 0; j < idx.size(); ++j) {
        theta[idx[i]] += inv[i][j] * b[idx[j]];
      }
      if (theta[idx[i]] < 0) feasible = false;
    }
    if (!feasible) continue;
    // RSS = yy - 2 theta'b + theta'G theta = yy - theta'b at the solution.
    double rss = yy;
    for (int i : idx) rss -= theta[i] * b[i];
    rss = std::max(rss, 0.0);
    if (rss < best.rss) {
      best.rss = rss;
      best.theta = theta;
      best.free = {false, false, false};
      for (int i : idx) best.free[i] = true;
      best.inverse = inv;
    }
  }
  return best;
}

absl::Status ValidateCurves(absl::Span<const TrainingCurve> curves,
                            const CurveLawOptions& o) {
  if (!(o.decay >= 0 && o.decay < 1)) {
    return absl::InvalidArgumentError("options.decay: must be in [0, 1)");
  }
  if (!(o.alpha_min > 0 && o.alpha_max > o.alpha_min &&
        std::isfinite(o.alpha_max))) {
    return absl::InvalidArgumentError(
        "options.alpha_min, alpha_max: need 0 < alpha_min < alpha_max");
  }
  if (o.alpha_grid < 3) {
    return absl::InvalidArgumentError("options.alpha_grid: must be >= 3");
  }
  if (!(o.confidence > 0 && o.confidence < 1)) {
    return absl::InvalidArgumentError("options.confidence: must be in (0, 1)");
  }
  if (o.c_prior && !(std::isfinite(*o.c_prior) && *o.c_prior >= 0)) {
    return absl::InvalidArgumentError("options.c_prior: must be finite, >= 0");
  }
  if (!(std::isfinite(o.c_prior_sd) && o.c_prior_sd >= 0)) {
    return absl::InvalidArgumentError("options.c_prior_sd: must be >= 0");
  }
  if (curves.empty()) return absl::InvalidArgumentError("curves: empty");
  for (size_t c = 0; c < curves.size(); ++c) {
    const TrainingCurve& curve = curves[c];
    const std::string where = absl::StrCat("curves[", c, "]");
    if (curve.lr.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".lr: empty (the planned schedule is needed)"));
    }
    for (size_t i = 0; i < curve.lr.size(); ++i) {
      if (!(std::isfinite(curve.lr[i]) && curve.lr[i] >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".lr[", i, "]: must be finite and >= 0, got ", curve.lr[i]));
      }
    }
    const int64_t total = static_cast<int64_t>(curve.lr.size());
    if (curve.warmup_steps < 0 || curve.warmup_steps > total) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".warmup_steps: must be in [0, ", total,
                       "], got ", curve.warmup_steps));
    }
    for (size_t i = 0; i < curve.points.size(); ++i) {
      const CurvePoint& p = curve.points[i];
      const std::string at = absl::StrCat(where, ".points[", i, "]");
      if (p.updates < 1 || p.updates > total) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ".updates: must be in [1, ", total, "], got ", p.updates));
      }
      if (!(std::isfinite(p.loss) && p.loss > 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".loss: must be finite and > 0, got ", p.loss));
      }
    }
  }
  return absl::OkStatus();
}

// Everything PredictCurveLoss needs from the fit: the rows, the areas of
// each curve, and the profile of RSS over alpha.
struct FitState {
  std::vector<ScheduleAreas> areas;
  std::vector<Row> rows;
  int p = 3;  // linear coefficients fitted: 3, or 2 with C fixed
  double c_fixed = 0;
  Ridge ridge;                 // C's prior while C is fitted
  std::vector<double> alphas;  // the grid and the refined optimum
  std::vector<LinearFit> fits;
  int best = 0;
  CurveLawFit result;
};

absl::StatusOr<FitState> Fit(absl::Span<const TrainingCurve> curves,
                             const CurveLawOptions& o) {
  if (absl::Status s = ValidateCurves(curves, o); !s.ok()) return s;
  FitState st;
  int annealed = 0;
  for (size_t c = 0; c < curves.size(); ++c) {
    st.areas.push_back(
        ComputeScheduleAreas(curves[c].lr, curves[c].warmup_steps, o.decay));
    std::vector<CurvePoint> points = curves[c].points;
    std::sort(points.begin(), points.end(),
              [](const CurvePoint& a, const CurvePoint& b) {
                return a.updates < b.updates;
              });
    for (const CurvePoint& p : points) {
      if (p.updates < o.min_updates) continue;
      const double s1 = st.areas[c].s1[p.updates];
      if (!(s1 > 0)) continue;  // no update with LR > 0 yet
      const double s2 = st.areas[c].s2[p.updates];
      if (s2 > 0) ++annealed;
      st.rows.push_back({std::log(s1), s2, p.loss, static_cast<int>(c)});
    }
  }
  const int n = static_cast<int>(st.rows.size());
  if (n < 5) {
    return absl::FailedPreconditionError(
        absl::StrCat("curves: ", n, " points with updates >= ", o.min_updates,
                     " and a positive forward area, at least 5 needed"));
  }
  // C is determined by the data only once the LR has dropped at a few
  // observed points.
  const bool c_from_data = annealed >= 3;
  st.p = c_from_data ? 3 : 2;
  st.c_fixed = c_from_data ? 0 : o.c_prior.value_or(0);
  auto search = [&]() {
    st.alphas.clear();
    st.fits.clear();
    const double lo = std::log(o.alpha_min), hi = std::log(o.alpha_max);
    for (int i = 0; i < o.alpha_grid; ++i) {
      const double alpha =
          std::exp(lo + (hi - lo) * i / static_cast<double>(o.alpha_grid - 1));
      st.alphas.push_back(alpha);
      st.fits.push_back(
          SolveLinear(st.rows, alpha, st.p, st.c_fixed, st.ridge));
    }
    int best = 0;
    for (int i = 1; i < o.alpha_grid; ++i) {
      if (st.fits[i].rss < st.fits[best].rss) best = i;
    }
    // Golden section on ln alpha between the best grid point's neighbours.
    double a = std::log(st.alphas[std::max(best - 1, 0)]);
    double b = std::log(st.alphas[std::min(best + 1, o.alpha_grid - 1)]);
    auto rss_at = [&](double log_alpha) {
      return SolveLinear(st.rows, std::exp(log_alpha), st.p, st.c_fixed,
                         st.ridge)
          .rss;
    };
    const double golden = (std::sqrt(5.0) - 1) / 2;
    double x1 = b - golden * (b - a), x2 = a + golden * (b - a);
    double f1 = rss_at(x1), f2 = rss_at(x2);
    for (int it = 0; it < 60 && b - a > 1e-10; ++it) {
      if (f1 < f2) {
        b = x2, x2 = x1, f2 = f1;
        x1 = b - golden * (b - a), f1 = rss_at(x1);
      } else {
        a = x1, x1 = x2, f1 = f2;
        x2 = a + golden * (b - a), f2 = rss_at(x2);
      }
    }
    const double refined = std::exp(f1 < f2 ? x1 : x2);
    LinearFit refined_fit =
        SolveLinear(st.rows, refined, st.p, st.c_fixed, st.ridge);
    if (refined_fit.rss <= st.fits[best].rss) {
      st.alphas.push_back(refined);
      st.fits.push_back(refined_fit);
      best = static_cast<int>(st.alphas.size()) - 1;
    }
    st.best = best;
  };
  search();
  // With a prior, C fitted to decays is pulled towards it with the weight
  // of a Gaussian prior: sigma^2 / sd^2 (sigma from the fit without it), so
  // a decay too short to show its drop above the noise does not set C.
  if (c_from_data && o.c_prior && o.c_prior_sd > 0) {
    const double sigma2 = st.fits[st.best].rss / std::max(1, n - (st.p + 1));
    st.ridge = {sigma2 / (o.c_prior_sd * o.c_prior_sd), *o.c_prior};
    search();
  }
  const int best = st.best;
  const LinearFit& f = st.fits[best];
  CurveLawFit& r = st.result;
  r.law = {f.theta[0], f.theta[1], st.alphas[best],
           c_from_data ? f.theta[2] : st.c_fixed, o.decay};
  r.n_points = n;
  r.rss = f.rss;
  r.c_from_data = c_from_data;
  r.alpha_on_edge = st.alphas[best] <= o.alpha_min * (1 + 1e-9) ||
                    st.alphas[best] >= o.alpha_max * (1 - 1e-9);
  // Residual autocorrelation within curves (points in update order).
  double num = 0, den = 0, prev = 0;
  for (int i = 0; i < n; ++i) {
    const Row& row = st.rows[i];
    const double res = row.y - r.law.Loss(std::exp(row.log_s1), row.s2);
    den += res * res;
    if (i > 0 && st.rows[i - 1].curve == row.curve) num += res * prev;
    prev = res;
  }
  const double rho = den > 0 ? std::clamp(num / den, 0.0, 0.99) : 0.0;
  r.lag1_autocorrelation = rho;
  r.effective_points =
      std::max(static_cast<double>(st.p + 2), n * (1 - rho) / (1 + rho));
  const int p_all = st.p + 1;  // with alpha
  r.sigma = std::sqrt(f.rss / std::max(1, n - p_all));
  return st;
}

}  // namespace

ScheduleAreas ComputeScheduleAreas(absl::Span<const double> lr,
                                   int64_t warmup_steps, double decay) {
  ScheduleAreas out;
  out.s1.assign(lr.size() + 1, 0.0);
  out.s2.assign(lr.size() + 1, 0.0);
  double momentum = 0;
  for (size_t i = 0; i < lr.size(); ++i) {
    if (static_cast<int64_t>(i) > warmup_steps && i > 0) {
      momentum = decay * momentum + (lr[i - 1] - lr[i]);
    }
    out.s1[i + 1] = out.s1[i] + lr[i];
    out.s2[i + 1] = out.s2[i] + momentum;
  }
  return out;
}

double CurveLaw::Loss(double s1, double s2) const {
  return l0 + a * std::pow(s1, -alpha) - c * s2;
}

absl::StatusOr<CurveLawFit> FitCurveLaw(absl::Span<const TrainingCurve> curves,
                                        const CurveLawOptions& options) {
  absl::StatusOr<FitState> st = Fit(curves, options);
  if (!st.ok()) return st.status();
  return st->result;
}

absl::StatusOr<CurvePrediction> PredictCurveLoss(
    absl::Span<const TrainingCurve> curves, int target, UpdateWindow window,
    const CurveLawOptions& options) {
  if (target < 0 || target >= static_cast<int>(curves.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("target: no curve ", target, " among ", curves.size()));
  }
  const int64_t total = static_cast<int64_t>(curves[target].lr.size());
  if (window.first < 1 || window.last < window.first || window.last > total) {
    return absl::InvalidArgumentError(
        absl::StrCat("window: need 1 <= first <= last <= ", total, ", got [",
                     window.first, ", ", window.last, "]"));
  }
  absl::StatusOr<FitState> fitted = Fit(curves, options);
  if (!fitted.ok()) return fitted.status();
  const FitState& st = *fitted;
  const ScheduleAreas& areas = st.areas[target];
  const double w = static_cast<double>(window.last - window.first + 1);
  // The window's mean design row and mean S2, for one alpha.
  auto mean_row = [&](double alpha) {
    std::array<double, 3> x{0, 0, 0};
    for (int64_t k = window.first; k <= window.last; ++k) {
      const std::array<double, 3> row =
          DesignRow(std::log(areas.s1[k]), areas.s2[k], alpha);
      for (int i = 0; i < 3; ++i) x[i] += row[i] / w;
    }
    return x;
  };
  double s2_mean = 0;
  for (int64_t k = window.first; k <= window.last; ++k) {
    s2_mean += areas.s2[k] / w;
  }
  if (!(areas.s1[window.first] > 0)) {
    return absl::InvalidArgumentError(
        "window: starts before the first update with a positive LR");
  }
  auto value_at = [&](const LinearFit& f, const std::array<double, 3>& x) {
    double g = -st.c_fixed * s2_mean;
    for (int i = 0; i < st.p; ++i) g += f.theta[i] * x[i];
    return g;
  };
  CurvePrediction out;
  out.fit = st.result;
  const LinearFit& best = st.fits[st.best];
  out.value = value_at(best, mean_row(st.alphas[st.best]));
  // Profile-likelihood set over alpha and the linear coefficients.
  const double nu = std::max(1.0, st.result.effective_points - (st.p + 1));
  const double t = StudentTQuantile(0.5 + options.confidence / 2,
                                    static_cast<int>(std::floor(nu)));
  const double threshold = best.rss * (1 + t * t / nu);
  double lower = out.value, upper = out.value;
  for (size_t j = 0; j < st.alphas.size(); ++j) {
    const LinearFit& f = st.fits[j];
    if (!(f.rss <= threshold)) continue;
    const std::array<double, 3> x = mean_row(st.alphas[j]);
    std::vector<int> idx;
    for (int i = 0; i < st.p; ++i) {
      if (f.free[i]) idx.push_back(i);
    }
    double q = 0;
    for (size_t a = 0; a < idx.size(); ++a) {
      for (size_t b = 0; b < idx.size(); ++b) {
        q += x[idx[a]] * f.inverse[a][b] * x[idx[b]];
      }
    }
    const double g = value_at(f, x);
    const double half = std::sqrt(std::max(0.0, (threshold - f.rss) * q));
    lower = std::min(lower, g - half);
    upper = std::max(upper, g + half);
  }
  // Widened in quadrature: the prior's spread of C, and the noise of the
  // measured window mean (correlated points average less noise away).
  const double rho = st.result.lag1_autocorrelation;
  const double mean_noise =
      st.result.sigma * std::min(1.0, std::sqrt((1 + rho) / ((1 - rho) * w)));
  double extra = t * mean_noise;
  if (!st.result.c_from_data) {
    const double z = StudentTQuantile(0.5 + options.confidence / 2, 1000);
    extra = std::hypot(extra, z * options.c_prior_sd * s2_mean);
  }
  out.lower = out.value - std::hypot(out.value - lower, extra);
  out.upper = out.value + std::hypot(upper - out.value, extra);
  return out;
}

}  // namespace hlab::analysis
