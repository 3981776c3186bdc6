// GEMMs of the small fp32 matrices inside the chunked linear-attention
// kernels (16 to 128 rows and columns) with their operands rounded to bf16
// and the products summed in fp32, through AVX512-BF16's pair dot product
// (vdpbf16ps): the precision the kernels' products get under bf16 autocast,
// as an autocast bmm of the same operands (or fla's Triton kernels) would
// give, at 1.3-1.9x the speed of OpenBLAS's fp32 GEMM on these shapes
// (docs/performance.md, "bf16 products in the chunked kernels").
// ChunkGemm picks it or the fp32 / fp64 GEMM of model/cpu/blas.h. No
// LibTorch here. Private to model/.
//
// Thread-safety: a SmallBf16Gemm or ChunkGemm holds packing buffers: one per
// thread.
//
//   internal::ChunkGemm<float> gemm(/*bf16_products=*/true);  // per thread
//   // C (m x n) = A (m x k) * B^T (B: n x k), A and B rounded to bf16
//   gemm(false, true, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
#ifndef HLAB_MODEL_CPU_SMALL_BF16_GEMM_H_
#define HLAB_MODEL_CPU_SMALL_BF16_GEMM_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "model/cpu/blas.h"

namespace hlab::model::internal {

// Whether SmallBf16Gemm runs its bf16 kernel here (AVX512-BF16 with
// AVX-512BW/VL); where it does not, it multiplies in fp32 instead.
bool SmallBf16GemmAvailable();

// Row-major C (m x n) = alpha op(A) op(B) + beta C, as Gemm in
// model/cpu/blas.h (ta / tb transpose the stored A / B; ld* are row
// strides), with every element of A and B rounded to bf16 (to nearest even)
// and the products accumulated in fp32. With beta == 0, C is not read. For
// any sizes; fastest when n is a multiple of 16. On CPUs without
// AVX512-BF16 it calls the fp32 Gemm (exact fp32 operands).
class SmallBf16Gemm {
 public:
  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float beta, float* c, int64_t ldc);

 private:
  // A and B as bf16 pairs along k (32-bit words).
  std::vector<uint32_t> a_, b_;
};

// The GEMM of a chunked kernel computing in T (float or double): with
// bf16_products (fp32 only) through SmallBf16Gemm, else Gemm. Requires
// BlasAvailable<T>().
template <typename T>
class ChunkGemm {
 public:
  explicit ChunkGemm(bool bf16_products)
      : bf16_(std::is_same_v<T, float> && bf16_products) {}

  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
                  const T* a, int64_t lda, const T* b, int64_t ldb, T beta,
                  T* c, int64_t ldc) {
    if constexpr (std::is_same_v<T, float>) {
      if (bf16_) {
        small_(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
      }
    }
    Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }

 private:
  bool bf16_;
  SmallBf16Gemm small_;
};

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_SMALL_BF16_GEMM_H_
