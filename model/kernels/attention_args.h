// Argument checks and sizes shared by the attention kernel
// (model/kernels/attention_kernel.cc) and its references
// (model/kernels/attention_reference.cc). Private to model/. Thread-safe (pure
// functions).
//
//   const internal::Dims dims = internal::CheckArgs(q, k, v, sink, window);
//   // dims.n() batched matrices of dims.t * dims.g query rows
#ifndef HLAB_MODEL_KERNELS_ATTENTION_ARGS_H_
#define HLAB_MODEL_KERNELS_ATTENTION_ARGS_H_

#include <cstdint>

#include <torch/types.h>

namespace hlab::model::internal {

// Softmax statistics and accumulators: fp64 for fp64 input, else fp32.
inline torch::ScalarType StatType(torch::ScalarType dtype) {
  return dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

// Sizes of one call. G query heads share a KV head; N = B * Hkv batched
// matrices, each with T * G query rows (row t * G + g).
struct Dims {
  int64_t b = 0, h = 0, hkv = 0, g = 0, t = 0, d = 0;
  int64_t n() const { return b * hkv; }
};

inline Dims CheckArgs(const torch::Tensor& q, const torch::Tensor& k,
                      const torch::Tensor& v, const torch::Tensor& sink,
                      int64_t window) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "attention: q, k, v must be (B, H, T, D), got ", q.sizes(), ", ",
              k.sizes(), ", ", v.sizes());
  Dims dims;
  dims.b = q.size(0);
  dims.h = q.size(1);
  dims.t = q.size(2);
  dims.d = q.size(3);
  dims.hkv = k.size(1);
  TORCH_CHECK(dims.hkv > 0 && dims.h % dims.hkv == 0,
              "attention: query heads (", dims.h,
              ") must be a multiple of KV heads (", dims.hkv, ")");
  dims.g = dims.h / dims.hkv;
  TORCH_CHECK(k.sizes() == v.sizes(), "attention: k and v differ in shape");
  TORCH_CHECK(k.size(0) == dims.b && k.size(2) == dims.t && k.size(3) == dims.d,
              "attention: k ", k.sizes(), " does not match q ", q.sizes());
  TORCH_CHECK(
      q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
      "attention: q, k, v must share a dtype");
  TORCH_CHECK(!sink.defined() || (sink.dim() == 1 && sink.size(0) == dims.h),
              "attention: sink must be (H) = (", dims.h, ")");
  TORCH_CHECK(window >= 0, "attention: window must be >= 0, got ", window);
  return dims;
}

// (T, T) bool, true where key j is visible from query i: j <= i, and i - j
// < window when window > 0. Defined in model/kernels/attention_reference.cc.
torch::Tensor VisibleMask(int64_t t, int64_t window,
                          const torch::Device& device);

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_KERNELS_ATTENTION_ARGS_H_
