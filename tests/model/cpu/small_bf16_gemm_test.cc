// Tests of SmallBf16Gemm (model/cpu/small_bf16_gemm.h): every
// transpose combination over sizes with tails in m, n and k (odd k pads a
// pair with zero), alpha and beta, C not read when beta is 0, and C's
// padding left alone; against an fp64 product of the operands rounded to
// bf16 where the CPU runs the bf16 kernel, of the fp32 operands elsewhere.
// The same checks for the GEMMs of model/cpu/blas.h: oneDNN's bf16
// GEMM (alpha != 1 takes its own path on AMX CPUs) and the fp32 GEMM on
// both sides of its OpenBLAS / oneDNN size threshold.
#include "model/cpu/small_bf16_gemm.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/cpu/blas.h"

namespace hlab::model::internal {
namespace {

// x rounded to the nearest bf16 (ties to even), as vcvtne2ps2bf16 rounds.
float RoundToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float y;
  std::memcpy(&y, &u, sizeof(y));
  return y;
}

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

// max over C of |C - want| / (|alpha| sum_p |a b| + |beta c0|): the error
// relative to the magnitudes summed, so fp32 accumulation sits near 1e-7.
// Columns of C past n (its padding) must keep their values.
// gemm(a, lda, b, ldb, out, ldc) computes C for the case c.
template <typename Fn>
double ScaledError(const Case& c, std::mt19937& rng, bool bf16_operands,
                   const Fn& gemm) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 5;
  const int64_t ldc = c.n + 2;
  std::vector<float> a((c.ta ? c.k : c.m) * lda), b((c.tb ? c.n : c.k) * ldb);
  std::vector<float> out(c.m * ldc);
  for (float& x : a) x = uniform(rng);
  for (float& x : b) x = uniform(rng);
  for (float& x : out) x = uniform(rng);
  const std::vector<float> before = out;
  if (c.beta == 0.0f) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) out[i * ldc + j] = NAN;
    }
  }
  gemm(a.data(), lda, b.data(), ldb, out.data(), ldc);
  const auto op = [&](float x) { return bf16_operands ? RoundToBf16(x) : x; };
  double worst = 0;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double x = op(c.ta ? a[p * lda + i] : a[i * lda + p]);
        const double y = op(c.tb ? b[j * ldb + p] : b[p * ldb + j]);
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      const double c0 = before[i * ldc + j];
      const double want = c.alpha * sum + c.beta * c0;
      const double scale =
          std::fabs(c.alpha) * magnitude + std::fabs(c.beta * c0) + 1e-30;
      const double err = std::fabs(out[i * ldc + j] - want) / scale;
      if (!(err <= worst)) worst = std::isfinite(err) ? err : INFINITY;
    }
    for (int64_t j = c.n; j < ldc; ++j) {
      if (out[i * ldc + j] != before[i * ldc + j]) return INFINITY;
    }
  }
  return worst;
}

double ScaledError(const Case& c, std::mt19937& rng, bool bf16_operands) {
  SmallBf16Gemm gemm;
  return ScaledError(c, rng, bf16_operands,
                     [&](const float* a, int64_t lda, const float* b,
                         int64_t ldb, float* out, int64_t ldc) {
                       gemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a, lda, b, ldb,
                            c.beta, out, ldc);
                     });
}

// x's bits as bf16, after rounding.
std::vector<Bf16> ToBf16(const std::vector<float>& x) {
  std::vector<Bf16> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float r = RoundToBf16(x[i]);
    uint32_t u;
    std::memcpy(&u, &r, sizeof(u));
    out[i].bits = static_cast<uint16_t>(u >> 16);
  }
  return out;
}

TEST(SmallBf16GemmTest, MatchesProductOfRoundedOperands) {
  if (!BlasAvailable<float>()) GTEST_SKIP() << "no fp32 BLAS in this process";
  const bool bf16 = SmallBf16GemmAvailable();
  // fp32 sums of k <= 128 products: ~1e-7 of the magnitudes summed.
  const double tolerance = 2e-6;
  std::mt19937 rng(7);
  const int64_t sizes[] = {1, 2, 5, 6, 7, 13, 16, 17, 31, 32, 33, 64, 65, 128};
  int cases = 0;
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const int64_t m : sizes) {
        for (const int64_t n : sizes) {
          for (const int64_t k : sizes) {
            // A third of the grid, and every case of the kernels' shapes.
            if ((m * 7 + n * 3 + k) % 3 != 0 && m != 16 && n != 64) continue;
            const float beta = k % 2 == 1 ? 0.0f : -1.25f;
            const Case c{ta, tb, m, n, k, 0.75f, beta};
            const double err = ScaledError(c, rng, bf16);
            ASSERT_LT(err, tolerance) << "ta " << ta << " tb " << tb << " m "
                                      << m << " n " << n << " k " << k;
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 1000);
}

// The operands do round: a product of values bf16 cannot hold differs from
// the fp32 one by bf16's relative step (2^-8) where the kernel runs.
TEST(SmallBf16GemmTest, RoundsOperandsToBf16) {
  if (!BlasAvailable<float>()) GTEST_SKIP() << "no fp32 BLAS in this process";
  const float a = 1.0f + 1.0f / 512;  // halfway: rounds to even, 1.0
  const float b = 1.0f;
  float c = 0;
  SmallBf16Gemm gemm;
  gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, SmallBf16GemmAvailable() ? 1.0f : a);
}

TEST(SmallBf16GemmTest, EmptyProductScalesC) {
  if (!BlasAvailable<float>()) GTEST_SKIP() << "no fp32 BLAS in this process";
  std::vector<float> c = {1.0f, 2.0f, 3.0f, 4.0f};
  const float unused = 0;
  SmallBf16Gemm gemm;
  gemm(false, false, 2, 2, 0, 1.0f, &unused, 1, &unused, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
}

// The attention kernels' shapes (128 x 256 x 64 blocks and their tails),
// every transpose, alpha 1 and not, beta 0, 1 and other.
TEST(BlasGemmTest, Bf16GemmMatchesProductOfItsOperands) {
  if (!BlasAvailable<Bf16>()) GTEST_SKIP() << "no oneDNN bf16 GEMM here";
  const double tolerance = 2e-6;
  std::mt19937 rng(11);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const auto& [m, n, k] :
           std::vector<std::array<int64_t, 3>>{{128, 256, 64},
                                               {128, 64, 256},
                                               {256, 64, 128},
                                               {37, 70, 64},
                                               {5, 3, 9}}) {
        for (const float alpha : {1.0f, 0.125f}) {
          for (const float beta : {0.0f, 1.0f, -1.25f}) {
            const Case c{ta, tb, m, n, k, alpha, beta};
            const double err =
                ScaledError(c, rng, /*bf16_operands=*/true,
                            [&](const float* a, int64_t lda, const float* b,
                                int64_t ldb, float* out, int64_t ldc) {
                              const int64_t a_size = (ta ? k : m) * lda;
                              const int64_t b_size = (tb ? n : k) * ldb;
                              const std::vector<Bf16> a16 =
                                  ToBf16(std::vector<float>(a, a + a_size));
                              const std::vector<Bf16> b16 =
                                  ToBf16(std::vector<float>(b, b + b_size));
                              Gemm(ta, tb, m, n, k, alpha, a16.data(), lda,
                                   b16.data(), ldb, beta, out, ldc);
                            });
            EXPECT_LT(err, tolerance)
                << "ta " << ta << " tb " << tb << " m " << m << " n " << n
                << " k " << k << " alpha " << alpha << " beta " << beta;
          }
        }
      }
    }
  }
}

// Below 2^20 multiply-adds OpenBLAS, above oneDNN (where present).
TEST(BlasGemmTest, Fp32GemmMatchesTheProduct) {
  if (!BlasAvailable<float>()) GTEST_SKIP() << "no fp32 BLAS in this process";
  const double tolerance = 2e-6;
  std::mt19937 rng(12);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
               {128, 256, 64}, {300, 70, 100}, {16, 64, 64}, {5, 3, 9}}) {
        for (const float beta : {0.0f, 1.0f}) {
          const Case c{ta, tb, m, n, k, 0.5f, beta};
          const double err = ScaledError(
              c, rng, /*bf16_operands=*/false,
              [&](const float* a, int64_t lda, const float* b, int64_t ldb,
                  float* out, int64_t ldc) {
                Gemm(ta, tb, m, n, k, c.alpha, a, lda, b, ldb, beta, out, ldc);
              });
          EXPECT_LT(err, tolerance) << "ta " << ta << " tb " << tb << " m " << m
                                    << " n " << n << " k " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace hlab::model::internal
