#include "model/kernels/flash_attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include <ATen/Context.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/kernels/attention_args.h"

namespace hlab::model {
namespace {

using internal::CheckArgs;
using internal::Dims;
using internal::StatType;
using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a core's forward returns: o (B, T, H, D) in the input dtype, lse (B,
// H, T) in the stat dtype, and what its backward needs besides
// (FlashAttention's random-number state; empty tensors for the dense core).
struct CoreOutput {
  Tensor o, lse, seed, offset;
};

// ---------------------------------------------------------------------------
// The dense core: FlashAttention's contract in ATen ops, O(T^2) memory.
// Inputs in the (B, T, H, D) layout the flash kernels take.

struct DenseOperands {
  Tensor q, k, v;  // (B, H, T, D) in the stat dtype, K/V repeated to H heads
  Tensor scores;   // (B, H, T, T), scaled, -inf where invisible
};

DenseOperands DenseScores(const Tensor& q, const Tensor& k, const Tensor& v,
                          int64_t window, double scale) {
  const torch::ScalarType stat = StatType(q.scalar_type());
  const int64_t g = q.size(2) / k.size(2), t = q.size(1);
  const auto heads_first = [&](const Tensor& x, int64_t repeat) {
    const Tensor y = x.transpose(1, 2).to(stat);
    return repeat > 1 ? y.repeat_interleave(repeat, 1) : y;
  };
  DenseOperands out{heads_first(q, 1), heads_first(k, g), heads_first(v, g),
                    Tensor()};
  out.scores =
      (torch::matmul(out.q, out.k.transpose(-2, -1)) * scale)
          .masked_fill(
              internal::VisibleMask(t, window, q.device()).logical_not(),
              -std::numeric_limits<double>::infinity());
  return out;
}

CoreOutput DenseForward(const Tensor& q, const Tensor& k, const Tensor& v,
                        int64_t window, double scale) {
  const DenseOperands x = DenseScores(q, k, v, window, scale);
  const Tensor lse = torch::logsumexp(x.scores, -1);  // (B, H, T)
  const Tensor o = torch::matmul((x.scores - lse.unsqueeze(-1)).exp(), x.v);
  return {o.transpose(1, 2).to(q.scalar_type()).contiguous(), lse, Tensor(),
          Tensor()};
}

// Sums the per-query-head gradient (B, H, T, D) over each KV head's group
// and returns it as (B, T, Hkv, D).
Tensor SumGroups(const Tensor& x, int64_t hkv) {
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), d = x.size(3);
  return x.view({b, hkv, h / hkv, t, d}).sum(2).transpose(1, 2);
}

std::vector<Tensor> DenseBackward(const Tensor& dout, const Tensor& q,
                                  const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse,
                                  int64_t window, double scale) {
  const torch::ScalarType stat = StatType(q.scalar_type());
  const DenseOperands x = DenseScores(q, k, v, window, scale);
  const Tensor p = (x.scores - lse.unsqueeze(-1)).exp();  // 0 where invisible
  const Tensor d_o = dout.transpose(1, 2).to(stat);
  // D_i from the `out` given, as the flash kernels take it.
  const Tensor d_row =
      (d_o * out.transpose(1, 2).to(stat)).sum(-1, /*keepdim=*/true);
  const Tensor ds = p * (torch::matmul(d_o, x.v.transpose(-2, -1)) - d_row);
  const Tensor dq = torch::matmul(ds, x.k) * scale;
  const Tensor dk = torch::matmul(ds.transpose(-2, -1), x.q) * scale;
  const Tensor dv = torch::matmul(p.transpose(-2, -1), d_o);
  const int64_t hkv = k.size(2);
  const torch::ScalarType dtype = q.scalar_type();
  return {dq.transpose(1, 2).to(dtype), SumGroups(dk, hkv).to(dtype),
          SumGroups(dv, hkv).to(dtype)};
}

// ---------------------------------------------------------------------------
// The flash core: LibTorch's FlashAttention-2 kernels.

#if HLAB_TORCH_FLASH_ATTENTION
// FlashAttention's window: keys i - left .. i + right; -1 (none) = unbounded.
std::optional<int64_t> FlashLeftWindow(int64_t window) {
  if (window <= 0) return std::nullopt;
  return window - 1;
}
#endif

CoreOutput FlashForward(const Tensor& q, const Tensor& k, const Tensor& v,
                        int64_t window, double scale) {
#if HLAB_TORCH_FLASH_ATTENTION
  const int64_t t = q.size(1);
  auto [o, lse, seed, offset, debug_mask] = at::_flash_attention_forward(
      q, k, v, /*cum_seq_q=*/std::nullopt, /*cum_seq_k=*/std::nullopt,
      /*max_q=*/t, /*max_k=*/t, /*dropout_p=*/0.0, /*is_causal=*/true,
      /*return_debug_mask=*/false, /*scale=*/scale,
      /*window_size_left=*/FlashLeftWindow(window),
      /*window_size_right=*/int64_t{0});
  return {o, lse, seed, offset};
#else
  (void)q, (void)k, (void)v, (void)window, (void)scale;
  TORCH_CHECK(false, "attention: FlashAttention needs LibTorch >= 2.6");
#endif
}

// LibTorch's deterministic-algorithms switch, on for one scope and then put
// back. FlashAttention's backward reads it: on, it sums dQ over the key
// blocks in a fixed order (per-split buffers); off (LibTorch's default), with
// atomic adds whose order changes from run to run, and a resumed run would
// no longer repeat an uninterrupted one bit for bit. The switch is
// process-wide, so another thread's op during this scope also sees it.
class ScopedDeterministicAlgorithms {
 public:
  ScopedDeterministicAlgorithms()
      : was_on_(at::globalContext().deterministicAlgorithms()),
        was_warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
  ~ScopedDeterministicAlgorithms() {
    at::globalContext().setDeterministicAlgorithms(was_on_, was_warn_only_);
  }
  ScopedDeterministicAlgorithms(const ScopedDeterministicAlgorithms&) = delete;
  ScopedDeterministicAlgorithms& operator=(
      const ScopedDeterministicAlgorithms&) = delete;

 private:
  bool was_on_, was_warn_only_;
};

std::vector<Tensor> FlashBackward(const Tensor& dout, const Tensor& q,
                                  const Tensor& k, const Tensor& v,
                                  const Tensor& out, const CoreOutput& saved,
                                  int64_t window, double scale) {
#if HLAB_TORCH_FLASH_ATTENTION
  const int64_t t = q.size(1);
  const ScopedDeterministicAlgorithms deterministic;
  auto [dq, dk, dv] = at::_flash_attention_backward(
      dout, q, k, v, out, saved.lse, /*cum_seq_q=*/Tensor(),
      /*cum_seq_k=*/Tensor(), /*max_q=*/t, /*max_k=*/t, /*dropout_p=*/0.0,
      /*is_causal=*/true, saved.seed, saved.offset, /*scale=*/scale,
      /*window_size_left=*/FlashLeftWindow(window),
      /*window_size_right=*/int64_t{0});
  return {dq, dk, dv};
#else
  (void)dout, (void)q, (void)k, (void)v, (void)out, (void)saved, (void)window;
  (void)scale;
  TORCH_CHECK(false, "attention: FlashAttention needs LibTorch >= 2.6");
#endif
}

// ---------------------------------------------------------------------------

class SinkFoldedAttentionFunction
    : public torch::autograd::Function<SinkFoldedAttentionFunction> {
 public:
  // q: (B, H, T, D), k, v: (B, Hkv, T, D); sink_arg: (H) or empty for none.
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& sink_arg, int64_t window,
                        int64_t core) {
    RECORD_FUNCTION("hlab::SinkFoldedAttentionFunction::forward",
                    std::vector<c10::IValue>());
    ScopedAutocastOff autocast_off;
    const Tensor sink = sink_arg.numel() > 0 ? sink_arg : Tensor();
    const Dims dims = CheckArgs(q, k, v, sink, window);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dims.d));
    const Tensor qt = q.detach().transpose(1, 2),
                 kt = k.detach().transpose(1, 2),
                 vt = v.detach().transpose(1, 2);  // (B, T, heads, D)
    const CoreOutput c =
        static_cast<AttentionCore>(core) == AttentionCore::kFlash
            ? FlashForward(qt, kt, vt, window, scale)
            : DenseForward(qt, kt, vt, window, scale);
    Tensor y = c.o;  // (B, T, H, D)
    if (sink.defined()) {
      y = (c.o.to(c.lse.scalar_type()) * RowWeights(c.lse, sink, dims))
              .to(q.scalar_type());
    }
    ctx->save_for_backward({q, k, v, sink_arg, y, c.lse, c.seed, c.offset});
    ctx->saved_data["window"] = window;
    ctx->saved_data["core"] = core;
    return y.transpose(1, 2);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &k = saved[1], &v = saved[2],
                 &sink_arg = saved[3], &y = saved[4];
    const CoreOutput c{Tensor(), saved[5], saved[6], saved[7]};
    const int64_t window = ctx->saved_data["window"].toInt();
    const auto core =
        static_cast<AttentionCore>(ctx->saved_data["core"].toInt());
    ScopedAutocastOff autocast_off;
    const Tensor sink = sink_arg.numel() > 0 ? sink_arg : Tensor();
    const Dims dims = CheckArgs(q, k, v, sink, window);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dims.d));
    const torch::ScalarType stat = c.lse.scalar_type();
    const Tensor dy = grads[0].transpose(1, 2);  // (B, T, H, D)

    Tensor dout = dy.to(q.scalar_type()).contiguous(), dsink;
    if (sink.defined()) {
      const Tensor w = RowWeights(c.lse, sink, dims);  // (B, T, H, 1)
      const Tensor dy_stat = dy.to(stat);
      // d loss / d sink_h = -sum_i (1 - w_i) rowsum(dy_i * y_i).
      dsink = -((1.0 - w) * (dy_stat * y.to(stat)).sum(-1, /*keepdim=*/true))
                   .sum({0, 1, 3})
                   .to(sink.scalar_type());
      dout = (dy_stat * w).to(q.scalar_type());
    }
    const Tensor qt = q.transpose(1, 2), kt = k.transpose(1, 2),
                 vt = v.transpose(1, 2);
    const std::vector<Tensor> d =
        core == AttentionCore::kFlash
            ? FlashBackward(dout, qt, kt, vt, y, c, window, scale)
            : DenseBackward(dout, qt, kt, vt, y, c.lse, window, scale);
    return {d[0].transpose(1, 2),
            d[1].transpose(1, 2),
            d[2].transpose(1, 2),
            sink.defined() ? dsink : Tensor(),
            Tensor(),
            Tensor()};
  }

 private:
  // w_i = sigmoid(lse_i - sink_h), the share of row i's softmax mass that
  // is not the sink's, as (B, T, H, 1) in the stat dtype.
  static Tensor RowWeights(const Tensor& lse, const Tensor& sink,
                           const Dims& dims) {
    return torch::sigmoid(lse - sink.to(lse.scalar_type()).view({1, dims.h, 1}))
        .transpose(1, 2)
        .unsqueeze(-1);
  }
};

}  // namespace

bool FlashAttentionServes(const torch::Tensor& q, const torch::Tensor& k,
                          const torch::Tensor& v) {
#if HLAB_TORCH_FLASH_ATTENTION
  const torch::ScalarType dtype = q.scalar_type();
  return q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.is_cuda() &&
         k.device() == q.device() && v.device() == q.device() &&
         (dtype == torch::kBFloat16 || dtype == torch::kFloat16) &&
         k.scalar_type() == dtype && v.scalar_type() == dtype &&
         q.size(3) % 8 == 0 && q.size(3) <= 256;
#else
  (void)q, (void)k, (void)v;
  return false;
#endif
}

torch::Tensor SinkFoldedAttention(const torch::Tensor& q,
                                  const torch::Tensor& k,
                                  const torch::Tensor& v,
                                  const torch::Tensor& sink, int64_t window,
                                  AttentionCore core) {
  TORCH_CHECK(core != AttentionCore::kFlash || FlashAttentionServes(q, k, v),
              "attention: FlashAttention cannot run these inputs (it needs "
              "LibTorch >= 2.6, CUDA tensors in bf16 or fp16 and a head dim "
              "that is a multiple of 8 up to 256); got ",
              q.scalar_type(), " on ", q.device(), ", head dim ",
              q.dim() == 4 ? q.size(3) : -1);
  // Custom functions take defined tensors only: "no sink" travels as an
  // empty tensor.
  const Tensor sink_arg = sink.defined() ? sink : at::empty({0}, q.options());
  return SinkFoldedAttentionFunction::apply(q, k, v, sink_arg, window,
                                            static_cast<int64_t>(core));
}

}  // namespace hlab::model
