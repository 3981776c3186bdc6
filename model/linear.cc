#include "model/linear.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/internal/blas.h"
#include "model/internal/raw_tensor.h"

namespace hlab::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Calls fn(begin, end) on one range of [0, n) per intra-op thread (at most
// one range per `min_rows` rows), each calling a single-threaded BLAS.
template <typename Fn>
void SplitRows(int64_t n, int64_t min_rows, const Fn& fn) {
  internal::UseOneThreadPool();
  const int64_t threads = std::max<int64_t>(
      1, std::min<int64_t>(at::get_num_threads(), n / min_rows));
  if (threads == 1) {
    fn(0, n);
    return;
  }
  at::parallel_for(0, n, (n + threads - 1) / threads, fn);
}

// Rows of a product's output below which a split does not pay.
constexpr int64_t kMinRows = 64;

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  // x: (M, in) contiguous; weight: (out, in) contiguous. Returns (M, out).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight) {
    RECORD_FUNCTION("hlab::LinearFunction::forward",
                    std::vector<c10::IValue>());
    const int64_t m = x.size(0), in = x.size(1), out = weight.size(0);
    torch::Tensor y = at::empty({m, out}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "LinearForward", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      const scalar_t* wp = weight.data_ptr<scalar_t>();
      scalar_t* yp = y.data_ptr<scalar_t>();
      SplitRows(m, kMinRows, [&](int64_t r0, int64_t r1) {
        internal::Gemm(false, true, r1 - r0, out, in, scalar_t(1), xp + r0 * in,
                       in, wp, in, scalar_t(0), yp + r0 * out, out);
      });
    });
    ctx->save_for_backward({x, weight});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1];
    const torch::Tensor dy = grads[0].contiguous();
    const int64_t m = x.size(0), in = x.size(1), out = weight.size(0);
    torch::Tensor dx, dw;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "LinearBackward", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      const scalar_t* wp = weight.data_ptr<scalar_t>();
      const scalar_t* gp = dy.data_ptr<scalar_t>();
      if (ctx->needs_input_grad(0)) {
        // dx = dy w: rows of dx.
        dx = at::empty({m, in}, x.options());
        scalar_t* dxp = dx.data_ptr<scalar_t>();
        SplitRows(m, kMinRows, [&](int64_t r0, int64_t r1) {
          internal::Gemm(false, false, r1 - r0, in, out, scalar_t(1),
                         gp + r0 * out, out, wp, in, scalar_t(0), dxp + r0 * in,
                         in);
        });
      }
      if (ctx->needs_input_grad(1)) {
        // dw = dy^T x: rows of dw (output features), each the full sum
        // over M, so the result does not depend on the thread count.
        dw = at::empty({out, in}, weight.options());
        scalar_t* dwp = dw.data_ptr<scalar_t>();
        SplitRows(out, 16, [&](int64_t r0, int64_t r1) {
          internal::Gemm(true, false, r1 - r0, in, m, scalar_t(1), gp + r0, out,
                         xp, in, scalar_t(0), dwp + r0 * in, in);
        });
      }
    });
    return {dx, dw};
  }
};

// Under CPU autocast: x (M, in) in fp32 or bf16 and the fp32 weight (out,
// in) multiply as bf16 through oneDNN's bf16 x bf16 -> fp32 GEMM (one call,
// threaded by oneDNN on the OpenMP threads), the output rounded to bf16
// once, as autocast's linear gives. Backward: dx in x's dtype, dw in fp32
// straight from the fp32 accumulator (autocast's mm would round it to bf16).
class LinearBf16Function
    : public torch::autograd::Function<LinearBf16Function> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight) {
    RECORD_FUNCTION("hlab::LinearBf16Function::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor xb = x.to(torch::kBFloat16).contiguous();
    const torch::Tensor wb = weight.to(torch::kBFloat16).contiguous();
    const int64_t m = xb.size(0), in = xb.size(1), out = wb.size(0);
    torch::Tensor y = at::empty({m, out}, x.options().dtype(torch::kFloat32));
    internal::Gemm(false, true, m, out, in, 1.0f, Bf16Data(xb), in,
                   Bf16Data(wb), in, 0.0f, y.data_ptr<float>(), out);
    ctx->save_for_backward({xb, wb});
    ctx->saved_data["x_dtype"] = x.scalar_type();
    ctx->saved_data["w_dtype"] = weight.scalar_type();
    return y.to(torch::kBFloat16);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &xb = saved[0], &wb = saved[1];
    const torch::Tensor g = grads[0].to(torch::kBFloat16).contiguous();
    const int64_t m = xb.size(0), in = xb.size(1), out = wb.size(0);
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty({m, in}, xb.options().dtype(torch::kFloat32));
      internal::Gemm(false, false, m, in, out, 1.0f, Bf16Data(g), out,
                     Bf16Data(wb), in, 0.0f, dx.data_ptr<float>(), in);
      dx = dx.to(
          static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt()));
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty({out, in}, xb.options().dtype(torch::kFloat32));
      internal::Gemm(true, false, out, in, m, 1.0f, Bf16Data(g), out,
                     Bf16Data(xb), in, 0.0f, dw.data_ptr<float>(), in);
      dw = dw.to(
          static_cast<torch::ScalarType>(ctx->saved_data["w_dtype"].toInt()));
    }
    return {dx, dw};
  }

 private:
  static const internal::Bf16* Bf16Data(const torch::Tensor& t) {
    return reinterpret_cast<const internal::Bf16*>(t.data_ptr<at::BFloat16>());
  }
};

}  // namespace

torch::Tensor LinearProduct(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  const bool ours =
      !bias.defined() && x.device().is_cpu() && weight.device().is_cpu() &&
      x.scalar_type() == weight.scalar_type() && internal::BlasServes(x) &&
      weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1) &&
      x.numel() > 0 && !at::autocast::is_cpu_enabled();
  if (!ours) {
    const bool bf16_autocast =
        at::autocast::is_cpu_enabled() &&
        at::autocast::get_autocast_cpu_dtype() == torch::kBFloat16 &&
        !bias.defined() && x.device().is_cpu() && weight.device().is_cpu() &&
        (x.scalar_type() == torch::kFloat32 ||
         x.scalar_type() == torch::kBFloat16) &&
        weight.scalar_type() == torch::kFloat32 && weight.dim() == 2 &&
        x.dim() >= 1 && x.size(-1) == weight.size(1) && x.numel() > 0 &&
        internal::BlasAvailable<internal::Bf16>();
    if (!bf16_autocast) return at::linear(x, weight, bias);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = weight.size(0);
    return LinearBf16Function::apply(x.reshape({-1, x.size(-1)}), weight)
        .view(shape);
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  return LinearFunction::apply(x.reshape({-1, x.size(-1)}).contiguous(),
                               weight.contiguous())
      .view(shape);
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  return LinearProduct(x, weight, bias);
}

}  // namespace hlab::model
