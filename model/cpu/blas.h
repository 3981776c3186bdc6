// Row-major GEMM on raw memory through the BLAS entry points already loaded
// in the process (LibTorch loads them on Debian): OpenBLAS's cblas_sgemm and
// cblas_dgemm, and oneDNN's dnnl_gemm_bf16bf16f32 (bf16 inputs, fp32
// output). Not oneDNN's dnnl_sgemm: faster, but it corrupted the heap now
// and then (docs/performance.md). For model/layers/linear.h and the fused
// kernel loops of model/, which call many small GEMMs where an ATen op's
// dispatch would cost more than the product. No LibTorch here. Private to
// model/.
//
// Determinism: every call (after UseOneThreadPool()) runs on the calling
// thread, so its result depends on its arguments alone (the same shape
// gives the same bits), not on the thread count. It may differ in the
// last bits from the same rows computed in a call of another shape: callers
// that split a product fix the split by the shape (model/layers/linear.cc).
//
// Thread-safety: thread-safe (the entry points are looked up once). Before
// a parallel region of Gemm calls, call UseOneThreadPool().
//
//   if (internal::BlasAvailable<float>()) {
//     // C (m x n) = A (m x k) * B^T (B: n x k) + 0 * C
//     internal::Gemm(false, true, m, n, k, 1.0f, a, k, b, k, 0.0f, c, n);
//   }
#ifndef HLAB_MODEL_CPU_BLAS_H_
#define HLAB_MODEL_CPU_BLAS_H_

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
// stored matrices. Requires BlasAvailable<T>(). Called from several
// threads at once, call UseOneThreadPool() first.
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
          float* c, int64_t ldc);
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb,
          double beta, double* c, int64_t ldc);
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta,
          float* c, int64_t ldc);

// Makes OpenBLAS (the pthreads build Debian's LibTorch uses for fp32
// matmuls) single-threaded for the rest of the process; nothing when the
// BLAS is not OpenBLAS. hlab's CPU matmuls (model/layers/linear.h, the
// attention and linear-attention kernels) split their work over LibTorch's
// OpenMP intra-op threads and call the BLAS from each of them: OpenBLAS's own
// thread pool beside OpenMP's would oversubscribe the cores, and its
// waiting threads spin. (Restoring the count after each call, as an
// earlier guard did, woke that pool every time: a swa-128 step at T=8192 on
// 2 threads took 3.4-3.8 s that way and 3.0 s with OpenBLAS held to one
// thread, docs/performance.md.) Call before a parallel region that calls
// Gemm; cheap after the first call. Thread-safe.
void UseOneThreadPool();

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_BLAS_H_
