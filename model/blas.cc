#include "model/internal/blas.h"
#include <dlfcn.h>

#include <cstdint>
#include <type_traits>

namespace hlab::model::internal {
namespace {

// GEMM entry points, looked up once in the running process.

// cblas_?gemm (LP64, as Debian's OpenBLAS): order, transa, transb, M, N, K,
// alpha, A, lda, B, ldb, beta, C, ldc.
template <typename T>
using CblasGemmFn = void (*)(int, int, int, int, int, int, T, const T*, int,
                             const T*, int, T, T*, int);
// dnnl_gemm_bf16bf16f32 (row-major): transa, transb, M, N, K, alpha, A, lda,
// B, ldb, beta, C, ldc; returns dnnl_status_t (0 = success).
using DnnlBf16GemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float,
                               const uint16_t*, int64_t, const uint16_t*,
                               int64_t, float, float*, int64_t);

constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;

template <typename Fn>
Fn Lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

CblasGemmFn<float> Sgemm() {
  static const auto fn = Lookup<CblasGemmFn<float>>("cblas_sgemm");
  return fn;
}
CblasGemmFn<double> Dgemm() {
  static const auto fn = Lookup<CblasGemmFn<double>>("cblas_dgemm");
  return fn;
}
DnnlBf16GemmFn Bf16Gemm() {
  static const auto fn = Lookup<DnnlBf16GemmFn>("dnnl_gemm_bf16bf16f32");
  return fn;
}

}  // namespace

template <typename T>
bool BlasAvailable() {
  if constexpr (std::is_same_v<T, float>) return Sgemm() != nullptr;
  if constexpr (std::is_same_v<T, double>) return Dgemm() != nullptr;
  if constexpr (std::is_same_v<T, Bf16>) return Bf16Gemm() != nullptr;
  return false;
}
template bool BlasAvailable<float>();
template bool BlasAvailable<double>();
template bool BlasAvailable<Bf16>();

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
          float* c, int64_t ldc) {
  Sgemm()(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans,
          tb ? kCblasTrans : kCblasNoTrans, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(k), alpha, a,
          static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
          static_cast<int>(ldc));
}
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb,
          double beta, double* c, int64_t ldc) {
  Dgemm()(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans,
          tb ? kCblasTrans : kCblasNoTrans, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(k), alpha, a,
          static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
          static_cast<int>(ldc));
}
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const Bf16* a, int64_t lda, const Bf16* b, int64_t ldb, float beta,
          float* c, int64_t ldc) {
  Bf16Gemm()(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha,
             reinterpret_cast<const uint16_t*>(a), lda,
             reinterpret_cast<const uint16_t*>(b), ldb, beta, c, ldc);
}

void UseOneThreadPool() {
  static const bool done = [] {
    using SetFn = void (*)(int);
    const auto set = Lookup<SetFn>("openblas_set_num_threads");
    if (set != nullptr) set(1);
    return true;
  }();
  (void)done;
}

}  // namespace hlab::model::internal
