// Shared by the recurrent kernels' and mixers' tests (tests/model/kernels/,
// tests/model/layers/): error metrics, tolerances, running a function with
// its gradients, random kernel inputs, thread and autocast scopes, and the
// fp64 kernel suite's fixture and parameters.
#ifndef HLAB_TESTS_MODEL_RECURRENT_TEST_UTIL_H_
#define HLAB_TESTS_MODEL_RECURRENT_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/config/model_config.h"
#include "model/config/param_count.h"
#include "model/cpu/small_bf16_gemm.h"
#include "model/kernels/gated_delta_fused.h"
#include "model/kernels/gated_delta_kernel.h"
#include "model/kernels/scalar_gla_fused.h"
#include "model/kernels/scalar_gla_kernel.h"
#include "model/layers/gated_delta.h"
#include "model/layers/gated_delta_inputs.h"
#include "model/layers/lightning.h"
#include "model/layers/mamba2.h"
#include "model/layers/mamba2_inputs.h"
#include "model/layers/mixer.h"
#include "model/layers/short_conv.h"

namespace hlab::model {

constexpr double kFp64Tolerance = 1e-10;  // max |a - ref| / max |ref|
// fp32 chunked vs fp64 recurrence, relative RMS error (fla's assert_close
// metric; fla allows 0.005-0.02 in fp16). Measured ~1e-7 to 1e-6.
constexpr double kFp32Tolerance = 1e-5;

// max |a - ref| / max |ref| (0 when both are 0).
inline double MaxRelError(const torch::Tensor& a, const torch::Tensor& ref) {
  const torch::Tensor a64 = a.to(torch::kFloat64);
  const torch::Tensor r64 = ref.to(torch::kFloat64);
  const double diff = (a64 - r64).abs().max().item<double>();
  const double scale = r64.abs().max().item<double>();
  if (!std::isfinite(diff)) return INFINITY;
  return scale > 0 ? diff / scale : diff;
}

// ||a - ref||_2 / ||ref||_2, fla's relative RMS error.
inline double RelRmsError(const torch::Tensor& a, const torch::Tensor& ref) {
  const torch::Tensor a64 = a.to(torch::kFloat64);
  const torch::Tensor r64 = ref.to(torch::kFloat64);
  const double diff = (a64 - r64).norm().item<double>();
  const double scale = r64.norm().item<double>();
  if (!std::isfinite(diff)) return INFINITY;
  return scale > 0 ? diff / scale : diff;
}

// Output and gradients of (out * dout).sum() w.r.t. `inputs`.
struct Result {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

template <typename Fn>
inline Result RunWithGrads(Fn fn, const std::vector<torch::Tensor>& inputs,
                           const torch::Tensor& dout) {
  Result r;
  r.out = fn();
  r.grads = torch::autograd::grad({(r.out * dout.to(r.out.dtype())).sum()},
                                  inputs, {}, /*retain_graph=*/false,
                                  /*create_graph=*/false,
                                  /*allow_unused=*/true);
  r.out = r.out.detach();
  return r;
}

// Inputs as in fla's tests: q, k L2-normalised, g = logsigmoid(randn) scaled
// by `decay_scale`, beta = sigmoid(randn).
struct KernelInputs {
  torch::Tensor q, k, v, g, beta;
  std::vector<torch::Tensor> All() const { return {q, k, v, g, beta}; }
};

inline KernelInputs MakeKernelInputs(int64_t b, int64_t h, int64_t t,
                                     int64_t dk, int64_t dv, double decay_scale,
                                     torch::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const auto l2 = [](const torch::Tensor& x) {
    return x / x.norm(2, -1, /*keepdim=*/true);
  };
  KernelInputs in;
  in.q = l2(torch::randn({b, h, t, dk}, opts));
  in.k = l2(torch::randn({b, h, t, dk}, opts));
  in.v = torch::randn({b, h, t, dv}, opts);
  in.g = torch::log_sigmoid(torch::randn({b, h, t}, opts)) * decay_scale;
  in.beta = torch::sigmoid(torch::randn({b, h, t}, opts));
  for (torch::Tensor* x : {&in.q, &in.k, &in.v, &in.g, &in.beta}) {
    *x = x->to(dtype).requires_grad_(true);
  }
  return in;
}

inline constexpr const char* kInputNames[] = {"q", "k", "v", "g", "beta"};

// CPU autocast to bf16 for its lifetime; restores the previous setting.
class Bf16Autocast {
 public:
  Bf16Autocast()
      : was_enabled_(hlab::model::AutocastEnabled(torch::kCPU)),
        was_dtype_(hlab::model::AutocastDtype(torch::kCPU)) {
    hlab::model::SetAutocastDtype(torch::kCPU, torch::kBFloat16);
    hlab::model::SetAutocastEnabled(torch::kCPU, true);
  }
  ~Bf16Autocast() {
    hlab::model::SetAutocastEnabled(torch::kCPU, was_enabled_);
    hlab::model::SetAutocastDtype(torch::kCPU, was_dtype_);
    at::autocast::clear_cache();
  }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

class TwoThreads {
 public:
  TwoThreads() : saved_(at::get_num_threads()) { at::set_num_threads(2); }
  ~TwoThreads() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

// Outputs and the gradients of sum_i <out_i, w_i> for random w_i (seeded)
// w.r.t. `inputs`: for the input passes, which return several tensors.
struct OutputsResult {
  std::vector<torch::Tensor> outs, grads;
};
inline OutputsResult RunOutputs(
    const std::function<std::vector<torch::Tensor>()>& fn,
    const std::vector<torch::Tensor>& inputs, uint64_t seed) {
  OutputsResult r;
  r.outs = fn();
  torch::manual_seed(seed);
  torch::Tensor loss = torch::zeros({}, r.outs[0].options());
  for (const torch::Tensor& o : r.outs) {
    loss = loss + (o * torch::randn(o.sizes(), o.options())).sum();
  }
  r.grads = torch::autograd::grad({loss}, inputs);
  for (torch::Tensor& o : r.outs) o = o.detach();
  return r;
}

inline ModelConfig SmallConfig() {
  ModelConfig config;
  config.vocab_size = 64;
  config.d_model = 32;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.head_dim = 8;
  config.ffn_hidden = 64;
  config.init_std = 0.1;  // larger than the default, to exercise the gates
  return config;
}

// The chunked kernels' fp64 tests against their recurrences, one suite per
// test binary (kernels/*_kernel_test.cc): chunk sizes x decay scales.
class KernelFp64Test
    : public ::testing::TestWithParam<std::tuple<int64_t, double>> {};

inline auto KernelFp64Params() {
  return ::testing::Combine(::testing::Values<int64_t>(16, 32, 64),
                            ::testing::Values(1.0, 10.0, 100.0));
}

// "C<chunk>_g<decay scale>".
inline std::string KernelFp64Name(
    const ::testing::TestParamInfo<std::tuple<int64_t, double>>& info) {
  return "C" + std::to_string(std::get<0>(info.param)) + "_g" +
         std::to_string(static_cast<int>(std::get<1>(info.param)));
}

}  // namespace hlab::model

#endif  // HLAB_TESTS_MODEL_RECURRENT_TEST_UTIL_H_
