#include "train/internal/adamw_kernel.h"

#include <cmath>

namespace hlab::train::internal {
namespace {

// The loop bodies are written once and compiled per vector target (GCC's
// target_clones picks one at load time): AVX-512 and AVX2 with FMA, where
// std::fma is one instruction, and the baseline, where it is a libm call
// (the same value).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HLAB_ADAMW_CLONES \
  __attribute__((target_clones("avx512f", "arch=haswell", "default")))
#else
#define HLAB_ADAMW_CLONES
#endif

template <typename T>
inline __attribute__((always_inline)) void UpdateImpl(T* p, const T* g, T* m,
                                                      T* v, int64_t n,
                                                      const AdamWScalars& s) {
  const T decay = static_cast<T>(s.decay);
  const T b1 = static_cast<T>(s.beta1), a1 = static_cast<T>(s.one_minus_beta1);
  const T b2 = static_cast<T>(s.beta2), a2 = static_cast<T>(s.one_minus_beta2);
  const T sb2 = static_cast<T>(s.sqrt_bias_correction2);
  const T eps = static_cast<T>(s.eps);
  const T step = static_cast<T>(s.neg_step_size);
  const bool decays = s.decay != 1;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T pi = decays ? p[i] * decay : p[i];
    const T mi = std::fma(gi, a1, m[i] * b1);
    const T vi = std::fma(a2 * gi, gi, v[i] * b2);
    const T denom = std::sqrt(vi) / sb2 + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + (step * mi) / denom;
  }
}

HLAB_ADAMW_CLONES void UpdateFloat(float* p, const float* g, float* m, float* v,
                                   int64_t n, const AdamWScalars& s) {
  UpdateImpl(p, g, m, v, n, s);
}

HLAB_ADAMW_CLONES void UpdateDouble(double* p, const double* g, double* m,
                                    double* v, int64_t n,
                                    const AdamWScalars& s) {
  UpdateImpl(p, g, m, v, n, s);
}

}  // namespace

AdamWScalars MakeAdamWScalars(double lr, double beta1, double beta2, double eps,
                              double weight_decay, int64_t step) {
  AdamWScalars s;
  s.decay = weight_decay != 0 ? 1 - lr * weight_decay : 1;
  s.beta1 = beta1;
  s.one_minus_beta1 = 1 - beta1;
  s.beta2 = beta2;
  s.one_minus_beta2 = 1 - beta2;
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  s.sqrt_bias_correction2 = std::sqrt(bias_correction2);
  s.eps = eps;
  s.neg_step_size = -(lr / bias_correction1);
  return s;
}

void AdamWUpdate(float* p, const float* g, float* m, float* v, int64_t n,
                 const AdamWScalars& s) {
  UpdateFloat(p, g, m, v, n, s);
}

void AdamWUpdate(double* p, const double* g, double* m, double* v, int64_t n,
                 const AdamWScalars& s) {
  UpdateDouble(p, g, m, v, n, s);
}

void Scale(float* x, int64_t n, double c) {
  const float f = static_cast<float>(c);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

void Scale(double* x, int64_t n, double c) {
  for (int64_t i = 0; i < n; ++i) x[i] *= c;
}

}  // namespace hlab::train::internal
