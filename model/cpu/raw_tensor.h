// CPU tensors as raw element pointers for the loops of model/cpu/ and
// model/kernels/ (float, double, and bfloat16 as internal::Bf16). Private to
// model/.
//
// Thread-safety: pure.
//
//   const bool ran = internal::DispatchRaw(x.scalar_type(), [&](auto tag) {
//     using T = decltype(tag);
//     Loop(internal::RawData<T>(x), ...);
//   });  // false for other dtypes: take the ATen path
#ifndef HLAB_MODEL_CPU_RAW_TENSOR_H_
#define HLAB_MODEL_CPU_RAW_TENSOR_H_

#include <type_traits>

#include <torch/types.h>

#include "model/cpu/blas.h"

namespace hlab::model::internal {

// The storage type of T in a tensor: at::BFloat16 for Bf16 (same layout).
template <typename T>
using StorageOf =
    std::conditional_t<std::is_same_v<std::remove_const_t<T>, Bf16>,
                       at::BFloat16, std::remove_const_t<T>>;

// x's elements as T*; x must have T's dtype.
template <typename T>
T* RawData(const torch::Tensor& x) {
  return reinterpret_cast<T*>(x.data_ptr<StorageOf<T>>());
}

// Calls fn(T{}) with T float, double or Bf16 for those dtypes and returns
// true; returns false (without calling fn) for any other dtype.
template <typename Fn>
bool DispatchRaw(torch::ScalarType dtype, Fn&& fn) {
  switch (dtype) {
    case torch::kFloat32:
      fn(float{});
      return true;
    case torch::kFloat64:
      fn(double{});
      return true;
    case torch::kBFloat16:
      fn(Bf16{});
      return true;
    default:
      return false;
  }
}

// Whether the fused element-wise loops take a tensor: a CPU tensor of
// float, double or bfloat16.
inline bool RawLoopsTake(const torch::Tensor& x) {
  const torch::ScalarType t = x.scalar_type();
  return x.device().is_cpu() && (t == torch::kFloat32 || t == torch::kFloat64 ||
                                 t == torch::kBFloat16);
}

// Whether direct GEMM calls (internal::Gemm) serve t: a CPU tensor of float
// or double, with the BLAS entry points present in this process.
inline bool BlasServes(const torch::Tensor& t) {
  if (!t.device().is_cpu()) return false;
  if (t.scalar_type() == torch::kFloat32) return BlasAvailable<float>();
  if (t.scalar_type() == torch::kFloat64) return BlasAvailable<double>();
  return false;
}

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_CPU_RAW_TENSOR_H_
