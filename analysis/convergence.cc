#include "analysis/convergence.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace hlab::analysis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// exp(kMaxLogD) is still a finite double.
constexpr double kMaxLogD = 700.0;

absl::Status CheckLaw(const PowerLaw& law, const char* which) {
  const double values[] = {law.E, law.A, law.alpha, law.B, law.beta};
  for (double v : values) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, " law has a non-finite coefficient"));
    }
  }
  if (law.B < 0 || law.beta < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(which, " law needs B >= 0 and beta >= 0"));
  }
  return absl::OkStatus();
}

// Finds the crossing of a monotone in-band predicate: in_band(out) is false,
// in_band(in) is true; returns the in-band end of the final bracket.
template <typename InBand>
double Bisect(const InBand& in_band, double out, double in) {
  for (int it = 0; it < 200; ++it) {
    if (std::abs(in - out) <= 1e-12 * std::max(1.0, std::abs(in))) break;
    const double mid = 0.5 * (out + in);
    (in_band(mid) ? in : out) = mid;
  }
  return in;
}

}  // namespace

double LossGap(const PowerLaw& first, const PowerLaw& second, double n,
               double d) {
  return std::abs(first.Predict(n, d) - second.Predict(n, d));
}

absl::StatusOr<ConvergenceBudget> TokenBudgetForConvergence(
    const PowerLaw& first, const PowerLaw& second, double n, double threshold) {
  if (!(n > 0) || !std::isfinite(n)) {
    return absl::InvalidArgumentError("n must be finite and > 0");
  }
  if (!(threshold > 0) || !std::isfinite(threshold)) {
    return absl::InvalidArgumentError("threshold must be finite and > 0");
  }
  if (auto s = CheckLaw(first, "first"); !s.ok()) return s;
  if (auto s = CheckLaw(second, "second"); !s.ok()) return s;

  // g(u) = c + B1 e^{-beta1 u} - B2 e^{-beta2 u}, u = ln D.
  const double c = (first.E - second.E) + first.A * std::pow(n, -first.alpha) -
                   second.A * std::pow(n, -second.alpha);
  auto g = [&](double u) {
    return c + first.B * std::exp(-first.beta * u) -
           second.B * std::exp(-second.beta * u);
  };
  auto in_band = [&](double u) { return std::abs(g(u)) < threshold; };
  const double g_inf = c + (first.beta == 0 ? first.B : 0.0) -
                       (second.beta == 0 ? second.B : 0.0);

  ConvergenceBudget out;
  out.asymptotic_gap = std::abs(g_inf);
  if (!(out.asymptotic_gap < threshold)) {
    out.converges = false;
    out.d = out.tokens_per_param = kInf;
    return out;
  }
  out.converges = true;

  // The B-term difference has at most one stationary point u_c; g is
  // monotone on [0, u_c] and on [u_c, inf).
  double u_c = -1;
  const double s1 = first.beta * first.B, s2 = second.beta * second.B;
  if (s1 > 0 && s2 > 0 && first.beta != second.beta) {
    u_c = std::log(s2 / s1) / (second.beta - first.beta);
  }
  const double last_start = u_c > 0 ? u_c : 0.0;
  double u_star;
  if (in_band(last_start)) {
    // All of the last piece is in band (g moves monotonically between two
    // in-band values); the previous piece, if any, decides.
    u_star = (last_start == 0 || in_band(0)) ? 0.0
                                             : Bisect(in_band, 0.0, last_start);
  } else {
    double step = 1.0, in = last_start + step;
    while (!in_band(in)) {
      if (in >= kMaxLogD) {
        return absl::OutOfRangeError(
            "the gap falls below the threshold only beyond 1e304 tokens");
      }
      step *= 2;
      in = std::min(kMaxLogD, last_start + step);
    }
    u_star = Bisect(in_band, last_start, in);
  }
  out.d = std::exp(u_star);
  out.tokens_per_param = out.d / n;
  return out;
}

}  // namespace hlab::analysis
