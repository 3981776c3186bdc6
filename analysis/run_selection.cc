#include "analysis/run_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"

namespace hlab::analysis {
namespace {

constexpr int kP = kNumLogParams;

// ln of a coefficient: its log field when the coefficient overflowed, -inf
// for 0.
double LogCoefficient(double value, double log_value) {
  if (std::isinf(value) && std::isfinite(log_value)) return log_value;
  if (value <= 0) return -std::numeric_limits<double>::infinity();
  return std::log(value);
}

bool ValidPoint(const DesignPoint& p) {
  return std::isfinite(p.n) && p.n > 0 && std::isfinite(p.d) && p.d > 0;
}

}  // namespace

bool Identifiable(absl::Span<const DesignPoint> points, int min_n_levels) {
  if (points.size() < static_cast<size_t>(kP)) return false;
  std::set<double> n_levels, d_levels;
  for (const DesignPoint& p : points) {
    n_levels.insert(p.n);
    d_levels.insert(p.d);
  }
  return n_levels.size() >= static_cast<size_t>(min_n_levels) &&
         d_levels.size() >= 2;
}

absl::StatusOr<LinearisedLaw> LinearisedLaw::Create(
    const PowerLaw& law, absl::Span<const DesignPoint> measured) {
  if (!std::isfinite(law.alpha) || !std::isfinite(law.beta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the law's exponents must be finite, got alpha = ", law.alpha,
        ", beta = ", law.beta));
  }
  LinearisedLaw lin;
  lin.log_a_ = LogCoefficient(law.A, law.log_A);
  lin.log_b_ = LogCoefficient(law.B, law.log_B);
  lin.log_e_ = LogCoefficient(law.E, std::numeric_limits<double>::quiet_NaN());
  lin.alpha_ = law.alpha;
  lin.beta_ = law.beta;
  if (std::isnan(lin.log_a_) || std::isnan(lin.log_b_)) {
    return absl::InvalidArgumentError("the law's A or B is not a number");
  }
  for (size_t i = 0; i < measured.size(); ++i) {
    if (!ValidPoint(measured[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("measured point ", i, ": N = ", measured[i].n,
                       ", D = ", measured[i].d, " must be finite and > 0"));
    }
    lin.center_n_ += std::log(measured[i].n) / measured.size();
    lin.center_d_ += std::log(measured[i].d) / measured.size();
  }
  // M = sum g g^T, in the centred parametrisation.
  std::array<double, kP * kP> m{};
  for (size_t i = 0; i < measured.size(); ++i) {
    const std::array<double, kP> g = lin.CentredGradient(measured[i]);
    for (int r = 0; r < kP; ++r) {
      for (int c = 0; c < kP; ++c) m[r * kP + c] += g[r] * g[c];
    }
  }
  // Columns scaled to a unit diagonal (the exponents' columns are ~ln N
  // times the others'), then a ridge of 1e-12 so that a direction the data
  // do not determine keeps a large but finite variance.
  for (int k = 0; k < kP; ++k) {
    lin.scale_[k] = m[k * kP + k] > 0 ? std::sqrt(m[k * kP + k]) : 1.0;
  }
  constexpr double kRidge = 1e-12;
  for (int r = 0; r < kP; ++r) {
    for (int c = 0; c < kP; ++c) {
      m[r * kP + c] /= lin.scale_[r] * lin.scale_[c];
    }
    m[r * kP + r] += kRidge;
  }
  // Cholesky: M~ = L L^T.
  std::array<double, kP* kP>& l = lin.chol_;
  for (int r = 0; r < kP; ++r) {
    for (int c = 0; c <= r; ++c) {
      double s = m[r * kP + c];
      for (int k = 0; k < c; ++k) s -= l[r * kP + k] * l[c * kP + k];
      if (r == c) {
        // The ridge keeps s > 0 in exact arithmetic; rounding can still eat
        // it for (nearly) collinear columns.
        l[r * kP + r] = std::sqrt(std::max(s, kRidge));
      } else {
        l[r * kP + c] = s / l[c * kP + c];
      }
    }
  }
  return lin;
}

std::array<double, kNumLogParams> LinearisedLaw::Gradient(
    const DesignPoint& p) const {
  std::array<double, kP> g = CentredGradient(p);
  g[kParamAlpha] -= g[kParamA] * center_n_;
  g[kParamBeta] -= g[kParamB] * center_d_;
  return g;
}

std::array<double, kNumLogParams> LinearisedLaw::CentredGradient(
    const DesignPoint& p) const {
  const double ln_n = std::log(p.n), ln_d = std::log(p.d);
  const double tn = log_a_ - alpha_ * ln_n;
  const double td = log_b_ - beta_ * ln_d;
  const double te = log_e_;
  const double top = std::max({tn, td, te});
  const double en = std::exp(tn - top), ed = std::exp(td - top),
               ee = std::exp(te - top);
  const double sum = en + ed + ee;
  const double wn = en / sum, wd = ed / sum, we = ee / sum;
  std::array<double, kP> g{};
  g[kParamA] = wn;
  g[kParamB] = wd;
  g[kParamE] = we;
  g[kParamAlpha] = -wn * (ln_n - center_n_);
  g[kParamBeta] = -wd * (ln_d - center_d_);
  return g;
}

std::array<double, kNumLogParams> LinearisedLaw::Solve(
    const std::array<double, kNumLogParams>& v) const {
  // M^-1 v = S^-1 M~^-1 S^-1 v, S = diag(scale_).
  std::array<double, kP> y{};
  for (int r = 0; r < kP; ++r) {
    double s = v[r] / scale_[r];
    for (int k = 0; k < r; ++k) s -= chol_[r * kP + k] * y[k];
    y[r] = s / chol_[r * kP + r];
  }
  std::array<double, kP> x{};
  for (int r = kP - 1; r >= 0; --r) {
    double s = y[r];
    for (int k = r + 1; k < kP; ++k) s -= chol_[k * kP + r] * x[k];
    x[r] = s / chol_[r * kP + r];
  }
  for (int r = 0; r < kP; ++r) x[r] /= scale_[r];
  return x;
}

double LinearisedLaw::TargetVariance(
    absl::Span<const DesignPoint> targets) const {
  double u = 0;
  for (const DesignPoint& t : targets) {
    const std::array<double, kP> g = CentredGradient(t);
    const std::array<double, kP> x = Solve(g);
    for (int k = 0; k < kP; ++k) u += g[k] * x[k];
  }
  return u;
}

double LinearisedLaw::VarianceReduction(
    const DesignPoint& candidate, absl::Span<const DesignPoint> targets) const {
  const std::array<double, kP> gc = CentredGradient(candidate);
  const std::array<double, kP> u = Solve(gc);  // M^-1 g_c
  double leverage = 0;
  for (int k = 0; k < kP; ++k) leverage += gc[k] * u[k];
  double numerator = 0;
  for (const DesignPoint& t : targets) {
    const std::array<double, kP> gt = CentredGradient(t);
    double dot = 0;
    for (int k = 0; k < kP; ++k) dot += gt[k] * u[k];
    numerator += dot * dot;
  }
  return numerator / (1 + leverage);
}

}  // namespace hlab::analysis
