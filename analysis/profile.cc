#include "analysis/profile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include <Eigen/Dense>

#include "absl/strings/str_cat.h"
#include "analysis/internal/parallel.h"

namespace hlab::analysis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// How far ln(value) of E, A, B or a prediction is stepped from the estimate
// before a side counts as unbounded.
constexpr double kLogRange = 40;

// ln I_x(a, b)'s continued fraction (modified Lentz).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1) < 1e-15) break;
  }
  return h;
}

// The regularised incomplete beta function I_x(a, b).
double RegularizedBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
               a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) {
    return front * BetaContinuedFraction(a, b, x) / a;
  }
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

// P(T <= t) for Student's t with `dof` degrees of freedom.
double StudentTCdf(double t, int dof) {
  const double tail =
      0.5 * RegularizedBeta(0.5 * dof, 0.5, dof / (dof + t * t));
  return t >= 0 ? 1 - tail : tail;
}

// The points as the inner problem reads them.
struct Data {
  std::vector<double> log_n, log_d, inv_loss;
};

// What a profile point holds fixed.
struct Constraint {
  enum Kind { kNone, kE, kA, kB, kAlpha, kBeta, kPrediction };
  Kind kind = kNone;
  double value = 0;
  PredictionSite site;  // kPrediction only
};

struct Exponents {
  double alpha = 0;
  double beta = 0;
};

using Coefs = std::array<double, 3>;  // E, A, B
using SmallMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic,
                                  Eigen::ColMajor, 4, 4>;
using SmallVector =
    Eigen::Matrix<double, Eigen::Dynamic, 1, Eigen::ColMajor, 4, 1>;

// min sum_i (x_i' theta - 1)^2 over theta = (E, A, B) >= 0, where x_i =
// (1, N_i^-alpha, D_i^-beta) / L_i, subject to the constraint's linear
// equality (g' theta = h) when it has one. Returns the RSS (inf when no
// support is feasible) and writes theta.
double SolveLinear(const Data& data, const Exponents& x,
                   const Constraint& constraint, Coefs* theta) {
  const size_t n = data.log_n.size();
  double g[3][3] = {}, c[3] = {};
  for (size_t i = 0; i < n; ++i) {
    const double row[3] = {
        data.inv_loss[i], std::exp(-x.alpha * data.log_n[i]) * data.inv_loss[i],
        std::exp(-x.beta * data.log_d[i]) * data.inv_loss[i]};
    for (int j = 0; j < 3; ++j) {
      c[j] += row[j];
      for (int k = 0; k <= j; ++k) g[j][k] += row[j] * row[k];
    }
  }
  double s[3];
  for (int j = 0; j < 3; ++j) s[j] = std::sqrt(g[j][j]);

  bool has_equality = true;
  double eq[3] = {0, 0, 0};
  double h = constraint.value;
  switch (constraint.kind) {
    case Constraint::kE:
      eq[0] = 1;
      break;
    case Constraint::kA:
      eq[1] = 1;
      break;
    case Constraint::kB:
      eq[2] = 1;
      break;
    case Constraint::kPrediction:
      eq[0] = 1;
      eq[1] = std::exp(-x.alpha * std::log(constraint.site.n));
      eq[2] = std::exp(-x.beta * std::log(constraint.site.d));
      break;
    default:
      has_equality = false;
      h = 0;
  }

  auto rss_of = [&](const Coefs& t) {
    double total = 0;
    for (size_t i = 0; i < n; ++i) {
      const double fitted = t[0] + t[1] * std::exp(-x.alpha * data.log_n[i]) +
                            t[2] * std::exp(-x.beta * data.log_d[i]);
      const double r = fitted * data.inv_loss[i] - 1;
      total += r * r;
    }
    return total;
  };

  // Solves on one support (mask of free coefficients, the rest 0); false
  // when singular or infeasible.
  auto solve_support = [&](int mask, Coefs* out) {
    int idx[3], k = 0;
    for (int j = 0; j < 3; ++j) {
      if (mask & (1 << j)) idx[k++] = j;
    }
    bool eq_reaches = false;
    for (int i = 0; i < k; ++i) eq_reaches |= eq[idx[i]] != 0;
    if (has_equality && !eq_reaches) return false;
    const int m = k + (has_equality ? 1 : 0);
    if (m == 0) {
      *out = {0, 0, 0};
      return true;
    }
    // Scaled variables u_j = s_j theta_j: unit-diagonal Gram block.
    SmallMatrix kkt = SmallMatrix::Zero(m, m);
    SmallVector rhs = SmallVector::Zero(m);
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) {
        const int a = std::max(idx[i], idx[j]), b = std::min(idx[i], idx[j]);
        kkt(i, j) = g[a][b] / (s[idx[i]] * s[idx[j]]);
      }
      rhs(i) = c[idx[i]] / s[idx[i]];
      if (has_equality) {
        kkt(i, k) = kkt(k, i) = eq[idx[i]] / s[idx[i]];
      }
    }
    if (has_equality) rhs(k) = h;
    Eigen::FullPivLU<SmallMatrix> lu(kkt);
    lu.setThreshold(1e-13);
    if (!lu.isInvertible()) return false;
    const SmallVector u = lu.solve(rhs);
    Coefs t = {0, 0, 0};
    for (int i = 0; i < k; ++i) {
      if (!(u(i) >= -1e-12)) return false;
      t[idx[i]] = std::max(0.0, u(i)) / s[idx[i]];
    }
    *out = t;
    return true;
  };

  Coefs best{0, 0, 0};
  if (solve_support(7, &best)) {
    // The full support's solution is feasible: the convex problem's optimum.
    *theta = best;
    return rss_of(best);
  }
  double best_rss = kInf;
  for (int mask = 0; mask < 7; ++mask) {
    Coefs t;
    if (!solve_support(mask, &t)) continue;
    const double rss = rss_of(t);
    if (rss < best_rss) {
      best_rss = rss;
      best = t;
    }
  }
  *theta = best;
  return best_rss;
}

// Nelder-Mead over the free exponents ((alpha, beta), or the one not fixed),
// clamped to [lo, hi].
double NelderMead(const std::function<double(const Exponents&)>& f,
                  int free_dims, bool alpha_free, Exponents start, double step,
                  double lo, double hi, Exponents* argmin) {
  auto clamp = [&](double v) { return std::min(hi, std::max(lo, v)); };
  struct Vertex {
    double p[2];
    double f;
  };
  auto at = [&](const double p[2]) {
    Exponents e = start;
    if (free_dims == 2) {
      e.alpha = clamp(p[0]);
      e.beta = clamp(p[1]);
    } else if (alpha_free) {
      e.alpha = clamp(p[0]);
    } else {
      e.beta = clamp(p[0]);
    }
    return e;
  };
  auto make = [&](double p0, double p1) {
    Vertex v{{p0, p1}, 0};
    v.p[0] = clamp(v.p[0]);
    v.p[1] = clamp(v.p[1]);
    v.f = f(at(v.p));
    return v;
  };
  const double p0 = free_dims == 2 || alpha_free ? start.alpha : start.beta;
  const double p1 = free_dims == 2 ? start.beta : 0;
  std::array<Vertex, 3> s;
  const int nv = free_dims + 1;
  s[0] = make(p0, p1);
  s[1] = make(p0 + (p0 + step <= hi ? step : -step), p1);
  if (nv == 3) s[2] = make(p0, p1 + (p1 + step <= hi ? step : -step));
  auto by_f = [](const Vertex& a, const Vertex& b) { return a.f < b.f; };
  for (int it = 0; it < 400; ++it) {
    std::stable_sort(s.begin(), s.begin() + nv, by_f);
    double span = 0;
    for (int v = 1; v < nv; ++v) {
      for (int d = 0; d < free_dims; ++d) {
        span = std::max(span, std::abs(s[v].p[d] - s[0].p[d]));
      }
    }
    if (span < 1e-8) break;
    Vertex& worst = s[nv - 1];
    double centre[2] = {0, 0};
    for (int v = 0; v < nv - 1; ++v) {
      for (int d = 0; d < 2; ++d) centre[d] += s[v].p[d] / (nv - 1);
    }
    auto along = [&](double t) {
      return make(centre[0] + t * (worst.p[0] - centre[0]),
                  centre[1] + t * (worst.p[1] - centre[1]));
    };
    const Vertex reflected = along(-1);
    if (reflected.f < s[0].f) {
      const Vertex expanded = along(-2);
      worst = expanded.f < reflected.f ? expanded : reflected;
    } else if (reflected.f < s[nv - 2].f) {
      worst = reflected;
    } else {
      const Vertex contracted =
          reflected.f < worst.f ? along(-0.5) : along(0.5);
      if (contracted.f < std::min(worst.f, reflected.f)) {
        worst = contracted;
      } else {
        for (int v = 1; v < nv; ++v) {
          s[v] = make(s[0].p[0] + 0.5 * (s[v].p[0] - s[0].p[0]),
                      s[0].p[1] + 0.5 * (s[v].p[1] - s[0].p[1]));
        }
      }
    }
  }
  std::stable_sort(s.begin(), s.begin() + nv, by_f);
  *argmin = at(s[0].p);
  return s[0].f;
}

// The profile: min RSS over everything the constraint leaves free. `warm`
// (in: the previous profile point's exponents; out: this one's) seeds one
// refinement besides the grid's best point.
double Profile(const Data& data, const Constraint& constraint,
               const ProfileOptions& options, int grid_size, int starts,
               Exponents* warm, Coefs* theta) {
  const double lo = options.exponent_min, hi = options.exponent_max;
  const bool alpha_fixed = constraint.kind == Constraint::kAlpha;
  const bool beta_fixed = constraint.kind == Constraint::kBeta;
  const int free_dims = alpha_fixed || beta_fixed ? 1 : 2;
  auto rss = [&](const Exponents& x) {
    Coefs t;
    return SolveLinear(data, x, constraint, &t);
  };
  Exponents fixed = *warm;
  if (alpha_fixed) fixed.alpha = constraint.value;
  if (beta_fixed) fixed.beta = constraint.value;

  // The grid, best first.
  const int g = free_dims == 2 ? grid_size : 4 * grid_size;
  const double h = (hi - lo) / (g - 1);
  std::vector<std::pair<double, Exponents>> grid;
  for (int i = 0; i < g; ++i) {
    for (int j = 0; j < (free_dims == 2 ? g : 1); ++j) {
      Exponents x = fixed;
      if (free_dims == 2) {
        x.alpha = lo + i * h;
        x.beta = lo + j * h;
      } else if (alpha_fixed) {
        x.beta = lo + i * h;
      } else {
        x.alpha = lo + i * h;
      }
      grid.push_back({rss(x), x});
    }
  }
  std::stable_sort(grid.begin(), grid.end(), [](const auto& a, const auto& b) {
    return a.first < b.first;
  });

  std::vector<std::pair<Exponents, double>> seeds;
  Exponents warm_start = *warm;
  if (alpha_fixed) warm_start.alpha = constraint.value;
  if (beta_fixed) warm_start.beta = constraint.value;
  seeds.push_back({warm_start, 0.02});
  for (int k = 0; k < starts && k < static_cast<int>(grid.size()); ++k) {
    seeds.push_back({grid[k].second, 0.5 * h});
  }
  double best = kInf;
  Exponents best_x = warm_start;
  for (const auto& [seed, step] : seeds) {
    Exponents x;
    const double f =
        NelderMead(rss, free_dims, !alpha_fixed, seed, step, lo, hi, &x);
    if (f < best) {
      best = f;
      best_x = x;
    }
  }
  *warm = best_x;
  SolveLinear(data, best_x, constraint, theta);
  return best;
}

// One end of an interval, in the quantity's units, and whether the data
// bound it.
struct Side {
  double bound = 0;
  bool bounded = true;
};

// One side (direction -1 or +1) of one quantity's interval: steps out from
// the estimate, doubling the step, until the profile passes the threshold or
// the search range ends; then bisects.

Side FindBound(const Data& data, Constraint::Kind kind,
               const PredictionSite& site, double estimate, int direction,
               const Exponents& optimum, double threshold,
               const ProfileOptions& options) {
  const bool exponent = kind == Constraint::kAlpha || kind == Constraint::kBeta;
  // The search variable: the exponent itself, or ln(value).
  const double t0 = exponent ? estimate : std::log(estimate);
  const double limit =
      exponent ? (direction > 0 ? options.exponent_max : options.exponent_min)
               : t0 + direction * kLogRange;
  auto value_of = [&](double t) { return exponent ? t : std::exp(t); };
  Exponents warm = optimum;
  auto inside = [&](double t) {
    Constraint constraint{kind, value_of(t), site};
    Coefs theta;
    return Profile(data, constraint, options, options.grid_size, 1, &warm,
                   &theta) <= threshold;
  };
  double t_in = t0, t_out = t0;
  bool crossed = false;
  for (double step = 0.01;; step *= 2) {
    double t = t0 + direction * step;
    const bool at_limit = direction > 0 ? t >= limit : t <= limit;
    if (at_limit) t = limit;
    if (!(direction > 0 ? t > t_in : t < t_in)) break;  // already at limit
    if (inside(t)) {
      t_in = t;
    } else {
      t_out = t;
      crossed = true;
      break;
    }
    if (at_limit) break;
  }
  if (!crossed) {
    Side side;
    side.bounded = false;
    side.bound = direction > 0 ? kInf : (exponent ? options.exponent_min : 0.0);
    return side;
  }
  // Relative to the bound's distance from the estimate, with a floor for a
  // bound at the estimate itself (noise-free data).
  while (std::abs(t_out - t_in) >
         std::max(options.bound_tolerance * std::abs(t_in - t0),
                  1e-10 * std::max(1.0, std::abs(t0)))) {
    const double mid = 0.5 * (t_in + t_out);
    (inside(mid) ? t_in : t_out) = mid;
  }
  // The outer end of the bracket: never narrower than the crossing.
  return Side{value_of(t_out), true};
}

}  // namespace

double StudentTQuantile(double p, int dof) {
  if (!(p > 0 && p < 1) || dof < 1) return std::nan("");
  if (p == 0.5) return 0;
  if (p < 0.5) return -StudentTQuantile(1 - p, dof);
  double lo = 0, hi = 1;
  while (StudentTCdf(hi, dof) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * std::max(1.0, hi); ++i) {
    const double mid = 0.5 * (lo + hi);
    (StudentTCdf(mid, dof) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

absl::StatusOr<ProfileResult> ProfileLikelihoodIntervals(
    absl::Span<const ScalingPoint> points, const ProfileOptions& options) {
  if (auto s = ValidatePoints(points); !s.ok()) return s;
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return absl::InvalidArgumentError("interval confidence must be in (0, 1)");
  }
  if (!(options.exponent_min >= 0 &&
        options.exponent_max > options.exponent_min &&
        std::isfinite(options.exponent_max)) ||
      options.grid_size < 3 || !(options.bound_tolerance > 0)) {
    return absl::InvalidArgumentError(
        "profile options: need 0 <= exponent_min < exponent_max < inf, "
        "grid_size >= 3 and bound_tolerance > 0");
  }
  for (size_t i = 0; i < options.predict_at.size(); ++i) {
    const PredictionSite& site = options.predict_at[i];
    if (!(std::isfinite(site.n) && site.n > 0 && std::isfinite(site.d) &&
          site.d > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prediction site ", i, ": N and D must be finite and > 0"));
    }
  }
  if (points.size() <= 5) {
    return absl::FailedPreconditionError(absl::StrCat(
        "intervals need at least 6 points (5 coefficients and the noise), "
        "got ",
        points.size()));
  }
  Data data;
  for (const ScalingPoint& p : points) {
    data.log_n.push_back(std::log(p.n));
    data.log_d.push_back(std::log(p.d));
    data.inv_loss.push_back(1 / p.loss);
  }

  // The least-squares optimum: a grid twice as fine, refined from its three
  // best points.
  ProfileResult result;
  result.confidence = options.confidence;
  Exponents optimum{0.5 * (options.exponent_min + options.exponent_max),
                    0.5 * (options.exponent_min + options.exponent_max)};
  Coefs theta;
  result.rss = Profile(data, Constraint{}, options, 2 * options.grid_size, 3,
                       &optimum, &theta);
  result.least_squares = {theta[0], theta[1], optimum.alpha, theta[2],
                          optimum.beta};
  result.dof = static_cast<int>(points.size()) - 5;
  result.sigma = std::sqrt(result.rss / result.dof);
  const double t = StudentTQuantile(0.5 * (1 + options.confidence), result.dof);
  result.threshold_ratio = 1 + t * t / result.dof;
  const double threshold = result.rss * result.threshold_ratio;

  // Every side of every quantity is one independent task.
  struct Quantity {
    Constraint::Kind kind;
    double estimate;
    PredictionSite site;
  };
  const PowerLaw& ls = result.least_squares;
  std::vector<Quantity> quantities = {{Constraint::kE, ls.E, {}},
                                      {Constraint::kA, ls.A, {}},
                                      {Constraint::kAlpha, ls.alpha, {}},
                                      {Constraint::kB, ls.B, {}},
                                      {Constraint::kBeta, ls.beta, {}}};
  for (const PredictionSite& site : options.predict_at) {
    quantities.push_back(
        {Constraint::kPrediction, ls.Predict(site.n, site.d), site});
  }
  double data_scale = 0, mean_log_n = 0, mean_log_d = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    data_scale += points[i].loss / points.size();
    mean_log_n += data.log_n[i] / points.size();
    mean_log_d += data.log_d[i] / points.size();
  }
  std::vector<ProfileInterval> intervals(quantities.size());
  std::vector<Side> sides(2 * quantities.size());
  internal::ParallelFor(sides.size(), options.threads, [&](size_t i) {
    const Quantity& q = quantities[i / 2];
    const int direction = i % 2 == 0 ? -1 : 1;
    const bool exponent =
        q.kind == Constraint::kAlpha || q.kind == Constraint::kBeta;
    if (!exponent && !(q.estimate > 0)) {
      // A coefficient at its bound 0: the data do not bound it below, and
      // the upper side is searched from a value negligible on the scale of
      // the losses.
      if (direction < 0) {
        sides[i] = Side{0.0, false};
        return;
      }
      double scale = 1e-8 * data_scale;
      if (q.kind == Constraint::kA) scale *= std::exp(ls.alpha * mean_log_n);
      if (q.kind == Constraint::kB) scale *= std::exp(ls.beta * mean_log_d);
      sides[i] = FindBound(data, q.kind, q.site, scale, 1, optimum, threshold,
                           options);
      return;
    }
    sides[i] = FindBound(data, q.kind, q.site, q.estimate, direction, optimum,
                         threshold, options);
  });
  for (size_t q = 0; q < quantities.size(); ++q) {
    ProfileInterval& out = intervals[q];
    out.estimate = quantities[q].estimate;
    out.lower = sides[2 * q].bound;
    out.bounded_below = sides[2 * q].bounded;
    out.upper = sides[2 * q + 1].bound;
    out.bounded_above = sides[2 * q + 1].bounded;
  }
  // A's upper bound rests on alpha <= exponent_max when alpha's does (a
  // larger alpha needs a larger A): it is then not the data's either.
  if (!intervals[2].bounded_above) {
    intervals[1].upper = kInf;
    intervals[1].bounded_above = false;
  }
  if (!intervals[4].bounded_above) {
    intervals[3].upper = kInf;
    intervals[3].bounded_above = false;
  }
  result.E = intervals[0];
  result.A = intervals[1];
  result.alpha = intervals[2];
  result.B = intervals[3];
  result.beta = intervals[4];
  for (size_t k = 0; k < options.predict_at.size(); ++k) {
    result.predictions.push_back({options.predict_at[k], intervals[5 + k]});
  }
  return result;
}

}  // namespace hlab::analysis
