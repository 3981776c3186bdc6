#include "analysis/power_law.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "analysis/internal/fast_math.h"

// On x86-64 with GCC the objective also has an AVX2 (x86-64-v3) kernel,
// four lanes wide, chosen at run time when the CPU has AVX2 and FMA.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HLAB_ANALYSIS_AVX2_KERNEL 1
#else
#define HLAB_ANALYSIS_AVX2_KERNEL 0
#endif

namespace hlab::analysis {

namespace {

// c / x^p; from ln c when c overflowed (inf) and ln c is known.
double Term(double c, double log_c, double x, double p) {
  if (!std::isfinite(c) && std::isfinite(log_c)) {
    return std::exp(log_c - p * std::log(x));
  }
  return c * std::pow(x, -p);
}

}  // namespace

double PowerLaw::Predict(double n, double d) const {
  return E + Term(A, log_A, n, alpha) + Term(B, log_B, d, beta);
}

PowerLaw ToPowerLaw(const LogPowerLaw& law) {
  PowerLaw out;
  out.E = std::exp(law.e);
  out.A = std::exp(law.a);
  out.alpha = law.alpha;
  out.B = std::exp(law.b);
  out.beta = law.beta;
  out.log_A = law.a;
  out.log_B = law.b;
  return out;
}

LogPowerLaw ToLogPowerLaw(const PowerLaw& law) {
  LogPowerLaw out;
  out.a = std::log(law.A);
  out.b = std::log(law.B);
  out.e = std::log(law.E);
  out.alpha = law.alpha;
  out.beta = law.beta;
  return out;
}

void ToVector(const LogPowerLaw& law, double* x) {
  x[kParamA] = law.a;
  x[kParamB] = law.b;
  x[kParamE] = law.e;
  x[kParamAlpha] = law.alpha;
  x[kParamBeta] = law.beta;
}

LogPowerLaw FromVector(const double* x) {
  LogPowerLaw law;
  law.a = x[kParamA];
  law.b = x[kParamB];
  law.e = x[kParamE];
  law.alpha = x[kParamAlpha];
  law.beta = x[kParamBeta];
  return law;
}

double PredictLog(const LogPowerLaw& law, double n, double d) {
  const double t1 = law.a - law.alpha * std::log(n);
  const double t2 = law.b - law.beta * std::log(d);
  const double m = std::max({t1, t2, law.e});
  return m +
         std::log(std::exp(t1 - m) + std::exp(t2 - m) + std::exp(law.e - m));
}

double Huber(double r, double delta) {
  const double abs_r = std::abs(r);
  return abs_r <= delta ? 0.5 * r * r : delta * (abs_r - 0.5 * delta);
}

absl::Status ValidatePoints(absl::Span<const ScalingPoint> points,
                            size_t min_points) {
  if (points.size() < min_points) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need at least ", min_points,
        " points to fit E, A, alpha, B, beta; got ", points.size()));
  }
  auto check = [](size_t i, const char* field, double value) -> absl::Status {
    if (std::isfinite(value) && value > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "point ", i, ": ", field, " = ", value, " must be finite and > 0"));
  };
  for (size_t i = 0; i < points.size(); ++i) {
    if (auto s = check(i, "N", points[i].n); !s.ok()) return s;
    if (auto s = check(i, "D", points[i].d); !s.ok()) return s;
    if (auto s = check(i, "loss", points[i].loss); !s.ok()) return s;
  }
  return absl::OkStatus();
}

HuberLogObjective::HuberLogObjective(absl::Span<const ScalingPoint> points,
                                     double delta)
    : num_points_(points.size()), delta_(delta) {
  // Padded to a multiple of kPointsPerStep for the loops in Evaluate.
  const size_t padded =
      (num_points_ + kPointsPerStep - 1) / kPointsPerStep * kPointsPerStep;
  log_n_.assign(padded, 0.0);
  log_d_.assign(padded, 0.0);
  log_loss_.assign(padded, 0.0);
  weight_.assign(padded, 0.0);
  for (size_t i = 0; i < num_points_; ++i) {
    log_n_[i] = std::log(points[i].n);
    log_d_[i] = std::log(points[i].d);
    log_loss_[i] = std::log(points[i].loss);
    weight_[i] = 1.0;
  }
}

// For each point, t = (a - alpha ln N, b - beta ln D, e), LSE = ln sum exp t,
// w = softmax(t), r = LSE - ln L. With psi = Huber'(r) = clamp(r, -delta,
// delta), the gradient is sum_i psi_i * dLSE_i/dx:
//   d/da = w1, d/db = w2, d/de = w3, d/dalpha = -w1 ln N, d/dbeta = -w2 ln D.
namespace {

// The objective's terms for one vector of points (one per lane).
template <typename V>
struct LaneTerms {
  V huber;       // Huber(r), zero on padding
  V w1, w2, w3;  // psi * softmax(t), zero on padding
};

// t = (a - alpha ln N, b - beta ln D, e), r = LSE(t) - ln L and
// psi = Huber'(r) times the point's weight (zero on padding). Vectors go by
// reference (see internal/fast_math.h).
template <typename V>
inline void ComputeLaneTerms(const V& a, const V& b, const V& e, const V& alpha,
                             const V& beta, const V& delta, const V& ln_n,
                             const V& ln_d, const V& ln_l, const V& weight,
                             LaneTerms<V>* out) {
  const V one = V{} + 1.0;
  const V t1 = a - alpha * ln_n;
  const V t2 = b - beta * ln_d;
  // Of the three exponentials one is exp(0) = 1: with lo <= hi the ordered
  // pair (t1, t2) and m = max(hi, e), the other two are x1 = exp(lo - m) and
  // x2 = exp(min(hi, e) - m).
  const auto t1_is_lo = t1 <= t2;
  const V lo = t1_is_lo ? t1 : t2;
  const V hi = t1_is_lo ? t2 : t1;
  const auto hi_is_max = hi >= e;
  const V m = hi_is_max ? hi : e;
  const V mid = hi_is_max ? e : hi;
  V x1, x2, log_sum;
  internal::VecExp<V>(lo - m, &x1);
  internal::VecExp<V>(mid - m, &x2);
  const V sum = one + x1 + x2;
  internal::VecLog<V>(sum, &log_sum);
  const V r = m + log_sum - ln_l;
  // psi * (r - psi / 2) is Huber(r) without a branch.
  const V clamped = r < -delta ? -delta : r;
  const V psi = (clamped > delta ? delta : clamped) * weight;
  const V scale = psi / sum;
  const V w_lo = x1 * scale;
  const V w_hi = (hi_is_max ? one : x2) * scale;
  out->huber = psi * (r - 0.5 * psi);
  out->w1 = t1_is_lo ? w_lo : w_hi;
  out->w2 = t1_is_lo ? w_hi : w_lo;
  out->w3 = (hi_is_max ? x2 : one) * scale;
}

// The objective over padded arrays, kPointsPerStep points per step as
// independent vectors (which keeps the core busy while each waits on its
// exp/log chain) summed into per-lane accumulators: the summation order is
// fixed by the data and the kernel alone, whatever the thread count.
template <typename V>
__attribute__((always_inline)) inline double EvaluateLanes(
    const double* ln_n, const double* ln_d, const double* ln_l,
    const double* weight, size_t padded, double delta, const double* x,
    double* gradient) {
  constexpr int kLanes = internal::VecTraits<V>::kLanes;
  constexpr int kVectors = kPointsPerStep / kLanes;
  const V a = V{} + x[kParamA], b = V{} + x[kParamB], e = V{} + x[kParamE];
  const V alpha = V{} + x[kParamAlpha], beta = V{} + x[kParamBeta];
  const V d = V{} + delta;
  V value[kVectors] = {}, g_a[kVectors] = {}, g_b[kVectors] = {},
    g_e[kVectors] = {}, g_alpha[kVectors] = {}, g_beta[kVectors] = {};
  for (size_t i = 0; i < padded; i += kPointsPerStep) {
    LaneTerms<V> terms[kVectors];
    V vn[kVectors], vd[kVectors];
#pragma GCC unroll 4
    for (int h = 0; h < kVectors; ++h) {
      const size_t j = i + h * kLanes;
      V vl, vw;
      std::memcpy(&vn[h], ln_n + j, sizeof(V));
      std::memcpy(&vd[h], ln_d + j, sizeof(V));
      std::memcpy(&vl, ln_l + j, sizeof(V));
      std::memcpy(&vw, weight + j, sizeof(V));
      ComputeLaneTerms<V>(a, b, e, alpha, beta, d, vn[h], vd[h], vl, vw,
                          &terms[h]);
    }
#pragma GCC unroll 4
    for (int h = 0; h < kVectors; ++h) {
      value[h] += terms[h].huber;
      g_a[h] += terms[h].w1;
      g_b[h] += terms[h].w2;
      g_e[h] += terms[h].w3;
      g_alpha[h] -= terms[h].w1 * vn[h];
      g_beta[h] -= terms[h].w2 * vd[h];
    }
  }
  auto total = [](const V* acc) {
    double sum = 0;
    for (int h = 0; h < kVectors; ++h) {
      for (int lane = 0; lane < kLanes; ++lane) sum += acc[h][lane];
    }
    return sum;
  };
  if (gradient != nullptr) {
    gradient[kParamA] = total(g_a);
    gradient[kParamB] = total(g_b);
    gradient[kParamE] = total(g_e);
    gradient[kParamAlpha] = total(g_alpha);
    gradient[kParamBeta] = total(g_beta);
  }
  return total(value);
}

#if HLAB_ANALYSIS_AVX2_KERNEL
__attribute__((target("arch=x86-64-v3"))) double EvaluateAvx2(
    const double* ln_n, const double* ln_d, const double* ln_l,
    const double* weight, size_t padded, double delta, const double* x,
    double* gradient) {
  return EvaluateLanes<internal::Vec4>(ln_n, ln_d, ln_l, weight, padded, delta,
                                       x, gradient);
}

bool CpuHasAvx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

}  // namespace

// Points go through internal/fast_math.h's branch-free exp and log in
// vectors: four lanes with AVX2 and FMA, two otherwise (the last bits of the
// result differ between the two kernels). Arrays are padded with points of
// weight 0.
double HuberLogObjective::Evaluate(const double* x, double* gradient) const {
#if HLAB_ANALYSIS_AVX2_KERNEL
  if (CpuHasAvx2()) {
    return EvaluateAvx2(log_n_.data(), log_d_.data(), log_loss_.data(),
                        weight_.data(), log_n_.size(), delta_, x, gradient);
  }
#endif
  return EvaluatePortable(x, gradient);
}

double HuberLogObjective::EvaluatePortable(const double* x,
                                           double* gradient) const {
  return EvaluateLanes<internal::Vec2>(log_n_.data(), log_d_.data(),
                                       log_loss_.data(), weight_.data(),
                                       log_n_.size(), delta_, x, gradient);
}

std::vector<double> HuberLogObjective::Residuals(const double* x) const {
  const LogPowerLaw law = FromVector(x);
  std::vector<double> r(num_points_);
  for (size_t i = 0; i < r.size(); ++i) {
    const double t1 = law.a - law.alpha * log_n_[i];
    const double t2 = law.b - law.beta * log_d_[i];
    const double m = std::max({t1, t2, law.e});
    r[i] = m +
           std::log(std::exp(t1 - m) + std::exp(t2 - m) + std::exp(law.e - m)) -
           log_loss_[i];
  }
  return r;
}

}  // namespace hlab::analysis
