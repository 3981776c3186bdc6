#include "model/kernels/linear_cross_entropy.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/cpu/blas.h"
#include "model/cpu/softmax_rows.h"
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

// ---------------------------------------------------------------------------
// The CPU fp32 form: raw BLAS calls on one logits buffer, split over the
// vocabulary. The head's weight (V x d) is the big operand; a split over
// rows would pack all of it again for every call (each call of a 64-row
// block of a 512-row block: 8 packings of 32 MB per block at 128,256 x 64),
// so the products are split over vocabulary columns, whose calls pack only
// their own columns. The softmax and the gradient of each row are one
// in-place pass over the row (model/cpu/softmax_rows.h), so the block's
// logits become its d loss / d logits where they lie, and no other
// (rows, V) tensor is made.

// Vocabulary columns per BLAS call of the logits and of dw: at d_model 64
// a call's columns of the weight are 512 KB, about one core's L2, and
// 128,256 ids make 63 calls to spread over the threads. 1,024 and 8,192
// columns ran the same step within noise (3.1-3.4 s, docs/performance.md,
// "The loss at a large vocabulary").
constexpr int64_t kVocabChunk = 2048;
// dx = P w sums over the vocabulary: in groups of at least this many
// columns, each one call into its own partial sum, added in group order.
constexpr int64_t kMinGroupCols = 4096;
constexpr int64_t kMaxPartialBytes = int64_t{64} << 20;

bool CpuKernelTakes(const torch::Tensor& x, const torch::Tensor& weight) {
  return x.device().is_cpu() && weight.device().is_cpu() &&
         x.scalar_type() == torch::kFloat32 &&
         weight.scalar_type() == torch::kFloat32 &&
         !AutocastEnabled(torch::kCPU) && internal::BlasAvailable<float>();
}

// Calls fn(i) for i in [0, n) over the intra-op threads; each i runs on
// one thread, so a Gemm call's bits depend on i alone.
template <typename Fn>
void ForEach(int64_t n, const Fn& fn) {
  at::parallel_for(0, n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) fn(i);
  });
}

struct HeadLossCpu {
  const float* x;          // (n, d)
  const float* w;          // (v, d)
  const int64_t* targets;  // (n,), each in [-1, v)
  int64_t n, d, v, block_rows;
  float grad_scale;  // d loss / d (a row's loss)
  float* nll;        // (n,) out: each row's loss, 0 without a target
  float* dx;         // (n, d) out, or null
  float* dw;         // (v, d) out, or null

  void Run() const {
    internal::UseOneThreadPool();
    const bool grad = dx != nullptr || dw != nullptr;
    const int64_t block = std::min(block_rows, n);
    const std::unique_ptr<float[]> logits(new float[block * v]);
    float* l = logits.get();
    const int64_t chunks = (v + kVocabChunk - 1) / kVocabChunk;
    const int64_t groups =
        dx == nullptr
            ? 0
            : std::clamp<int64_t>(
                  v / kMinGroupCols, 1,
                  1 + kMaxPartialBytes / std::max<int64_t>(1, block * d * 4));
    const int64_t group_cols = groups > 0 ? (v + groups - 1) / groups : 0;
    const std::unique_ptr<float[]> partial(
        new float[std::max<int64_t>(0, groups - 1) * block * d]);
    for (int64_t r0 = 0; r0 < n; r0 += block) {
      const int64_t rows = std::min(block, n - r0);
      const float* xb = x + r0 * d;
      ForEach(chunks, [&](int64_t c) {
        const int64_t c0 = c * kVocabChunk,
                      cols = std::min(kVocabChunk, v - c0);
        internal::Gemm(false, true, rows, cols, d, 1.0f, xb, d, w + c0 * d, d,
                       0.0f, l + c0, v);
      });
      ForEach(rows, [&](int64_t i) {
        nll[r0 + i] = internal::CrossEntropyRow(l + i * v, v, targets[r0 + i],
                                                grad, grad_scale);
      });
      if (dw != nullptr) {
        // dw (+)= P^T x over this block's rows, blocks added in order.
        ForEach(chunks, [&](int64_t c) {
          const int64_t c0 = c * kVocabChunk,
                        cols = std::min(kVocabChunk, v - c0);
          internal::Gemm(true, false, cols, d, rows, 1.0f, l + c0, v, xb, d,
                         r0 == 0 ? 0.0f : 1.0f, dw + c0 * d, d);
        });
      }
      if (dx != nullptr) {
        float* dxb = dx + r0 * d;
        ForEach(groups, [&](int64_t g) {
          const int64_t g0 = g * group_cols,
                        cols =
                            std::max<int64_t>(0, std::min(group_cols, v - g0));
          float* c = g == 0 ? dxb : partial.get() + (g - 1) * block * d;
          if (cols == 0) {
            std::fill(c, c + rows * d, 0.0f);
            return;
          }
          internal::Gemm(false, false, rows, d, cols, 1.0f, l + g0, v,
                         w + g0 * d, d, 0.0f, c, d);
        });
        at::parallel_for(0, rows * d, 4096, [&](int64_t i0, int64_t i1) {
          for (int64_t g = 1; g < groups; ++g) {
            const float* p = partial.get() + (g - 1) * block * d;
            for (int64_t i = i0; i < i1; ++i) dxb[i] += p[i];
          }
        });
      }
    }
  }
};

// Checks the targets the raw loops index with: each in [-1, v).
void CheckTargets(const torch::Tensor& targets, int64_t v) {
  if (targets.numel() == 0) return;
  const int64_t lo = targets.min().item<int64_t>();
  const int64_t hi = targets.max().item<int64_t>();
  TORCH_CHECK(lo >= -1 && hi < v,
              "LinearCrossEntropy: targets must be in [-1, ", v, "), got [", lo,
              ", ", hi, "]");
}

// The CPU form's loss (a sum over rows in row order, in double) and, as
// asked, dx and dw of the loss times grad_scale.
double HeadLossSumCpu(const torch::Tensor& x, const torch::Tensor& weight,
                      const torch::Tensor& targets, int64_t block_rows,
                      float grad_scale, torch::Tensor* dx, torch::Tensor* dw,
                      torch::Tensor* nll_out = nullptr) {
  const torch::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const torch::Tensor tc = targets.to(torch::kLong).contiguous();
  const int64_t n = xc.size(0), d = xc.size(1), v = wc.size(0);
  CheckTargets(tc, v);
  torch::Tensor nll = torch::empty({n}, xc.options());
  if (dx != nullptr) *dx = torch::empty_like(xc);
  // The first block's products write every element of dw (beta 0).
  if (dw != nullptr)
    *dw = n > 0 ? torch::empty_like(wc) : torch::zeros_like(wc);
  if (n > 0) {
    HeadLossCpu{xc.data_ptr<float>(),
                wc.data_ptr<float>(),
                tc.data_ptr<int64_t>(),
                n,
                d,
                v,
                block_rows,
                grad_scale,
                nll.data_ptr<float>(),
                dx != nullptr ? dx->data_ptr<float>() : nullptr,
                dw != nullptr ? dw->data_ptr<float>() : nullptr}
        .Run();
  }
  double sum = 0;
  const float* p = nll.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) sum += p[i];
  if (nll_out != nullptr) *nll_out = nll;
  return sum;
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
    torch::Tensor dx, dw;
    if (CpuKernelTakes(x, weight)) {
      const double sum = HeadLossSumCpu(
          x, weight, targets, block_rows, 1.0f / static_cast<float>(valid),
          grad_x ? &dx : nullptr, grad_w ? &dw : nullptr);
      ctx->save_for_backward({dx, dw});
      return torch::full({}, sum / static_cast<double>(valid),
                         x.options().dtype(torch::kFloat32));
    }
    // d loss / d (a row's loss), as the plain mean's.
    const torch::Tensor scale = torch::full(
        {}, 1.0 / static_cast<double>(valid),
        torch::TensorOptions().dtype(torch::kFloat32).device(x.device()));
    if (grad_x) dx = torch::empty_like(x);
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
  if (block_rows > 0 && CpuKernelTakes(x, weight)) {
    torch::Tensor nll;
    HeadLossSumCpu(x, weight, targets, step, 0.0f, nullptr, nullptr, &nll);
    return nll;
  }
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
