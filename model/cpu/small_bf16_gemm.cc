#include "model/cpu/small_bf16_gemm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/cpu/blas.h"
#include "model/cpu/vec_math.h"

namespace hlab::model::internal {

bool SmallBf16GemmAvailable() { return CpuHasAvx512Bf16(); }

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12's own intrinsics (set1, maskz loads) pass an undefined vector as
// their unused source and trip -Wmaybe-uninitialized where they inline.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {

// Layouts. A "pair" is two bf16 values of one row or column at k = 2p and
// 2p + 1 in one 32-bit word (the low half holds 2p), zero past k: the
// operand vdpbf16ps multiplies. For C = A B,
//   A's pair (i, p) sits at a[i * a_row + p * a_pair] (rows of A as pairs,
//     or A^T's rows interleaved: either stride may be 1);
//   B's pairs are row p of a (kp x npad) block, npad = n rounded up to 16:
//     b[p * npad + j] = (B[2p][j], B[2p + 1][j]), zero for j >= n.
// A tile of R rows by V 16-column vectors keeps its R x V accumulators in
// registers (R = 6, V = 4 uses 24 of the 32) and walks the pairs once.

#define HLAB_BF16_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr int kTileRows = 6;

int64_t RoundUp16(int64_t x) { return (x + 15) / 16 * 16; }

// Rows [0, rows) of x (rows x k floats, row stride ldx) as pairs:
// out[i * ldo + p], p < (k + 1) / 2.
HLAB_BF16_TARGET void PackRowPairs(const float* x, int64_t ldx, int64_t rows,
                                   int64_t k, uint32_t* out, int64_t ldo) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = x + i * ldx;
    uint32_t* dst = out + i * ldo;
    int64_t c = 0;
    for (; c + 32 <= k; c += 32) {
      _mm512_storeu_si512(
          dst + c / 2,
          reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(
              _mm512_loadu_ps(src + c + 16), _mm512_loadu_ps(src + c))));
    }
    if (c < k) {
      const __m512 lo = _mm512_maskz_loadu_ps(TailMask16(k - c), src + c);
      const __m512 hi =
          _mm512_maskz_loadu_ps(TailMask16(k - c - 16), src + c + 16);
      // 32 bf16 in order: lo's 16, then hi's.
      const __m512i v = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
      _mm512_mask_storeu_epi32(dst + c / 2, TailMask16((k - c + 1) / 2), v);
    }
  }
}

// Rows 2p and 2p + 1 of x (k x n floats, row stride ldx) interleaved:
// out[p * npad + j] = (x[2p][j], x[2p + 1][j]), zero for j in [n, npad).
HLAB_BF16_TARGET void PackColumnPairs(const float* x, int64_t ldx, int64_t k,
                                      int64_t n, int64_t npad, uint32_t* out) {
  // Word 2i of the result takes word i (row 2p), word 2i + 1 takes word
  // 16 + i (row 2p + 1).
  const __m512i interleave = _mm512_set_epi16(
      31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
      6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t p = 0; 2 * p < k; ++p) {
    const float* r0 = x + 2 * p * ldx;
    const float* r1 = r0 + ldx;
    const bool second = 2 * p + 1 < k;
    for (int64_t j = 0; j < npad; j += 16) {
      const __mmask16 in = TailMask16(n - j);
      const __m512 x0 = _mm512_maskz_loadu_ps(in, r0 + j);
      const __m512 x1 =
          second ? _mm512_maskz_loadu_ps(in, r1 + j) : _mm512_setzero_ps();
      const __m512i v = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0));
      _mm512_storeu_si512(out + p * npad + j,
                          _mm512_permutexvar_epi16(interleave, v));
    }
  }
}

// B given transposed (x: n x k floats, row stride ldx) as B's pairs:
// out[p * npad + j] = (x[j][2p], x[j][2p + 1]), zero for j in [n, npad).
// Per 16 x 16 block of pairs: 16 rows of x converted to pairs in registers,
// then transposed there (4 x 4 transposes within the 128-bit lanes, then
// lanes across vectors).
HLAB_BF16_TARGET void PackTransposedPairs(const float* x, int64_t ldx,
                                          int64_t n, int64_t k, int64_t npad,
                                          uint32_t* out) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t j0 = 0; j0 < npad; j0 += 16) {
    for (int64_t p0 = 0; p0 < kp; p0 += 16) {
      const int64_t c0 = 2 * p0;
      const __mmask16 lo_in = TailMask16(k - c0),
                      hi_in = TailMask16(k - c0 - 16);
      __m512i r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        if (j0 + i < n) {
          const float* src = x + (j0 + i) * ldx + c0;
          r[i] = reinterpret_cast<__m512i>(
              _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi_in, src + 16),
                                  _mm512_maskz_loadu_ps(lo_in, src)));
        } else {
          r[i] = _mm512_setzero_si512();
        }
      }
      __m512i t[16];
#pragma GCC unroll 4
      for (int g = 0; g < 16; g += 4) {
        const __m512i t0 = _mm512_unpacklo_epi32(r[g], r[g + 1]);
        const __m512i t1 = _mm512_unpackhi_epi32(r[g], r[g + 1]);
        const __m512i t2 = _mm512_unpacklo_epi32(r[g + 2], r[g + 3]);
        const __m512i t3 = _mm512_unpackhi_epi32(r[g + 2], r[g + 3]);
        t[g] = _mm512_unpacklo_epi64(t0, t2);      // pair 4L of lane L
        t[g + 1] = _mm512_unpackhi_epi64(t0, t2);  // 4L + 1
        t[g + 2] = _mm512_unpacklo_epi64(t1, t3);  // 4L + 2
        t[g + 3] = _mm512_unpackhi_epi64(t1, t3);  // 4L + 3
      }
      // Pair 4L + c of the 16 rows: lane L of t[c], t[4 + c], t[8 + c],
      // t[12 + c].
      const int64_t pairs = std::min<int64_t>(16, kp - p0);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i v0 = _mm512_shuffle_i32x4(t[c], t[4 + c], 0x44);
        const __m512i v1 = _mm512_shuffle_i32x4(t[c], t[4 + c], 0xee);
        const __m512i w0 = _mm512_shuffle_i32x4(t[8 + c], t[12 + c], 0x44);
        const __m512i w1 = _mm512_shuffle_i32x4(t[8 + c], t[12 + c], 0xee);
        uint32_t* dst = out + (p0 + c) * npad + j0;
        if (c < pairs) {
          _mm512_storeu_si512(dst, _mm512_shuffle_i32x4(v0, w0, 0x88));
        }
        if (4 + c < pairs) {
          _mm512_storeu_si512(dst + 4 * npad,
                              _mm512_shuffle_i32x4(v0, w0, 0xdd));
        }
        if (8 + c < pairs) {
          _mm512_storeu_si512(dst + 8 * npad,
                              _mm512_shuffle_i32x4(v1, w1, 0x88));
        }
        if (12 + c < pairs) {
          _mm512_storeu_si512(dst + 12 * npad,
                              _mm512_shuffle_i32x4(v1, w1, 0xdd));
        }
      }
    }
  }
}

// C rows [0, R), columns [0, 16 V) (the last vector masked by `last`) =
// alpha sum_p A(i, p) . B(p, j) + beta C.
template <int R, int V>
HLAB_BF16_TARGET void Tile(const uint32_t* a, int64_t a_row, int64_t a_pair,
                           const uint32_t* b, int64_t npad, int64_t kp,
                           float alpha, float beta, float* c, int64_t ldc,
                           __mmask16 last) {
  __m512 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      bv[v] =
          reinterpret_cast<__m512bh>(_mm512_loadu_si512(b + p * npad + 16 * v));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh av = reinterpret_cast<__m512bh>(
          _mm512_set1_epi32(static_cast<int>(a[r * a_row + p * a_pair])));
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
      }
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __mmask16 in = v == V - 1 ? last : __mmask16(0xffff);
      float* cp = c + r * ldc + 16 * v;
      __m512 y = _mm512_mul_ps(acc[r][v], va);
      if (beta != 0.0f) {
        y = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(in, cp), y);
      }
      _mm512_mask_storeu_ps(cp, in, y);
    }
  }
}

using TileFn = void (*)(const uint32_t*, int64_t, int64_t, const uint32_t*,
                        int64_t, int64_t, float, float, float*, int64_t,
                        __mmask16);

template <int R>
constexpr TileFn kTilesOfRows[4] = {Tile<R, 1>, Tile<R, 2>, Tile<R, 3>,
                                    Tile<R, 4>};
constexpr const TileFn* kTiles[kTileRows] = {kTilesOfRows<1>, kTilesOfRows<2>,
                                             kTilesOfRows<3>, kTilesOfRows<4>,
                                             kTilesOfRows<5>, kTilesOfRows<6>};

}  // namespace

void SmallBf16Gemm::operator()(bool ta, bool tb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float* a,
                               int64_t lda, const float* b, int64_t ldb,
                               float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || !SmallBf16GemmAvailable()) {
    Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int64_t kp = (k + 1) / 2, npad = RoundUp16(n);
  int64_t a_row = kp, a_pair = 1;
  if (!ta) {
    a_.resize(m * kp);
    PackRowPairs(a, lda, m, k, a_.data(), kp);
  } else {
    const int64_t mpad = RoundUp16(m);
    a_.resize(kp * mpad);
    PackColumnPairs(a, lda, k, m, mpad, a_.data());
    a_row = 1;
    a_pair = mpad;
  }
  b_.resize(kp * npad);
  if (!tb) {
    PackColumnPairs(b, ldb, k, n, npad, b_.data());
  } else {
    PackTransposedPairs(b, ldb, n, k, npad, b_.data());
  }
  for (int64_t j = 0; j < n; j += 64) {
    const int64_t vectors = std::min<int64_t>(4, (n - j + 15) / 16);
    const __mmask16 last = TailMask16(n - j - 16 * (vectors - 1));
    for (int64_t i = 0; i < m; i += kTileRows) {
      const int64_t rows = std::min<int64_t>(kTileRows, m - i);
      kTiles[rows - 1][vectors - 1](a_.data() + i * a_row, a_row, a_pair,
                                    b_.data() + j, npad, kp, alpha, beta,
                                    c + i * ldc + j, ldc, last);
    }
  }
}

#pragma GCC diagnostic pop

#else  // not x86-64 with GCC: the fp32 GEMM.

void SmallBf16Gemm::operator()(bool ta, bool tb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float* a,
                               int64_t lda, const float* b, int64_t ldb,
                               float beta, float* c, int64_t ldc) {
  Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#endif

}  // namespace hlab::model::internal
