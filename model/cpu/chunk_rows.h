// Row access and per-row vector loops shared by the fused kernels of model/:
// the chunked linear-attention kernels (model/kernels/scalar_gla_fused.cc,
// model/kernels/gated_delta_fused.cc), which walk each batch-head's sequence
// chunk by chunk and keep a chunk's rows in per-thread buffers, and the mixers'
// input passes (model/layers/gated_delta_inputs.cc,
// model/layers/mamba2_inputs.cc), which walk rows of a projection. Private to
// model/.
//
// Thread-safety: pure functions; the buffers are the caller's.
//
//   const internal::Rows q_rows = internal::RowsOf(q, heads);
//   internal::LoadRows(q_rows, b, h, t0, len, dk, buffer);  // len x dk
#ifndef HLAB_MODEL_CPU_CHUNK_ROWS_H_
#define HLAB_MODEL_CPU_CHUNK_ROWS_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include <ATen/Parallel.h>
#include <torch/types.h>

#include "model/cpu/blas.h"
#include "model/cpu/fused_elementwise.h"
#include "model/cpu/vec_math.h"

namespace hlab::model::internal {

// Whether the fused kernels take these inputs: CPU tensors of fp32, fp64 or
// bf16 (RawLoopsTake), with the GEMM of their compute dtype (fp64 when any
// input is fp64, else fp32) available.
bool FusedKernelsTake(std::initializer_list<torch::Tensor> inputs);

// Runs fn(bh0, bh1) over ranges of batch-heads [0, bh) on the intra-op
// threads, each calling a single-threaded BLAS (UseOneThreadPool).
template <typename Fn>
void ForEachBatchHead(int64_t bh, const Fn& fn) {
  UseOneThreadPool();
  at::parallel_for(0, bh, 1, fn);
}

// Rows of a (B, Hx, T, d) tensor read through its strides (the last must be
// 1: see RowsReadable), in the tensor's dtype (fp32, fp64 or bf16), for a
// kernel over H = Hx * group heads: head h reads head h / group (GQA's
// grouping; group = H for a head-broadcast input).
struct Rows {
  const void* data = nullptr;
  torch::ScalarType dtype = torch::kFloat32;
  int64_t sb = 0, sh = 0, st = 0, group = 1;
};
Rows RowsOf(const torch::Tensor& t, int64_t heads);

// t when its last dimension has stride 1, else a contiguous copy.
torch::Tensor RowsReadable(const torch::Tensor& t);

// dst (rows x width, contiguous; T float or double) = rows t0 .. t0 + rows - 1
// of batch b, head h of src, converted.
template <typename T>
void LoadRows(const Rows& src, int64_t b, int64_t h, int64_t t0, int64_t rows,
              int64_t width, T* dst);

// Rows of a chunk as the kernel reads them: data with row stride ld.
template <typename T>
struct RowBlock {
  const T* data = nullptr;
  int64_t ld = 0;
};

// Rows t0 .. t0 + rows - 1 of batch b, head h of src as T: a view into src
// (its own row stride, no copy) when its dtype is T, else converted into buf
// (rows x width, contiguous).
template <typename T>
RowBlock<T> ViewOrLoadRows(const Rows& src, int64_t b, int64_t h, int64_t t0,
                           int64_t rows, int64_t width, T* buf);

// Where rows t0 .. of batch b, head h of `out`, a contiguous (B, T, H, width)
// tensor, begin when its dtype is T (their row stride is H * width), else
// null.
template <typename T>
T* RowsBthdIfDtype(const torch::Tensor& out, int64_t b, int64_t h, int64_t t0,
                   int64_t width);

// Rows t0 .. of batch b, head h of `out`, a contiguous (B, T, H, width)
// tensor of fp32, fp64 or bf16 (rounded to nearest even), from src (rows x
// width, contiguous).
template <typename T>
void StoreRowsBthd(const T* src, int64_t rows, int64_t width,
                   const torch::Tensor& out, int64_t b, int64_t h, int64_t t0);

// One row of intra-chunk decays D_rc = exp(cum_r - cum_c), c <= r, applied
// to a row of a product: d[c] = exp(ci - cum[c]) and row[c] *= d[c] for
// c < len. Expects ci - cum[c] <= 0 (log-decays are not positive).
void DecayRow(const float* cum, float ci, float* row, float* d, int64_t len);
void DecayRow(const double* cum, double ci, double* row, double* d,
              int64_t len);

// sum_c a[c] b[c].
float Dot(const float* a, const float* b, int64_t n);
double Dot(const double* a, const double* b, int64_t n);

// sig = sigmoid(x), s = x sig = silu(x), n values.
void SiluRow(const float* x, float* s, float* sig, int64_t n);
void SiluRow(const double* x, double* s, double* sig, int64_t n);

// dx = ds d(silu)/dx = ds sig (1 + x (1 - sig)), n values.
void SiluGradRow(const float* x, const float* sig, const float* ds, float* dx,
                 int64_t n);
void SiluGradRow(const double* x, const double* sig, const double* ds,
                 double* dx, int64_t n);

// torch.nn.functional.softplus with its default threshold (x itself above
// 20), and its derivative.
template <typename T>
T Softplus(T z) {
  return z > T(20) ? z : std::log1p(std::exp(z));
}
template <typename T>
T SoftplusSlope(T z) {
  return z > T(20) ? T(1) : Sigmoid(z);
}

// xa = x, n values of In (float, double or at::BFloat16) as Acc (float or
// double); bf16 widened in vector steps.
template <typename In, typename Acc>
void LoadRow(const In* x, Acc* xa, int64_t n) {
  if constexpr (std::is_same_v<In, at::BFloat16> &&
                std::is_same_v<Acc, float>) {
    WidenBf16(reinterpret_cast<const Bf16*>(x), xa, n);
  } else {
    for (int64_t i = 0; i < n; ++i) xa[i] = static_cast<Acc>(x[i]);
  }
}

// x = xa, n values; bf16 rounded to nearest even in vector steps.
template <typename In, typename Acc>
void StoreRow(const Acc* xa, In* x, int64_t n) {
  if constexpr (std::is_same_v<In, at::BFloat16> &&
                std::is_same_v<Acc, float>) {
    NarrowToBf16(xa, reinterpret_cast<Bf16*>(x), n);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<In>(xa[i]);
  }
}

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_CHUNK_ROWS_H_
