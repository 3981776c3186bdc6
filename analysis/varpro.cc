#include "analysis/varpro.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"

namespace hlab::analysis {
namespace {

using Coefs = std::array<double, 3>;  // E, A, B

// Minimises 1/2 t'Gt - c't over t >= 0 for a 3x3 positive semi-definite G.
// The optimum is the unconstrained solution on its own support, so the best
// feasible support solution over all 8 supports is the NNLS solution.
Coefs SolveNnls3(const double g[3][3], const double c[3]) {
  // Scale to a unit diagonal for conditioning.
  double s[3];
  for (int k = 0; k < 3; ++k) s[k] = g[k][k] > 0 ? std::sqrt(g[k][k]) : 0;
  Coefs best = {0, 0, 0};
  double best_q = 0;  // the empty support
  for (int mask = 1; mask < 8; ++mask) {
    int idx[3], k = 0;
    bool usable = true;
    for (int j = 0; j < 3; ++j) {
      if (mask & (1 << j)) {
        if (s[j] == 0) usable = false;
        idx[k++] = j;
      }
    }
    if (!usable) continue;
    // Cholesky of the scaled k x k block.
    double l[3][3] = {};
    for (int i = 0; i < k && usable; ++i) {
      for (int j = 0; j <= i; ++j) {
        double v = g[idx[i]][idx[j]] / (s[idx[i]] * s[idx[j]]);
        for (int p = 0; p < j; ++p) v -= l[i][p] * l[j][p];
        if (i == j) {
          if (v <= 1e-13) {
            usable = false;
            break;
          }
          l[i][i] = std::sqrt(v);
        } else {
          l[i][j] = v / l[j][j];
        }
      }
    }
    if (!usable) continue;
    double y[3] = {}, t[3] = {};
    for (int i = 0; i < k; ++i) {
      double v = c[idx[i]] / s[idx[i]];
      for (int p = 0; p < i; ++p) v -= l[i][p] * y[p];
      y[i] = v / l[i][i];
    }
    for (int i = k - 1; i >= 0; --i) {
      double v = y[i];
      for (int p = i + 1; p < k; ++p) v -= l[p][i] * t[p];
      t[i] = v / l[i][i];
    }
    double q = 0;
    bool feasible = true;
    for (int i = 0; i < k; ++i) {
      if (t[i] < 0) feasible = false;
      q -= 0.5 * (c[idx[i]] / s[idx[i]]) * t[i];
    }
    if (feasible && q < best_q) {
      best_q = q;
      best = {0, 0, 0};
      for (int i = 0; i < k; ++i) best[idx[i]] = t[i] / s[idx[i]];
    }
  }
  return best;
}

// The inner problem for one (alpha, beta).
class InnerProblem {
 public:
  InnerProblem(absl::Span<const ScalingPoint> points,
               const VarProOptions& options)
      : points_(points),
        options_(options),
        x1_(points.size()),
        x2_(points.size()),
        row_weight_(points.size()),
        r_(points.size()) {}

  // Solves for (E, A, B) >= 0; returns the objective.
  double Solve(double alpha, double beta, int irls_iterations, Coefs* coefs) {
    for (size_t i = 0; i < points_.size(); ++i) {
      x1_[i] = std::pow(points_[i].n, -alpha);
      x2_[i] = std::pow(points_[i].d, -beta);
      row_weight_[i] = 1.0;
    }
    Coefs theta = WeightedNnls();
    double objective = Objective(theta);
    if (options_.loss == VarProLoss::kHuber) {
      // IRLS: the weight psi(r)/r makes 1/2 w r^2 a majoriser of Huber(r),
      // so each reweighted NNLS step cannot raise the objective.
      const double delta = options_.huber_delta;
      for (int it = 0; it < irls_iterations; ++it) {
        for (size_t i = 0; i < r_.size(); ++i) {
          const double abs_r = std::abs(r_[i]);
          row_weight_[i] = abs_r <= delta ? 1.0 : delta / abs_r;
        }
        const Coefs next = WeightedNnls();
        const double next_objective = Objective(next);
        if (!(next_objective < objective)) break;
        const bool converged = objective - next_objective <= 1e-13 * objective;
        theta = next;
        objective = next_objective;
        if (converged) break;
      }
      Objective(theta);  // leaves r_ at theta
    }
    *coefs = theta;
    return objective;
  }

 private:
  // NNLS on relative residuals with the current row weights.
  Coefs WeightedNnls() const {
    double g[3][3] = {}, c[3] = {};
    for (size_t i = 0; i < points_.size(); ++i) {
      const double y = points_[i].loss;
      const double w = row_weight_[i] / (y * y);
      const double x[3] = {1.0, x1_[i], x2_[i]};
      for (int j = 0; j < 3; ++j) {
        c[j] += w * x[j] * y;
        for (int k = 0; k <= j; ++k) g[j][k] += w * x[j] * x[k];
      }
    }
    for (int j = 0; j < 3; ++j) {
      for (int k = j + 1; k < 3; ++k) g[j][k] = g[k][j];
    }
    return SolveNnls3(g, c);
  }

  // The loss at theta; sets r_ to the relative residuals.
  double Objective(const Coefs& theta) {
    double total = 0;
    for (size_t i = 0; i < points_.size(); ++i) {
      const double y = points_[i].loss;
      r_[i] = (theta[0] + theta[1] * x1_[i] + theta[2] * x2_[i] - y) / y;
      total += options_.loss == VarProLoss::kHuber
                   ? Huber(r_[i], options_.huber_delta)
                   : 0.5 * r_[i] * r_[i];
    }
    return total;
  }

  absl::Span<const ScalingPoint> points_;
  const VarProOptions& options_;
  std::vector<double> x1_, x2_, row_weight_, r_;
};

struct Vertex {
  double alpha, beta, f;
};

// Nelder-Mead on (alpha, beta), clamped to [lo, hi]^2.
Vertex NelderMead(const std::function<double(double, double)>& f, Vertex start,
                  double step, double lo, double hi, double tolerance,
                  int max_iterations) {
  auto clamp = [&](double v) { return std::min(hi, std::max(lo, v)); };
  auto make = [&](double a, double b) {
    a = clamp(a);
    b = clamp(b);
    return Vertex{a, b, f(a, b)};
  };
  const double sa = start.alpha + step <= hi ? step : -step;
  const double sb = start.beta + step <= hi ? step : -step;
  std::array<Vertex, 3> s = {start, make(start.alpha + sa, start.beta),
                             make(start.alpha, start.beta + sb)};
  auto by_f = [](const Vertex& x, const Vertex& y) { return x.f < y.f; };
  for (int it = 0; it < max_iterations; ++it) {
    std::stable_sort(s.begin(), s.end(), by_f);
    const double span = std::max(std::max(std::abs(s[1].alpha - s[0].alpha),
                                          std::abs(s[2].alpha - s[0].alpha)),
                                 std::max(std::abs(s[1].beta - s[0].beta),
                                          std::abs(s[2].beta - s[0].beta)));
    if (span < tolerance) break;
    const double ca = 0.5 * (s[0].alpha + s[1].alpha);
    const double cb = 0.5 * (s[0].beta + s[1].beta);
    const Vertex reflected =
        make(ca + (ca - s[2].alpha), cb + (cb - s[2].beta));
    if (reflected.f < s[0].f) {
      const Vertex expanded =
          make(ca + 2 * (ca - s[2].alpha), cb + 2 * (cb - s[2].beta));
      s[2] = expanded.f < reflected.f ? expanded : reflected;
    } else if (reflected.f < s[1].f) {
      s[2] = reflected;
    } else {
      const Vertex& worst = reflected.f < s[2].f ? reflected : s[2];
      const Vertex contracted =
          make(ca + 0.5 * (worst.alpha - ca), cb + 0.5 * (worst.beta - cb));
      if (contracted.f < worst.f) {
        s[2] = contracted;
      } else {
        for (int k = 1; k < 3; ++k) {
          s[k] = make(s[0].alpha + 0.5 * (s[k].alpha - s[0].alpha),
                      s[0].beta + 0.5 * (s[k].beta - s[0].beta));
        }
      }
    }
  }
  std::stable_sort(s.begin(), s.end(), by_f);
  return s[0];
}

absl::Status CheckOptions(const VarProOptions& o) {
  if (!(o.exponent_min >= 0 && o.exponent_max > o.exponent_min)) {
    return absl::InvalidArgumentError(
        "VarPro exponent range must satisfy 0 <= exponent_min < "
        "exponent_max");
  }
  if (o.grid_size < 2) {
    return absl::InvalidArgumentError("VarPro grid_size must be >= 2");
  }
  if (!(o.huber_delta > 0)) {
    return absl::InvalidArgumentError("VarPro huber_delta must be > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VarProResult> FitPowerLawVarPro(
    absl::Span<const ScalingPoint> points, const VarProOptions& options) {
  if (auto s = ValidatePoints(points); !s.ok()) return s;
  if (auto s = CheckOptions(options); !s.ok()) return s;
  InnerProblem inner(points, options);
  VarProResult result;
  Coefs coefs;

  // Grid search.
  const double lo = options.exponent_min, hi = options.exponent_max;
  const double step = (hi - lo) / (options.grid_size - 1);
  Vertex best{0, 0, std::numeric_limits<double>::infinity()};
  for (int i = 0; i < options.grid_size; ++i) {
    for (int j = 0; j < options.grid_size; ++j) {
      const double alpha = lo + i * step, beta = lo + j * step;
      const double f =
          inner.Solve(alpha, beta, options.grid_irls_iterations, &coefs);
      ++result.evaluations;
      if (f < best.f) best = {alpha, beta, f};
    }
  }

  // Refinement.
  auto objective = [&](double alpha, double beta) {
    ++result.evaluations;
    return inner.Solve(alpha, beta, options.refine_irls_iterations, &coefs);
  };
  best.f = objective(best.alpha, best.beta);
  const Vertex refined =
      NelderMead(objective, best, step, lo, hi, options.refine_tolerance,
                 options.max_refine_iterations);

  result.objective = inner.Solve(refined.alpha, refined.beta,
                                 options.refine_irls_iterations, &coefs);
  result.law = {coefs[0], coefs[1], refined.alpha, coefs[2], refined.beta};
  result.loss = options.loss;
  double log_huber = 0;
  for (const ScalingPoint& p : points) {
    log_huber += Huber(std::log(result.law.Predict(p.n, p.d) / p.loss),
                       options.huber_delta);
  }
  result.log_huber_objective = log_huber;
  const double edge = 1e-6 * (hi - lo);
  for (const auto& [name, value] :
       {std::pair{"alpha", refined.alpha}, std::pair{"beta", refined.beta}}) {
    if (value <= lo + edge || value >= hi - edge) {
      result.warnings.push_back(absl::StrFormat(
          "VarPro optimum %s = %g is on the edge of its search range [%g, %g]",
          name, value, lo, hi));
    }
  }
  for (const auto& [name, value] :
       {std::pair{"E", coefs[0]}, std::pair{"A", coefs[1]},
        std::pair{"B", coefs[2]}}) {
    if (value == 0) {
      result.warnings.push_back(absl::StrFormat(
          "VarPro fit has %s = 0 (its non-negativity bound is active)", name));
    }
  }
  return result;
}

FitAgreement CompareFits(const PowerLaw& first, const PowerLaw& second,
                         absl::Span<const ScalingPoint> points,
                         const AgreementTolerance& tolerance) {
  FitAgreement out;
  out.alpha_diff = std::abs(first.alpha - second.alpha);
  out.beta_diff = std::abs(first.beta - second.beta);
  for (const ScalingPoint& p : points) {
    out.max_prediction_rdiff = std::max(
        out.max_prediction_rdiff,
        std::abs(first.Predict(p.n, p.d) - second.Predict(p.n, p.d)) / p.loss);
  }
  // NaN comparisons fail, so a NaN difference counts as disagreement.
  out.agree = out.alpha_diff <= tolerance.exponent_atol &&
              out.beta_diff <= tolerance.exponent_atol &&
              out.max_prediction_rdiff <= tolerance.prediction_rtol;
  out.summary = absl::StrFormat(
      "|d alpha| = %.4g, |d beta| = %.4g (tolerance %g); max relative "
      "prediction difference %.3g (tolerance %g)",
      out.alpha_diff, out.beta_diff, tolerance.exponent_atol,
      out.max_prediction_rdiff, tolerance.prediction_rtol);
  return out;
}

}  // namespace hlab::analysis
