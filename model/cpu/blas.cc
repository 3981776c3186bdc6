#include "model/cpu/blas.h"
#include <dlfcn.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <type_traits>
#include <vector>

namespace hlab::model::internal {
namespace {

// GEMM entry points, looked up once in the running process.

// cblas_?gemm (LP64, as Debian's OpenBLAS): order, transa, transb, M, N, K,
// alpha, A, lda, B, ldb, beta, C, ldc.
template <typename T>
using CblasGemmFn = void (*)(int, int, int, int, int, int, T, const T*, int,
                             const T*, int, T, T*, int);
// dnnl_gemm_bf16bf16f32 (row-major): transa, transb, M, N, K, alpha, A,
// lda, B, ldb, beta, C, ldc; returns dnnl_status_t (0 = success).
template <typename In>
using DnnlGemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float,
                           const In*, int64_t, const In*, int64_t, float,
                           float*, int64_t);

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
DnnlGemmFn<uint16_t> Bf16Gemm() {
  static const auto fn = Lookup<DnnlGemmFn<uint16_t>>("dnnl_gemm_bf16bf16f32");
  return fn;
}

// The OpenMP runtime's entry points (libgomp, which LibTorch and oneDNN
// load).
struct OpenMp {
  int (*in_parallel)() = Lookup<int (*)()>("omp_in_parallel");
  int (*max_threads)() = Lookup<int (*)()>("omp_get_max_threads");
  void (*set_threads)(int) = Lookup<void (*)(int)>("omp_set_num_threads");
  bool ok() const {
    return in_parallel != nullptr && max_threads != nullptr &&
           set_threads != nullptr;
  }
};
const OpenMp& Omp() {
  static const OpenMp omp;
  return omp;
}

// Runs fn with oneDNN on one thread. oneDNN threads a call made outside an
// OpenMP parallel region over omp_get_max_threads() threads, and may then
// split the sum over k among them, so its result would depend on the
// thread count; inside a region it runs on the calling thread.
template <typename Fn>
void OnOneDnnlThread(const Fn& fn) {
  const OpenMp& omp = Omp();
  if (!omp.ok()) {
    fn();
    return;
  }
  const int threads = omp.in_parallel() ? 1 : omp.max_threads();
  if (threads > 1) omp.set_threads(1);
  fn();
  if (threads > 1) omp.set_threads(threads);
}

// Whether the CPU has AMX-BF16 (CPUID leaf 7, EDX bit 22), which oneDNN
// 2.6's bf16 GEMM uses where the OS allows it. There it takes alpha != 1 on
// a path 5-9x slower (one thread, 128 x 256 x 64 NT: 23 against 166
// GFLOP/s; docs/performance.md).
bool AmxBf16() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx >> 22) & 1u;
#else
  return false;
#endif
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
  // Not oneDNN's dnnl_sgemm, though it ran these shapes 5-20% faster: in
  // 2.6 it corrupted the heap now and then (hlab-train aborted in 5 of 24
  // runs, in free(); 0 of 24 with OpenBLAS; docs/performance.md).
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
  const auto gemm = [&](float gemm_alpha, float gemm_beta, float* out,
                        int64_t ldo) {
    Bf16Gemm()(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, gemm_alpha,
               reinterpret_cast<const uint16_t*>(a), lda,
               reinterpret_cast<const uint16_t*>(b), ldb, gemm_beta, out, ldo);
  };
  static const bool amx = AmxBf16();
  if (alpha == 1.0f || !amx || m <= 0 || n <= 0) {
    OnOneDnnlThread([&] { gemm(alpha, beta, c, ldc); });
    return;
  }
  // alpha applied after an alpha = 1 product: on AMX, oneDNN 2.6 runs
  // alpha != 1 on a slow path.
  if (beta == 0.0f) {
    OnOneDnnlThread([&] { gemm(1.0f, 0.0f, c, ldc); });
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] *= alpha;
    }
    return;
  }
  thread_local std::vector<float> product;
  product.resize(m * n);
  OnOneDnnlThread([&] { gemm(1.0f, 0.0f, product.data(), n); });
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    const float* p = product.data() + i * n;
    for (int64_t j = 0; j < n; ++j) row[j] = alpha * p[j] + beta * row[j];
  }
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
