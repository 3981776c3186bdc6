#include "model/norm.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/feed_forward.h"
#include "model/internal/fused_elementwise.h"
#include "model/internal/raw_tensor.h"

namespace hlab::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows of a parallel range: about 2^14 elements each.
int64_t RowGrain(int64_t d) { return std::max<int64_t>(1, 16384 / d); }

// dw is summed over fixed blocks of rows, then over the blocks in order, so
// it does not depend on the thread count.
constexpr int64_t kWeightGradBlockRows = 256;

// RMSNorm as one autograd node over the raw loops of
// model/internal/fused_elementwise.h: one pass forward (saving 1/rms per
// row), one backward. x contiguous (rows, d) in float, double or bf16.
class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_arg,
                               const torch::Tensor& weight, double eps) {
    RECORD_FUNCTION("hlab::RmsNormFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor x = x_arg.contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const auto accum =
        x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    const torch::Tensor w = weight.to(accum).contiguous();
    torch::Tensor y = at::empty_like(x);
    torch::Tensor rstd = at::empty({rows}, x.options().dtype(accum));
    internal::DispatchRaw(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      using A = internal::AccumOf<T>;
      const T* xp = internal::RawData<const T>(x);
      T* yp = internal::RawData<T>(y);
      const A* wp = w.data_ptr<A>();
      A* rp = rstd.data_ptr<A>();
      at::parallel_for(0, rows, RowGrain(d), [&](int64_t r0, int64_t r1) {
        internal::RmsNormForwardRows(xp + r0 * d, wp, r1 - r0, d,
                                     static_cast<A>(eps), yp + r0 * d, rp + r0);
      });
    });
    ctx->save_for_backward({x, w, rstd});
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    const torch::Tensor dy = grads[0].to(x.scalar_type()).contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const int64_t blocks =
        (rows + kWeightGradBlockRows - 1) / kWeightGradBlockRows;
    torch::Tensor dx = at::empty_like(x);
    torch::Tensor partial = at::zeros({blocks, d}, w.options());
    internal::DispatchRaw(x.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      using A = internal::AccumOf<T>;
      const T* xp = internal::RawData<const T>(x);
      const T* gp = internal::RawData<const T>(dy);
      T* dxp = internal::RawData<T>(dx);
      const A* wp = w.data_ptr<A>();
      const A* rp = rstd.data_ptr<A>();
      A* pp = partial.data_ptr<A>();
      at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t r0 = b * kWeightGradBlockRows;
          const int64_t n = std::min(kWeightGradBlockRows, rows - r0);
          internal::RmsNormBackwardRows(xp + r0 * d, wp, rp + r0, gp + r0 * d,
                                        n, d, dxp + r0 * d, pp + b * d);
        }
      });
      for (int64_t b = 1; b < blocks; ++b) {
        for (int64_t j = 0; j < d; ++j) pp[j] += pp[b * d + j];
      }
    });
    const auto weight_dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
    torch::Tensor dw = partial[0].to(weight_dtype);
    return {dx, dw, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                      double eps) {
  if (internal::RawLoopsTake(x) && weight.device().is_cpu() && x.dim() > 0 &&
      x.numel() > 0 && weight.dim() == 1 && weight.size(0) == x.size(-1)) {
    return RmsNormFunction::apply(x, weight, eps);
  }
  const auto stat_dtype =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor xf = x.to(stat_dtype);
  const torch::Tensor inv = torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return (xf * inv * weight.to(stat_dtype)).to(x.scalar_type());
}

torch::Tensor GatedRmsNorm(const torch::Tensor& x, const torch::Tensor& gate,
                           const torch::Tensor& weight, double eps) {
  const auto stat_dtype =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  // silu(gate) * x in one fused pass each way (model/feed_forward.h).
  const torch::Tensor gated =
      SwiGluProduct(gate.to(stat_dtype), x.to(stat_dtype));
  return RmsNorm(gated, weight, eps).to(x.scalar_type());
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return RmsNorm(x, weight, eps_);
}

}  // namespace hlab::model
