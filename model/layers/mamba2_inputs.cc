#include "model/layers/mamba2_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/chunk_rows.h"
#include "model/cpu/raw_tensor.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model {
namespace {

using internal::Dot;
using internal::LoadRow;
using internal::SiluGradRow;
using internal::SiluRow;
using internal::Softplus;
using internal::SoftplusSlope;
using internal::StoreRow;

// p: (B, T, width) with strides (sb, st, 1), width = 2 di + 2 n + h.
struct Dims {
  int64_t b = 0, t = 0, h = 0, p = 0, n = 0;
  int64_t di = 0, width = 0;
  int64_t sb = 0, st = 0;
};

Dims DimsOf(const torch::Tensor& x, int64_t heads, int64_t state) {
  Dims d;
  d.b = x.size(0);
  d.t = x.size(1);
  d.h = heads;
  d.n = state;
  d.width = x.size(2);
  d.di = (d.width - 2 * state - heads) / 2;
  d.p = d.di / heads;
  d.sb = x.stride(0);
  d.st = x.stride(1);
  return d;
}

int64_t Grain(const Dims& d) { return std::max<int64_t>(1, 4096 / d.width); }

template <typename Acc>
struct Outputs {
  Acc *z, *q, *k, *v, *skip, *g;
};

// Parameters in the accumulator type: a = -exp(A_log), dt_bias, D.
template <typename Acc>
struct Params {
  const Acc *a, *dt_bias, *d_skip;
};

template <typename In, typename Acc>
void Forward(const Dims& d, const In* x, const Params<Acc>& w,
             const Outputs<Acc>& out) {
  const int64_t m = d.di + 2 * d.n;  // x, Bm, Cm: the SiLU inputs
  at::parallel_for(0, d.b * d.t, Grain(d), [&](int64_t begin, int64_t end) {
    std::vector<Acc> xa(d.width), s(m), sig(m);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / d.t, t = row % d.t;
      LoadRow(x + b * d.sb + t * d.st, xa.data(), d.width);
      SiluRow(xa.data() + d.di, s.data(), sig.data(), m);
      std::copy_n(xa.data(), d.di, out.z + row * d.di);
      std::copy_n(s.data() + d.di, d.n, out.k + row * d.n);
      std::copy_n(s.data() + d.di + d.n, d.n, out.q + row * d.n);
      for (int64_t h = 0; h < d.h; ++h) {
        const Acc dt = Softplus(xa[d.di + m + h] + w.dt_bias[h]);
        const Acc skip = w.d_skip[h];
        const Acc* sx = s.data() + h * d.p;
        Acc* v = out.v + row * d.di + h * d.p;
        Acc* sk = out.skip + row * d.di + h * d.p;
        for (int64_t c = 0; c < d.p; ++c) {
          v[c] = sx[c] * dt;
          sk[c] = sx[c] * skip;
        }
        out.g[(b * d.h + h) * d.t + t] = dt * w.a[h];
      }
    }
  });
}

// Gradients of the outputs (any may be null: zero).
template <typename Acc>
struct OutputGrads {
  const Acc *z, *q, *k, *v, *skip, *g;
};

// dx (B, T, width) contiguous in In; the parameter gradients summed into
// per-thread rows of partial: (threads, 3 h), d(A_log), d(dt_bias), d(D).
template <typename In, typename Acc>
void Backward(const Dims& d, const In* x, const Params<Acc>& w,
              const OutputGrads<Acc>& grads, In* dx, Acc* partial) {
  const int64_t m = d.di + 2 * d.n;
  at::parallel_for(0, d.b * d.t, Grain(d), [&](int64_t begin, int64_t end) {
    std::vector<Acc> xa(d.width), s(m), sig(m), ds(m), dxa(d.width);
    Acc* sums = partial + at::get_thread_num() * 3 * d.h;
    const auto copy_or_zero = [](const Acc* src, int64_t len, Acc* dst) {
      if (src != nullptr) {
        std::copy_n(src, len, dst);
      } else {
        std::fill_n(dst, len, Acc(0));
      }
    };
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / d.t, t = row % d.t;
      LoadRow(x + b * d.sb + t * d.st, xa.data(), d.width);
      SiluRow(xa.data() + d.di, s.data(), sig.data(), m);
      copy_or_zero(grads.z != nullptr ? grads.z + row * d.di : nullptr, d.di,
                   dxa.data());
      copy_or_zero(grads.k != nullptr ? grads.k + row * d.n : nullptr, d.n,
                   ds.data() + d.di);
      copy_or_zero(grads.q != nullptr ? grads.q + row * d.n : nullptr, d.n,
                   ds.data() + d.di + d.n);
      for (int64_t h = 0; h < d.h; ++h) {
        const Acc z = xa[d.di + m + h] + w.dt_bias[h];
        const Acc dt = Softplus(z);
        const Acc* sx = s.data() + h * d.p;
        Acc* dsx = ds.data() + h * d.p;
        const Acc* dv =
            grads.v != nullptr ? grads.v + row * d.di + h * d.p : nullptr;
        const Acc* dsk =
            grads.skip != nullptr ? grads.skip + row * d.di + h * d.p : nullptr;
        const Acc dg =
            grads.g != nullptr ? grads.g[(b * d.h + h) * d.t + t] : Acc(0);
        // v = silu(x) dt, skip = D silu(x), g = dt a with a = -exp(A_log).
        Acc d_dt = dg * w.a[h];
        for (int64_t c = 0; c < d.p; ++c) dsx[c] = 0;
        if (dv != nullptr) {
          d_dt += Dot(dv, sx, d.p);
          for (int64_t c = 0; c < d.p; ++c) dsx[c] += dv[c] * dt;
        }
        if (dsk != nullptr) {
          sums[2 * d.h + h] += Dot(dsk, sx, d.p);
          for (int64_t c = 0; c < d.p; ++c) dsx[c] += dsk[c] * w.d_skip[h];
        }
        sums[h] += dg * dt * w.a[h];  // dg/dA_log = dt a
        const Acc dz = d_dt * SoftplusSlope(z);
        sums[d.h + h] += dz;
        dxa[d.di + m + h] = dz;
      }
      SiluGradRow(xa.data() + d.di, sig.data(), ds.data(), dxa.data() + d.di,
                  m);
      StoreRow(dxa.data(), dx + row * d.width, d.width);
    }
  });
}

class Mamba2InputsFunction
    : public torch::autograd::Function<Mamba2InputsFunction> {
 public:
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, const torch::Tensor& x_arg,
      int64_t heads, int64_t state, const torch::Tensor& a_log_arg,
      const torch::Tensor& dt_bias_arg, const torch::Tensor& d_skip_arg) {
    RECORD_FUNCTION("hlab::Mamba2InputsFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor x = internal::RowsReadable(x_arg);
    const Dims d = DimsOf(x, heads, state);
    const auto acc = x.options().dtype(KernelComputeDtype({x}));
    const torch::Tensor a = -a_log_arg.to(acc.dtype()).exp().contiguous();
    const torch::Tensor dt_bias = dt_bias_arg.to(acc.dtype()).contiguous();
    const torch::Tensor d_skip = d_skip_arg.to(acc.dtype()).contiguous();
    torch::Tensor z = at::empty({d.b, d.t, d.di}, acc);
    torch::Tensor q = at::empty({d.b, d.t, d.n}, acc);
    torch::Tensor k = at::empty({d.b, d.t, d.n}, acc);
    torch::Tensor v = at::empty({d.b, d.t, d.h, d.p}, acc);
    torch::Tensor skip = at::empty({d.b, d.t, d.h, d.p}, acc);
    torch::Tensor g = at::empty({d.b, d.h, d.t}, acc);
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, x.scalar_type(), "Mamba2Inputs", [&] {
          using Acc = internal::AccumOf<scalar_t>;
          Forward<scalar_t, Acc>(
              d, x.data_ptr<scalar_t>(),
              {a.data_ptr<Acc>(), dt_bias.data_ptr<Acc>(),
               d_skip.data_ptr<Acc>()},
              {z.data_ptr<Acc>(), q.data_ptr<Acc>(), k.data_ptr<Acc>(),
               v.data_ptr<Acc>(), skip.data_ptr<Acc>(), g.data_ptr<Acc>()});
        });
    ctx->save_for_backward({x, a, dt_bias, d_skip});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["state"] = state;
    ctx->saved_data["param_dtype"] =
        static_cast<int64_t>(a_log_arg.scalar_type());
    return {z, q, k, v, skip, g};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &a = saved[1], &dt_bias = saved[2],
                        &d_skip = saved[3];
    const Dims d = DimsOf(x, ctx->saved_data["heads"].toInt(),
                          ctx->saved_data["state"].toInt());
    const auto acc = KernelComputeDtype({x});
    std::vector<torch::Tensor> g(6);
    for (size_t i = 0; i < g.size(); ++i) {
      if (grads[i].defined()) g[i] = grads[i].to(acc).contiguous();
    }
    torch::Tensor dx = at::empty({d.b, d.t, d.width}, x.options());
    torch::Tensor partial =
        at::zeros({at::get_num_threads(), 3 * d.h}, x.options().dtype(acc));
    AT_DISPATCH_FLOATING_TYPES_AND(
        at::kBFloat16, x.scalar_type(), "Mamba2InputsBackward", [&] {
          using Acc = internal::AccumOf<scalar_t>;
          const auto ptr = [](const torch::Tensor& t) -> const Acc* {
            return t.defined() ? t.data_ptr<Acc>() : nullptr;
          };
          Backward<scalar_t, Acc>(d, x.data_ptr<scalar_t>(),
                                  {a.data_ptr<Acc>(), dt_bias.data_ptr<Acc>(),
                                   d_skip.data_ptr<Acc>()},
                                  {ptr(g[0]), ptr(g[1]), ptr(g[2]), ptr(g[3]),
                                   ptr(g[4]), ptr(g[5])},
                                  dx.data_ptr<scalar_t>(),
                                  partial.data_ptr<Acc>());
        });
    const torch::Tensor sums = partial.sum(0);
    const auto param_dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["param_dtype"].toInt());
    return {dx,
            torch::Tensor(),
            torch::Tensor(),
            sums.narrow(0, 0, d.h).to(param_dtype),
            sums.narrow(0, d.h, d.h).to(param_dtype),
            sums.narrow(0, 2 * d.h, d.h).to(param_dtype)};
  }
};

}  // namespace

Mamba2InputTensors Mamba2InputsWithAten(const torch::Tensor& p, int64_t heads,
                                        int64_t state,
                                        const torch::Tensor& a_log,
                                        const torch::Tensor& dt_bias,
                                        const torch::Tensor& d_skip) {
  const int64_t b = p.size(0), t = p.size(1);
  const int64_t di = (p.size(2) - 2 * state - heads) / 2;
  const std::vector<torch::Tensor> parts =
      AtLeastFp32(p).split_with_sizes({di, di, state, state, heads}, -1);
  const torch::Tensor sx = torch::silu(parts[1]).view({b, t, heads, -1});
  const torch::Tensor dt = torch::softplus(parts[4] + dt_bias);  // (B, T, H)
  Mamba2InputTensors out;
  out.z = parts[0].contiguous();
  out.k = torch::silu(parts[2]).contiguous();
  out.q = torch::silu(parts[3]).contiguous();
  out.v = (sx * dt.unsqueeze(-1)).contiguous();
  out.skip = (sx * d_skip.view({heads, 1})).contiguous();
  out.g = (dt * -torch::exp(a_log)).transpose(1, 2).contiguous();
  return out;
}

Mamba2InputTensors Mamba2Inputs(const torch::Tensor& p, int64_t heads,
                                int64_t state, const torch::Tensor& a_log,
                                const torch::Tensor& dt_bias,
                                const torch::Tensor& d_skip) {
  TORCH_CHECK(p.dim() == 3 && heads > 0 && state > 0 &&
                  p.size(2) > 2 * state + heads &&
                  (p.size(2) - 2 * state - heads) % (2 * heads) == 0,
              "Mamba2Inputs: expected p (B, T, 2 * heads * P + 2 * state + "
              "heads) with heads = ",
              heads, ", state = ", state, ", got ", p.sizes());
  TORCH_CHECK(a_log.numel() == heads && dt_bias.numel() == heads &&
                  d_skip.numel() == heads,
              "Mamba2Inputs: A_log, dt_bias and D must have ", heads,
              " elements, got ", a_log.numel(), ", ", dt_bias.numel(), " and ",
              d_skip.numel());
  if (!internal::RawLoopsTake(p)) {
    return Mamba2InputsWithAten(p, heads, state, a_log, dt_bias, d_skip);
  }
  const torch::autograd::variable_list out =
      Mamba2InputsFunction::apply(p, heads, state, a_log, dt_bias, d_skip);
  return {out[0], out[1], out[2], out[3], out[4], out[5]};
}

}  // namespace hlab::model
