// ScopedCpuAutocastOff: turns CPU autocast off for its lifetime and restores
// the previous setting, so a kernel chooses its own dtypes (softmax statistics
// and recurrences stay fp32); CpuAutocastToBf16 says whether it was on with
// bf16. Private to model/. Not thread-safe beyond autocast's own thread-local
// state.
//
//   torch::Tensor MyKernel(const torch::Tensor& x) {
//     internal::ScopedCpuAutocastOff no_autocast;
//     ...
//   }
#ifndef HLAB_MODEL_KERNELS_AUTOCAST_H_
#define HLAB_MODEL_KERNELS_AUTOCAST_H_

#include <ATen/autocast_mode.h>

namespace hlab::model::internal {

// Whether CPU autocast is on with bf16: the case where a kernel's products
// run with bf16 operands (model/layers/linear.h, SmallBf16Gemm).
inline bool CpuAutocastToBf16() {
  return at::autocast::is_cpu_enabled() &&
         at::autocast::get_autocast_cpu_dtype() == at::kBFloat16;
}

class ScopedCpuAutocastOff {
 public:
  ScopedCpuAutocastOff() : was_enabled_(at::autocast::is_cpu_enabled()) {
    at::autocast::set_cpu_enabled(false);
  }
  ~ScopedCpuAutocastOff() { at::autocast::set_cpu_enabled(was_enabled_); }
  ScopedCpuAutocastOff(const ScopedCpuAutocastOff&) = delete;
  ScopedCpuAutocastOff& operator=(const ScopedCpuAutocastOff&) = delete;

 private:
  bool was_enabled_;
};

}  // namespace hlab::model::internal

#endif  // HLAB_MODEL_KERNELS_AUTOCAST_H_
