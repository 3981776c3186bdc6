// Shared by the model tests: comparing tensors.
//
// Thread-safe (pure).
//
//   EXPECT_LT(RelErr(got, want), 1e-12);
#ifndef HLAB_TESTS_MODEL_MODEL_TEST_UTIL_H_
#define HLAB_TESTS_MODEL_MODEL_TEST_UTIL_H_

#include <torch/torch.h>

namespace hlab::model {

// ||a - b|| / ||b||, in fp64.
inline double RelErr(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor a64 = a.to(torch::kFloat64), b64 = b.to(torch::kFloat64);
  return (a64 - b64).norm().item<double>() / b64.norm().item<double>();
}

}  // namespace hlab::model

#endif  // HLAB_TESTS_MODEL_MODEL_TEST_UTIL_H_
