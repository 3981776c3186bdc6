#include "model/cpu/chunk_rows.h"

#include <cstdint>

#include <ATen/Dispatch.h>
#include <torch/torch.h>

#include "model/cpu/blas.h"
#include "model/cpu/fused_elementwise.h"
#include "model/cpu/raw_tensor.h"
#include "model/cpu/vec_math.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model::internal {

bool FusedKernelsTake(std::initializer_list<torch::Tensor> inputs) {
  for (const torch::Tensor& t : inputs) {
    if (!RawLoopsTake(t)) return false;
  }
  return KernelComputeDtype(inputs) == torch::kFloat64 ? BlasAvailable<double>()
                                                       : BlasAvailable<float>();
}

Rows RowsOf(const torch::Tensor& t, int64_t heads) {
  return {t.data_ptr(), t.scalar_type(), t.stride(0),
          t.stride(1),  t.stride(2),     heads / t.size(1)};
}

torch::Tensor RowsReadable(const torch::Tensor& t) {
  return t.stride(-1) == 1 ? t : t.contiguous();
}

template <typename T>
void LoadRows(const Rows& src, int64_t b, int64_t h, int64_t t0, int64_t rows,
              int64_t width, T* dst) {
  const int64_t base = b * src.sb + (h / src.group) * src.sh + t0 * src.st;
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, src.dtype, "LoadRows", [&] {
    const scalar_t* p = static_cast<const scalar_t*>(src.data) + base;
    for (int64_t r = 0; r < rows; ++r) {
      LoadRow(p + r * src.st, dst + r * width, width);
    }
  });
}

template <typename T>
void StoreRowsBthd(const T* src, int64_t rows, int64_t width,
                   const torch::Tensor& out, int64_t b, int64_t h, int64_t t0) {
  const int64_t st = out.size(2) * width;
  const int64_t base = (b * out.size(1) + t0) * st + h * width;
  AT_DISPATCH_FLOATING_TYPES_AND(
      at::kBFloat16, out.scalar_type(), "StoreRowsBthd", [&] {
        scalar_t* p = out.data_ptr<scalar_t>() + base;
        for (int64_t r = 0; r < rows; ++r) {
          StoreRow(src + r * width, p + r * st, width);
        }
      });
}

template <typename T>
RowBlock<T> ViewOrLoadRows(const Rows& src, int64_t b, int64_t h, int64_t t0,
                           int64_t rows, int64_t width, T* buf) {
  if (src.dtype == torch::CppTypeToScalarType<T>::value) {
    const int64_t base = b * src.sb + (h / src.group) * src.sh + t0 * src.st;
    return {static_cast<const T*>(src.data) + base, src.st};
  }
  LoadRows(src, b, h, t0, rows, width, buf);
  return {buf, width};
}

template <typename T>
T* RowsBthdIfDtype(const torch::Tensor& out, int64_t b, int64_t h, int64_t t0,
                   int64_t width) {
  if (out.scalar_type() != torch::CppTypeToScalarType<T>::value) {
    return nullptr;
  }
  const int64_t st = out.size(2) * width;
  return out.data_ptr<T>() + (b * out.size(1) + t0) * st + h * width;
}

template RowBlock<float> ViewOrLoadRows<float>(const Rows&, int64_t, int64_t,
                                               int64_t, int64_t, int64_t,
                                               float*);
template RowBlock<double> ViewOrLoadRows<double>(const Rows&, int64_t, int64_t,
                                                 int64_t, int64_t, int64_t,
                                                 double*);
template float* RowsBthdIfDtype<float>(const torch::Tensor&, int64_t, int64_t,
                                       int64_t, int64_t);
template double* RowsBthdIfDtype<double>(const torch::Tensor&, int64_t, int64_t,
                                         int64_t, int64_t);
template void LoadRows<float>(const Rows&, int64_t, int64_t, int64_t, int64_t,
                              int64_t, float*);
template void LoadRows<double>(const Rows&, int64_t, int64_t, int64_t, int64_t,
                               int64_t, double*);
template void StoreRowsBthd<float>(const float*, int64_t, int64_t,
                                   const torch::Tensor&, int64_t, int64_t,
                                   int64_t);
template void StoreRowsBthd<double>(const double*, int64_t, int64_t,
                                    const torch::Tensor&, int64_t, int64_t,
                                    int64_t);

HLAB_VECTOR_CLONES void DecayRow(const float* cum, float ci, float* row,
                                 float* d, int64_t len) {
#pragma omp simd
  for (int64_t c = 0; c < len; ++c) {
    const float x = ExpNonPositive(ci - cum[c]);
    d[c] = x;
    row[c] *= x;
  }
}
void DecayRow(const double* cum, double ci, double* row, double* d,
              int64_t len) {
  for (int64_t c = 0; c < len; ++c) {
    d[c] = ExpNonPositive(ci - cum[c]);
    row[c] *= d[c];
  }
}

HLAB_VECTOR_CLONES float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}
double Dot(const double* a, const double* b, int64_t n) {
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

HLAB_VECTOR_CLONES void SiluRow(const float* x, float* s, float* sig,
                                int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = Sigmoid(x[i]);
    sig[i] = g;
    s[i] = x[i] * g;
  }
}
void SiluRow(const double* x, double* s, double* sig, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    sig[i] = Sigmoid(x[i]);
    s[i] = x[i] * sig[i];
  }
}

HLAB_VECTOR_CLONES void SiluGradRow(const float* x, const float* sig,
                                    const float* ds, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = ds[i] * sig[i] * (1.0f + x[i] * (1.0f - sig[i]));
  }
}
void SiluGradRow(const double* x, const double* sig, const double* ds,
                 double* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = ds[i] * sig[i] * (1.0 + x[i] * (1.0 - sig[i]));
  }
}

}  // namespace hlab::model::internal
