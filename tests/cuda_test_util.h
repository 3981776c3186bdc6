// Shared by the tests that need a CUDA device (tests/model/kernels/
// cuda_kernels_test.cc, tests/train/cuda_train_test.cc): they skip with the
// reason where none is visible (CI, any CPU machine); scripts/gpu-check.sh
// runs them on a GPU machine.
//
//   TEST(CudaThing, Works) {
//     HLAB_SKIP_WITHOUT_CUDA();
//     ...
//   }
#ifndef HLAB_TESTS_CUDA_TEST_UTIL_H_
#define HLAB_TESTS_CUDA_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <torch/cuda.h>

namespace hlab::cuda_test {

// Whether this process sees a CUDA device (a CUDA LibTorch and a GPU).
inline bool HaveCuda() {
  return torch::cuda::is_available() && torch::cuda::device_count() > 0;
}

}  // namespace hlab::cuda_test

#define HLAB_SKIP_WITHOUT_CUDA()                                           \
  if (!::hlab::cuda_test::HaveCuda()) {                                    \
    GTEST_SKIP() << "no CUDA device visible to this process (a CPU-only "  \
                    "LibTorch or no GPU): scripts/gpu-check.sh runs this " \
                    "on a GPU machine";                                    \
  }

#endif  // HLAB_TESTS_CUDA_TEST_UTIL_H_
