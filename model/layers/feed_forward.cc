#include "model/layers/feed_forward.h"

#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/fused_elementwise.h"
#include "model/cpu/raw_tensor.h"

namespace hlab::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kGrain = 16384;  // elements per parallel range

// silu(a) * b as one autograd node over the raw loops of
// model/cpu/fused_elementwise.h: one pass forward, one backward
// (sigmoid recomputed), saving only a and b. LibTorch takes silu, mul and
// their backwards as five passes with two saved temporaries.
class SwiGluFunction : public torch::autograd::Function<SwiGluFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& a_arg,
                               const torch::Tensor& b_arg) {
    RECORD_FUNCTION("hlab::SwiGluFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor a = a_arg.contiguous(), b = b_arg.contiguous();
    torch::Tensor y = at::empty_like(a);
    internal::DispatchRaw(a.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      const T* ap = internal::RawData<const T>(a);
      const T* bp = internal::RawData<const T>(b);
      T* yp = internal::RawData<T>(y);
      at::parallel_for(0, a.numel(), kGrain, [&](int64_t i0, int64_t i1) {
        internal::SwiGluForward(ap + i0, bp + i0, i1 - i0, yp + i0);
      });
    });
    ctx->save_for_backward({a, b});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &a = saved[0], &b = saved[1];
    const torch::Tensor dy = grads[0].to(a.scalar_type()).contiguous();
    torch::Tensor da = at::empty_like(a), db = at::empty_like(b);
    internal::DispatchRaw(a.scalar_type(), [&](auto tag) {
      using T = decltype(tag);
      const T* ap = internal::RawData<const T>(a);
      const T* bp = internal::RawData<const T>(b);
      const T* gp = internal::RawData<const T>(dy);
      T* dap = internal::RawData<T>(da);
      T* dbp = internal::RawData<T>(db);
      at::parallel_for(0, a.numel(), kGrain, [&](int64_t i0, int64_t i1) {
        internal::SwiGluBackward(ap + i0, bp + i0, gp + i0, i1 - i0, dap + i0,
                                 dbp + i0);
      });
    });
    return {da, db};
  }
};

}  // namespace

torch::Tensor SwiGluProduct(const torch::Tensor& a, const torch::Tensor& b) {
  if (internal::RawLoopsTake(a) && a.sizes() == b.sizes() &&
      a.scalar_type() == b.scalar_type() && b.device().is_cpu()) {
    return SwiGluFunction::apply(a, b);
  }
  return torch::silu(a) * b;
}

SwiGLUImpl::SwiGLUImpl(int64_t d_model, int64_t hidden, double init_std,
                       double out_std) {
  auto linear = [](int64_t in, int64_t out) {
    return Linear(LinearOptions(in, out).bias(false));
  };
  gate_proj = register_module("gate_proj", linear(d_model, hidden));
  up_proj = register_module("up_proj", linear(d_model, hidden));
  down_proj = register_module("down_proj", linear(hidden, d_model));
  torch::NoGradGuard no_grad;
  gate_proj->weight.normal_(0.0, init_std);
  up_proj->weight.normal_(0.0, init_std);
  down_proj->weight.normal_(0.0, out_std);
}

torch::Tensor SwiGLUImpl::forward(const torch::Tensor& x) {
  // gate and up stay two products: one over their concatenated weights
  // (1408 outputs) measured slower (ConcatenatedLinear, model/layers/linear.h).
  return down_proj(SwiGluProduct(gate_proj(x), up_proj(x)));
}

}  // namespace hlab::model
