#include "model/kernels/linear_cross_entropy.h"

#include <algorithm>
#include <vector>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/layers/linear.h"

namespace hlab::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kAlignRows = 64;

// The plain path's per-row loss over one block: -log_softmax(x w^T)[t] in
// fp32, the same ops forward + cross_entropy apply to the whole logits.
torch::Tensor BlockLogits(const torch::Tensor& x, const torch::Tensor& weight) {
  return LinearProduct(x, weight).to(torch::kFloat32);
}

torch::Tensor BlockLossSum(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(
      BlockLogits(x, weight), targets,
      torch::nn::functional::CrossEntropyFuncOptions()
          .ignore_index(-1)
          .reduction(torch::kSum));
}

// The forward takes each block's gradients while its logits are at hand
// (as Liger-Kernel's fused linear cross-entropy does): d loss / dx and
// d loss / dw for an output gradient of 1, kept for the backward, which
// only scales them. So no block's product is made twice; the forward of a
// loss that is never differentiated pays for gradients it did not need,
// which LinearCrossEntropy avoids by not asking (`with_grads`).
class LinearCrossEntropyFunction
    : public torch::autograd::Function<LinearCrossEntropyFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight,
                               const torch::Tensor& targets, int64_t block_rows,
                               bool grad_x, bool grad_w) {
    RECORD_FUNCTION("hlab::LinearCrossEntropy::forward",
                    std::vector<c10::IValue>());
    const int64_t n = x.size(0);
    const int64_t valid = targets.ne(-1).sum().item<int64_t>();
    // d loss / d (a row's loss), as the plain mean's.
    const torch::Tensor scale = torch::full(
        {}, 1.0 / static_cast<double>(valid),
        torch::TensorOptions().dtype(torch::kFloat32).device(x.device()));
    torch::Tensor dx = grad_x ? torch::empty_like(x) : torch::Tensor();
    torch::Tensor dw;
    const torch::Tensor w = weight.detach().requires_grad_(grad_w);
    std::vector<torch::Tensor> sums;
    for (int64_t r0 = 0; r0 < n; r0 += block_rows) {
      const int64_t rows = std::min(block_rows, n - r0);
      const torch::Tensor t = targets.narrow(0, r0, rows);
      if (!grad_x && !grad_w) {
        sums.push_back(BlockLossSum(x.narrow(0, r0, rows), weight, t));
        continue;
      }
      torch::AutoGradMode grad_mode(true);
      const torch::Tensor xb =
          x.narrow(0, r0, rows).detach().requires_grad_(grad_x);
      const torch::Tensor loss = BlockLossSum(xb, w, t);
      std::vector<torch::Tensor> inputs;
      if (grad_x) inputs.push_back(xb);
      if (grad_w) inputs.push_back(w);
      const variable_list g = torch::autograd::grad({loss}, inputs, {scale});
      sums.push_back(loss.detach());
      size_t i = 0;
      if (grad_x) dx.narrow(0, r0, rows).copy_(g[i++]);
      if (grad_w) {
        if (dw.defined()) {
          dw.add_(g[i]);
        } else {
          dw = g[i];
        }
      }
    }
    ctx->save_for_backward({dx, dw});
    return torch::stack(sums).sum() / static_cast<double>(valid);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor& out = grads[0];
    torch::Tensor dx, dw;
    if (saved[0].defined()) dx = saved[0] * out.to(saved[0].scalar_type());
    if (saved[1].defined()) dw = saved[1] * out.to(saved[1].scalar_type());
    return {dx,
            dw,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

int64_t LogitsBlockBytes() { return int64_t{256} << 20; }

int64_t LinearCrossEntropyBlockRows(int64_t n, int64_t vocab) {
  const int64_t row_bytes = std::max<int64_t>(1, vocab) * 4;
  if (n * row_bytes <= LogitsBlockBytes()) return 0;
  const int64_t fit = LogitsBlockBytes() / row_bytes / kAlignRows * kAlignRows;
  const int64_t rows = std::max(kAlignRows, fit);
  return rows >= n ? 0 : rows;
}

torch::Tensor LinearCrossEntropy(const torch::Tensor& x,
                                 const torch::Tensor& weight,
                                 const torch::Tensor& targets,
                                 int64_t block_rows) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && targets.dim() == 1 &&
                  x.size(0) == targets.size(0) && x.size(1) == weight.size(1),
              "LinearCrossEntropy: x (N, d), weight (V, d), targets (N,)");
  TORCH_CHECK(block_rows > 0, "LinearCrossEntropy: block_rows must be > 0");
  const bool grad = torch::GradMode::is_enabled();
  return LinearCrossEntropyFunction::apply(x, weight, targets, block_rows,
                                           grad && x.requires_grad(),
                                           grad && weight.requires_grad());
}

torch::Tensor LinearTokenNll(const torch::Tensor& x,
                             const torch::Tensor& weight,
                             const torch::Tensor& targets, int64_t block_rows) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && targets.dim() == 1 &&
                  x.size(0) == targets.size(0) && x.size(1) == weight.size(1),
              "LinearTokenNll: x (N, d), weight (V, d), targets (N,)");
  torch::NoGradGuard no_grad;
  const int64_t n = x.size(0);
  const int64_t step = block_rows > 0 ? block_rows : std::max<int64_t>(1, n);
  torch::Tensor nll = torch::empty({n}, x.options().dtype(torch::kFloat32));
  for (int64_t r0 = 0; r0 < n; r0 += step) {
    const int64_t rows = std::min(step, n - r0);
    const torch::Tensor t = targets.narrow(0, r0, rows);
    const torch::Tensor valid = t.ne(-1);
    const torch::Tensor picked =
        -torch::log_softmax(BlockLogits(x.narrow(0, r0, rows), weight), -1)
             .gather(-1, t.clamp_min(0).unsqueeze(-1))
             .squeeze(-1);
    nll.narrow(0, r0, rows).copy_(picked.masked_fill(valid.logical_not(), 0));
  }
  return nll;
}

}  // namespace hlab::model
