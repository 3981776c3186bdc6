#include "model/layers/gated_delta_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/blas.h"
#include "model/cpu/chunk_rows.h"
#include "model/cpu/fused_elementwise.h"
#include "model/cpu/raw_tensor.h"
#include "model/cpu/vec_math.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model {
namespace {

using internal::Dot;  // model/cpu/chunk_rows.h
using internal::LoadRow;
using internal::Sigmoid;  // model/cpu/vec_math.h
using internal::SiluGradRow;
using internal::SiluRow;
using internal::Softplus;
using internal::StoreRow;

constexpr double kL2Eps = 1e-6;  // fla's l2norm

// ---------------------------------------------------------------------------
// Whole tensors. x: (B, T, width) with strides (sb, st, 1); outputs
// heads-major in the accumulator type Acc.

// h value heads (and beta, g), hqk heads of q and k.
struct Dims {
  int64_t b = 0, t = 0, h = 0, hqk = 0, dh = 0;
  int64_t qk = 0, inner = 0;  // qk = hqk * dh (q's, k's), inner = h * dh (v's)
  int64_t n = 0, width = 0;   // n = 2 qk + inner, width = n + 2 h
  int64_t sb = 0, st = 0;

  // Offset of part (0 q, 1 k, 2 v) in a row, and its heads.
  int64_t PartOffset(int64_t part) const { return part * qk; }
  int64_t PartHeads(int64_t part) const { return part < 2 ? hqk : h; }
};

Dims DimsOf(const torch::Tensor& x, int64_t heads, int64_t qk_heads) {
  Dims d;
  d.b = x.size(0);
  d.t = x.size(1);
  d.h = heads;
  d.hqk = qk_heads;
  d.width = x.size(2);
  d.n = d.width - 2 * heads;
  d.dh = d.n / (2 * qk_heads + heads);
  d.qk = qk_heads * d.dh;
  d.inner = heads * d.dh;
  d.sb = x.stride(0);
  d.st = x.stride(1);
  return d;
}

template <typename Acc>
struct Outputs {
  Acc *q, *k, *v, *beta, *g;
};

template <typename In, typename Acc>
void Forward(const Dims& d, const In* x, const Acc* a_log, const Acc* dt_bias,
             const Outputs<Acc>& out) {
  const int64_t n = d.n;
  at::parallel_for(
      0, d.b * d.t, std::max<int64_t>(1, 4096 / d.width),
      [&](int64_t begin, int64_t end) {
        std::vector<Acc> xa(d.width), s(n), sig(n);
        for (int64_t row = begin; row < end; ++row) {
          const int64_t b = row / d.t, t = row % d.t;
          LoadRow(x + b * d.sb + t * d.st, xa.data(), d.width);
          SiluRow(xa.data(), s.data(), sig.data(), n);
          Acc* const parts[3] = {out.q, out.k, out.v};
          for (int64_t part = 0; part < 3; ++part) {
            const int64_t heads = d.PartHeads(part);
            for (int64_t h = 0; h < heads; ++h) {
              const Acc* sh = s.data() + d.PartOffset(part) + h * d.dh;
              Acc* y = parts[part] + ((b * heads + h) * d.t + t) * d.dh;
              const Acc r =
                  part < 2 ? Acc(1) / std::sqrt(Dot(sh, sh, d.dh) + Acc(kL2Eps))
                           : Acc(1);
              for (int64_t c = 0; c < d.dh; ++c) y[c] = sh[c] * r;
            }
          }
          for (int64_t h = 0; h < d.h; ++h) {
            const int64_t o = (b * d.h + h) * d.t + t;
            out.beta[o] = Sigmoid(xa[n + h]);
            out.g[o] =
                -std::exp(a_log[h]) * Softplus(xa[n + d.h + h] + dt_bias[h]);
          }
        }
      });
}

// Gradients of the outputs (any may be null: zero).
template <typename Acc>
struct OutputGrads {
  const Acc *q, *k, *v, *beta, *g;
};

// dx (B, T, width) contiguous in In; the parameter gradients summed into
// per-thread rows of partial: (threads, 2 h), d(a_log) then d(dt_bias).
template <typename In, typename Acc>
void Backward(const Dims& d, const In* x, const Acc* a_log, const Acc* dt_bias,
              const OutputGrads<Acc>& grads, In* dx, Acc* partial) {
  const int64_t n = d.n;
  at::parallel_for(
      0, d.b * d.t, std::max<int64_t>(1, 4096 / d.width),
      [&](int64_t begin, int64_t end) {
        std::vector<Acc> xa(d.width), s(n), sig(n), ds(n), dxa(d.width);
        Acc* part_sums = partial + at::get_thread_num() * 2 * d.h;
        for (int64_t row = begin; row < end; ++row) {
          const int64_t b = row / d.t, t = row % d.t;
          LoadRow(x + b * d.sb + t * d.st, xa.data(), d.width);
          SiluRow(xa.data(), s.data(), sig.data(), n);
          const Acc* const parts[3] = {grads.q, grads.k, grads.v};
          for (int64_t part = 0; part < 3; ++part) {
            const int64_t heads = d.PartHeads(part);
            for (int64_t h = 0; h < heads; ++h) {
              const int64_t o = d.PartOffset(part) + h * d.dh;
              const Acc* sh = s.data() + o;
              Acc* dsh = ds.data() + o;
              if (parts[part] == nullptr) {
                std::fill_n(dsh, d.dh, Acc(0));
                continue;
              }
              const Acc* dy = parts[part] + ((b * heads + h) * d.t + t) * d.dh;
              if (part == 2) {
                std::copy_n(dy, d.dh, dsh);
                continue;
              }
              // y = r s with r = (|s|^2 + eps)^-1/2:
              // ds = r dy - r^3 (s . dy) s.
              const Acc r = Acc(1) / std::sqrt(Dot(sh, sh, d.dh) + Acc(kL2Eps));
              const Acc c = r * r * r * Dot(sh, dy, d.dh);
              for (int64_t i = 0; i < d.dh; ++i) dsh[i] = r * dy[i] - c * sh[i];
            }
          }
          SiluGradRow(xa.data(), sig.data(), ds.data(), dxa.data(), n);
          for (int64_t h = 0; h < d.h; ++h) {
            const int64_t o = (b * d.h + h) * d.t + t;
            const Acc beta = Sigmoid(xa[n + h]);
            dxa[n + h] = grads.beta != nullptr
                             ? grads.beta[o] * beta * (Acc(1) - beta)
                             : Acc(0);
            // g = -A softplus(z), A = exp(a_log), z = x_a + dt_bias:
            // dz = dg (-A) softplus'(z), d(a_log) = dg g.
            const Acc z = xa[n + d.h + h] + dt_bias[h];
            const Acc a = std::exp(a_log[h]);
            const Acc dg = grads.g != nullptr ? grads.g[o] : Acc(0);
            const Acc slope = internal::SoftplusSlope(z);
            const Acc dz = -dg * a * slope;
            dxa[n + d.h + h] = dz;
            part_sums[h] += -dg * a * Softplus(z);
            part_sums[d.h + h] += dz;
          }
          StoreRow(dxa.data(), dx + row * d.width, d.width);
        }
      });
}

class GatedDeltaInputsFunction
    : public torch::autograd::Function<GatedDeltaInputsFunction> {
 public:
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, const torch::Tensor& x_arg,
      int64_t heads, int64_t qk_heads, const torch::Tensor& a_log_arg,
      const torch::Tensor& dt_bias_arg) {
    RECORD_FUNCTION("hlab::GatedDeltaInputsFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor x = internal::RowsReadable(x_arg);
    const Dims d = DimsOf(x, heads, qk_heads);
    const auto acc = x.options().dtype(KernelComputeDtype({x}));
    const torch::Tensor a_log = a_log_arg.to(acc.dtype()).contiguous();
    const torch::Tensor dt_bias = dt_bias_arg.to(acc.dtype()).contiguous();
    torch::Tensor q = at::empty({d.b, d.hqk, d.t, d.dh}, acc);
    torch::Tensor k = at::empty({d.b, d.hqk, d.t, d.dh}, acc);
    torch::Tensor v = at::empty({d.b, d.h, d.t, d.dh}, acc);
    torch::Tensor beta = at::empty({d.b, d.h, d.t}, acc);
    torch::Tensor g = at::empty({d.b, d.h, d.t}, acc);
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, x.scalar_type(), "GatedDeltaInputs", [&] {
          using Acc = internal::AccumOf<scalar_t>;
          Forward<scalar_t, Acc>(
              d, x.data_ptr<scalar_t>(), a_log.data_ptr<Acc>(),
              dt_bias.data_ptr<Acc>(),
              {q.data_ptr<Acc>(), k.data_ptr<Acc>(), v.data_ptr<Acc>(),
               beta.data_ptr<Acc>(), g.data_ptr<Acc>()});
        });
    ctx->save_for_backward({x, a_log, dt_bias});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["qk_heads"] = qk_heads;
    ctx->saved_data["a_log_dtype"] =
        static_cast<int64_t>(a_log_arg.scalar_type());
    ctx->saved_data["dt_bias_dtype"] =
        static_cast<int64_t>(dt_bias_arg.scalar_type());
    return {q, k, v, beta, g};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &a_log = saved[1], &dt_bias = saved[2];
    const Dims d = DimsOf(x, ctx->saved_data["heads"].toInt(),
                          ctx->saved_data["qk_heads"].toInt());
    const auto acc = KernelComputeDtype({x});
    std::vector<torch::Tensor> g(5);
    for (size_t i = 0; i < g.size(); ++i) {
      if (grads[i].defined()) g[i] = grads[i].to(acc).contiguous();
    }
    torch::Tensor dx = at::empty({d.b, d.t, d.width}, x.options());
    const int64_t threads = at::get_num_threads();
    torch::Tensor partial =
        at::zeros({threads, 2 * d.h}, x.options().dtype(acc));
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, x.scalar_type(), "GatedDeltaInputsBackward", [&] {
          using Acc = internal::AccumOf<scalar_t>;
          const auto ptr = [](const torch::Tensor& t) -> const Acc* {
            return t.defined() ? t.data_ptr<Acc>() : nullptr;
          };
          Backward<scalar_t, Acc>(
              d, x.data_ptr<scalar_t>(), a_log.data_ptr<Acc>(),
              dt_bias.data_ptr<Acc>(),
              {ptr(g[0]), ptr(g[1]), ptr(g[2]), ptr(g[3]), ptr(g[4])},
              dx.data_ptr<scalar_t>(), partial.data_ptr<Acc>());
        });
    const torch::Tensor sums = partial.sum(0);
    const auto dtype_of = [&](const char* key) {
      return static_cast<torch::ScalarType>(ctx->saved_data[key].toInt());
    };
    return {dx, torch::Tensor(), torch::Tensor(),
            sums.narrow(0, 0, d.h).to(dtype_of("a_log_dtype")),
            sums.narrow(0, d.h, d.h).to(dtype_of("dt_bias_dtype"))};
  }
};

}  // namespace

GatedDeltaInputTensors GatedDeltaInputsWithAten(const torch::Tensor& x,
                                                int64_t heads, int64_t qk_heads,
                                                const torch::Tensor& a_log,
                                                const torch::Tensor& dt_bias) {
  const int64_t b = x.size(0), t = x.size(1);
  const int64_t dh = (x.size(2) - 2 * heads) / (2 * qk_heads + heads);
  const int64_t qk = qk_heads * dh, inner = heads * dh;
  const std::vector<torch::Tensor> parts =
      AtLeastFp32(x).split_with_sizes({qk, qk, inner, heads, heads}, -1);
  const auto act = [&](const torch::Tensor& p, bool l2) {
    torch::Tensor y = torch::silu(p).view({b, t, -1, dh});
    if (l2) y = y * torch::rsqrt(y.square().sum(-1, /*keepdim=*/true) + kL2Eps);
    return y.transpose(1, 2).contiguous();
  };
  GatedDeltaInputTensors out;
  out.q = act(parts[0], true);
  out.k = act(parts[1], true);
  out.v = act(parts[2], false);
  out.beta = torch::sigmoid(parts[3]).transpose(1, 2).contiguous();
  out.g = (-torch::exp(a_log) * torch::softplus(parts[4] + dt_bias))
              .transpose(1, 2)
              .contiguous();
  return out;
}

GatedDeltaInputTensors GatedDeltaInputs(const torch::Tensor& x, int64_t heads,
                                        int64_t qk_heads,
                                        const torch::Tensor& a_log,
                                        const torch::Tensor& dt_bias) {
  TORCH_CHECK(
      x.dim() == 3 && heads > 0 && qk_heads > 0 && heads % qk_heads == 0 &&
          x.size(2) > 2 * heads &&
          (x.size(2) - 2 * heads) % (2 * qk_heads + heads) == 0,
      "GatedDeltaInputs: expected x (B, T, (2 * qk_heads + heads) * dh + 2 * "
      "heads) with heads = ",
      heads, " a multiple of qk_heads = ", qk_heads, ", got ", x.sizes());
  TORCH_CHECK(a_log.numel() == heads && dt_bias.numel() == heads,
              "GatedDeltaInputs: a_log and dt_bias must have ", heads,
              " elements, got ", a_log.numel(), " and ", dt_bias.numel());
  if (!internal::RawLoopsTake(x))
    return GatedDeltaInputsWithAten(x, heads, qk_heads, a_log, dt_bias);
  const torch::autograd::variable_list out =
      GatedDeltaInputsFunction::apply(x, heads, qk_heads, a_log, dt_bias);
  return {out[0], out[1], out[2], out[3], out[4]};
}

}  // namespace hlab::model
