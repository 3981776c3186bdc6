// Row-major GEMM on raw memory through the BLAS entry points already loaded
// in the process (LibTorch loads them on Debian): OpenBLAS's cblas_sgemm and
// cblas_dgemm, and oneDNN's dnnl_gemm_bf16bf16f32 (bf16 inputs, fp32
// output). For the fused kernel loops of model/, which call many small
// GEMMs where an ATen op's dispatch would cost more than the product. No
// LibTorch here. Private to model/.
//
// Thread-safety: thread-safe (the entry points are looked up once). Inside
// a parallel region, keep OpenBLAS single-threaded (see
// model/attention_kernel.cc, SingleThreadedBlas) or give it small products.
//
//   if (internal::BlasAvailable<float>()) {
//     // C (m x n) = A (m x k) * B^T (B: n x k) + 0 * C
//     internal::Gemm(false, true, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
//   }
#ifndef HLAB_MODEL_INTERNAL_BLAS_H_
#define HLAB_MODEL_INTERNAL_BLAS_H_

#include <cstdint>
#include <type_traits>

namespace hlab::model::internal {

// A bfloat16 value (its bits), laid out as c10::BFloat16.
struct Bf16 {
  uint16_t bits;
};

// The accumulator type of an element type: double for double, else float.
template <typename T>
using AccumOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Whether Gemm for element type T (float, double or Bf16) can run here.
template <typename T>
bool BlasAvailable();

// Row-major C (m x n) = alpha op(A) op(B) + beta C, with op(A): m x k and
// op(B): k x n; ta / tb transpose the stored A / B; ld* are row strides of the
// stored matrices. Requires BlasAvailable<T>().
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
          float* c, int64_t ldc);
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb,
          double beta, double* c, int64_t ldc);
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta,
          float* c, int64_t ldc);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_INTERNAL_BLAS_H_
