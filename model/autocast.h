// Autocast state in one spelling for LibTorch 1.13 (Debian's) and 2.x (a pip
// or cluster LibTorch). 2.4 replaced the per-device calls
// (at::autocast::is_cpu_enabled, set_autocast_gpu_dtype, ...) with
// device-typed ones (is_autocast_enabled(at::kCUDA), ...) and deprecated the
// old ones, which then warn on every call and fail under -Werror; hlab calls
// these wrappers instead, so both LibTorch lines build.
//
// ScopedAutocastOff turns autocast off on the CPU and on CUDA for its
// lifetime, so a kernel chooses its own dtypes (softmax statistics and
// recurrences stay fp32) on whichever device its tensors are.
//
//   model::SetAutocast(torch::kCUDA, true, torch::kBFloat16);
//   {
//     model::ScopedAutocastOff off;  // CPU and CUDA autocast off here
//     ...
//   }
//
// Thread-safety: autocast state is thread-local in LibTorch; so is all of
// this.
#ifndef HLAB_MODEL_AUTOCAST_H_
#define HLAB_MODEL_AUTOCAST_H_

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define HLAB_TORCH_DEVICE_TYPED_AUTOCAST 1
#else
#define HLAB_TORCH_DEVICE_TYPED_AUTOCAST 0
#endif

namespace hlab::model {

// Whether autocast is on for `device` (kCPU or kCUDA; other devices: false).
inline bool AutocastEnabled(c10::DeviceType device) {
#if HLAB_TORCH_DEVICE_TYPED_AUTOCAST
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA) {
    return false;
  }
  return at::autocast::is_autocast_enabled(device);
#else
  if (device == c10::DeviceType::CPU) return at::autocast::is_cpu_enabled();
  if (device == c10::DeviceType::CUDA) return at::autocast::is_enabled();
  return false;
#endif
}

// The dtype autocast casts to on `device` (kCPU or kCUDA).
inline c10::ScalarType AutocastDtype(c10::DeviceType device) {
#if HLAB_TORCH_DEVICE_TYPED_AUTOCAST
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA
             ? at::autocast::get_autocast_gpu_dtype()
             : at::autocast::get_autocast_cpu_dtype();
#endif
}

// Sets the dtype autocast casts to on `device` (kCPU or kCUDA).
inline void SetAutocastDtype(c10::DeviceType device, c10::ScalarType dtype) {
#if HLAB_TORCH_DEVICE_TYPED_AUTOCAST
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

// Turns autocast on `device` (kCPU or kCUDA) on or off; the dtype is left as
// it is.
inline void SetAutocastEnabled(c10::DeviceType device, bool on) {
#if HLAB_TORCH_DEVICE_TYPED_AUTOCAST
  at::autocast::set_autocast_enabled(device, on);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(on);
  } else {
    at::autocast::set_cpu_enabled(on);
  }
#endif
}

// Autocast on `device` on with `dtype`, or off.
inline void SetAutocast(c10::DeviceType device, bool on,
                        c10::ScalarType dtype = c10::ScalarType::BFloat16) {
  if (on) SetAutocastDtype(device, dtype);
  SetAutocastEnabled(device, on);
}

// Whether autocast is on for `device` with bf16: the case where a kernel's
// products run with bf16 operands (model/layers/linear.h, SmallBf16Gemm).
inline bool AutocastToBf16(c10::DeviceType device) {
  return AutocastEnabled(device) &&
         AutocastDtype(device) == c10::ScalarType::BFloat16;
}

// Autocast off on the CPU and on CUDA for the scope's lifetime; the previous
// settings come back at its end.
class ScopedAutocastOff {
 public:
  ScopedAutocastOff()
      : cpu_was_(AutocastEnabled(c10::DeviceType::CPU)),
        cuda_was_(AutocastEnabled(c10::DeviceType::CUDA)) {
    if (cpu_was_) SetAutocastEnabled(c10::DeviceType::CPU, false);
    if (cuda_was_) SetAutocastEnabled(c10::DeviceType::CUDA, false);
  }
  ~ScopedAutocastOff() {
    if (cpu_was_) SetAutocastEnabled(c10::DeviceType::CPU, true);
    if (cuda_was_) SetAutocastEnabled(c10::DeviceType::CUDA, true);
  }
  ScopedAutocastOff(const ScopedAutocastOff&) = delete;
  ScopedAutocastOff& operator=(const ScopedAutocastOff&) = delete;

 private:
  bool cpu_was_;
  bool cuda_was_;
};

}  // namespace hlab::model

#endif  // HLAB_MODEL_AUTOCAST_H_
