#include "model/layers/norm.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/chunk_rows.h"
#include "model/cpu/fused_elementwise.h"
#include "model/cpu/raw_tensor.h"

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
// model/cpu/fused_elementwise.h: one pass forward (saving 1/rms per
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

// A contiguous tensor of fp32, fp64 or bf16 read and written a row at a time
// in the compute dtype A (float, or double for fp64 tensors): in place when
// the tensor's dtype is A, else through a row buffer. Not
// internal::ViewOrLoadRows / StoreRowsBthd: those take (B, H, T, d) tensors
// and dispatch on every call. Lightning's gate (a slice of its projection)
// is made contiguous first: read in place through its row stride it
// measured slower (7.8-8.3 vs 5.7-7.3 ms, gate and norm of 8192 x 256).
class RowAccess {
 public:
  explicit RowAccess(const torch::Tensor& t)
      : dtype_(t.scalar_type()), data_(t.data_ptr()) {}

  // The n values at offset, as A (in buf when converted).
  template <typename A>
  const A* Read(int64_t offset, int64_t n, A* buf) const {
    if (dtype_ == c10::CppTypeToScalarType<A>::value) {
      return static_cast<const A*>(data_) + offset;
    }
    internal::DispatchRaw(dtype_, [&](auto tag) {
      using S = internal::StorageOf<decltype(tag)>;
      internal::LoadRow<S, A>(static_cast<const S*>(data_) + offset, buf, n);
    });
    return buf;
  }
  // Where to write the n values at offset: the tensor itself, or buf, which
  // Flush then converts into it.
  template <typename A>
  A* Target(int64_t offset, A* buf) const {
    return dtype_ == c10::CppTypeToScalarType<A>::value
               ? static_cast<A*>(data_) + offset
               : buf;
  }
  template <typename A>
  void Flush(const A* row, int64_t offset, int64_t n) const {
    if (dtype_ == c10::CppTypeToScalarType<A>::value) return;
    internal::DispatchRaw(dtype_, [&](auto tag) {
      using S = internal::StorageOf<decltype(tag)>;
      internal::StoreRow<S, A>(row, static_cast<S*>(data_) + offset, n);
    });
  }

 private:
  torch::ScalarType dtype_;
  void* data_;
};

// Per-thread rows of GatedRmsNormFunction, d values each.
template <typename A>
struct GatedRows {
  explicit GatedRows(int64_t d) : x(d), z(d), y(d), dx(d), dz(d) {}
  std::vector<A> x, z, y, dx, dz;
};

// Gated RMSNorm (GatedNormOptions) as one autograd node: one pass over the
// rows forward, one back (the gate and 1/rms recomputed), saving x, the
// gate and 1/rms. x and the gate are contiguous (rows, d) of fp32 or bf16 (or
// both fp64), the output of out_dtype; arithmetic in fp32 (fp64). Replaces
// the gate's activation, the product, RMSNorm and their dtype casts as
// separate passes.
class GatedRmsNormFunction
    : public torch::autograd::Function<GatedRmsNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_arg,
                               const torch::Tensor& gate_arg,
                               const torch::Tensor& weight, double eps,
                               bool norm_first, bool silu,
                               torch::ScalarType out_dtype) {
    RECORD_FUNCTION("hlab::GatedRmsNormFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor x = x_arg.contiguous(), gate = gate_arg.contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const auto accum =
        x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    const torch::Tensor w = weight.to(accum).contiguous();
    torch::Tensor y = at::empty(x.sizes(), x.options().dtype(out_dtype));
    torch::Tensor rstd = at::empty({rows}, x.options().dtype(accum));
    const RowAccess xr(x), zr(gate), yr(y);
    AT_DISPATCH_FLOATING_TYPES(accum, "GatedRmsNorm", [&] {
      using A = scalar_t;
      const A* wp = w.data_ptr<A>();
      A* rp = rstd.data_ptr<A>();
      at::parallel_for(0, rows, RowGrain(d), [&](int64_t r0, int64_t r1) {
        GatedRows<A> b(d);
        for (int64_t i = r0; i < r1; ++i) {
          A* yi = yr.Target(i * d, b.y.data());
          rp[i] = internal::GatedRmsNormForwardRow(
              xr.Read(i * d, d, b.x.data()), zr.Read(i * d, d, b.z.data()), wp,
              d, static_cast<A>(eps), norm_first, silu, yi);
          yr.Flush(yi, i * d, d);
        }
      });
    });
    ctx->save_for_backward({x, gate, w, rstd});
    ctx->saved_data["norm_first"] = norm_first;
    ctx->saved_data["silu"] = silu;
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &gate = saved[1], &w = saved[2],
                        &rstd = saved[3];
    const bool norm_first = ctx->saved_data["norm_first"].toBool();
    const bool silu = ctx->saved_data["silu"].toBool();
    const torch::Tensor dy = grads[0].contiguous();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const int64_t blocks =
        (rows + kWeightGradBlockRows - 1) / kWeightGradBlockRows;
    torch::Tensor dx = at::empty_like(x), dz = at::empty_like(gate);
    torch::Tensor partial = at::zeros({blocks, d}, w.options());
    const RowAccess xr(x), zr(gate), gr(dy), dxr(dx), dzr(dz);
    AT_DISPATCH_FLOATING_TYPES(w.scalar_type(), "GatedRmsNormBack", [&] {
      using A = scalar_t;
      const A* wp = w.data_ptr<A>();
      const A* rp = rstd.data_ptr<A>();
      A* pp = partial.data_ptr<A>();
      at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
        GatedRows<A> b(d);
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t end = std::min(rows, (blk + 1) * kWeightGradBlockRows);
          for (int64_t i = blk * kWeightGradBlockRows; i < end; ++i) {
            A* dxi = dxr.Target(i * d, b.dx.data());
            A* dzi = dzr.Target(i * d, b.dz.data());
            internal::GatedRmsNormBackwardRow(
                xr.Read(i * d, d, b.x.data()), zr.Read(i * d, d, b.z.data()),
                wp, rp[i], gr.Read(i * d, d, b.y.data()), d, norm_first, silu,
                dxi, dzi, pp + blk * d);
            dxr.Flush(dxi, i * d, d);
            dzr.Flush(dzi, i * d, d);
          }
        }
      });
      for (int64_t blk = 1; blk < blocks; ++blk) {
        for (int64_t j = 0; j < d; ++j) pp[j] += pp[blk * d + j];
      }
    });
    const auto weight_dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
    return {dx,
            dz,
            partial[0].to(weight_dtype),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

// RMSNorm of x (+ delta) as one autograd node, for an x of the compute
// dtype A (fp32, or fp64) whose result is wanted in another dtype, or with
// the residual add before it: one pass forward, one back, with delta (A, or
// bf16 for fp32), the result and the gradients read and written a row at a
// time through RowAccess. Outputs {sum, normed} with a delta, {normed}
// without. Saves the normalised rows (the sum, or x), the weight in A and
// 1/rms per row. Without the add, delta is ignored (pass x: LibTorch 1.13
// takes no undefined tensor arguments here).
class AddRmsNormFunction
    : public torch::autograd::Function<AddRmsNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_arg,
                               const torch::Tensor& delta_arg,
                               const torch::Tensor& weight, double eps,
                               torch::ScalarType out_dtype, bool add) {
    RECORD_FUNCTION("hlab::AddRmsNormFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor x = x_arg.contiguous();
    const torch::Tensor delta = add ? delta_arg.contiguous() : torch::Tensor();
    const int64_t d = x.size(-1), rows = x.numel() / d;
    const torch::Tensor w = weight.to(x.scalar_type()).contiguous();
    const torch::Tensor sum = add ? at::empty_like(x) : x;
    torch::Tensor y = at::empty(x.sizes(), x.options().dtype(out_dtype));
    torch::Tensor rstd = at::empty({rows}, x.options());
    const RowAccess yr(y);
    std::optional<RowAccess> dr;
    if (add) dr.emplace(delta);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "AddRmsNorm", [&] {
      using A = scalar_t;
      const A* xp = x.data_ptr<A>();
      A* sp = sum.data_ptr<A>();
      const A* wp = w.data_ptr<A>();
      A* rp = rstd.data_ptr<A>();
      at::parallel_for(0, rows, RowGrain(d), [&](int64_t r0, int64_t r1) {
        std::vector<A> delta_row(add ? d : 0), y_row(d);
        for (int64_t i = r0; i < r1; ++i) {
          if (add) {
            internal::AddVectors(xp + i * d,
                                 dr->Read(i * d, d, delta_row.data()), d,
                                 sp + i * d);
          }
          A* yi = yr.Target(i * d, y_row.data());
          internal::RmsNormForwardRows(sp + i * d, wp, 1, d,
                                       static_cast<A>(eps), yi, rp + i);
          yr.Flush(yi, i * d, d);
        }
      });
    });
    ctx->save_for_backward({sum, w, rstd});
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    if (add) {
      ctx->saved_data["delta_dtype"] = delta.scalar_type();
      return {sum, y};
    }
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &h = saved[0], &w = saved[1], &rstd = saved[2];
    const bool add = ctx->saved_data.count("delta_dtype") > 0;
    const torch::Tensor g_sum =
        add && grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    const torch::Tensor g_y = grads[add ? 1 : 0].defined()
                                  ? grads[add ? 1 : 0].contiguous()
                                  : torch::Tensor();
    const auto weight_dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
    const torch::ScalarType delta_dtype =
        add ? static_cast<torch::ScalarType>(
                  ctx->saved_data["delta_dtype"].toInt())
            : h.scalar_type();
    const int64_t d = h.size(-1), rows = h.numel() / d;
    if (!g_y.defined()) {
      // Only the sum was used: its gradient passes to x and delta as is.
      const torch::Tensor gx = g_sum.defined() ? g_sum : at::zeros_like(h);
      return {gx,
              add ? gx.to(delta_dtype) : torch::Tensor(),
              at::zeros(w.sizes(), w.options().dtype(weight_dtype)),
              torch::Tensor(),
              torch::Tensor(),
              torch::Tensor()};
    }
    const int64_t blocks =
        (rows + kWeightGradBlockRows - 1) / kWeightGradBlockRows;
    torch::Tensor gx = at::empty_like(h);
    const bool separate_delta = add && delta_dtype != h.scalar_type();
    torch::Tensor g_delta =
        separate_delta ? at::empty(h.sizes(), h.options().dtype(delta_dtype))
                       : gx;
    torch::Tensor partial = at::zeros({blocks, d}, w.options());
    const RowAccess gyr(g_y), gdr(g_delta);
    AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "AddRmsNormBack", [&] {
      using A = scalar_t;
      const A* hp = h.data_ptr<A>();
      const A* wp = w.data_ptr<A>();
      const A* rp = rstd.data_ptr<A>();
      const A* gsp = g_sum.defined() ? g_sum.data_ptr<A>() : nullptr;
      A* gxp = gx.data_ptr<A>();
      A* pp = partial.data_ptr<A>();
      at::parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
        std::vector<A> gy_row(d);
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t end = std::min(rows, (blk + 1) * kWeightGradBlockRows);
          for (int64_t i = blk * kWeightGradBlockRows; i < end; ++i) {
            A* gxi = gxp + i * d;
            internal::RmsNormBackwardRows(hp + i * d, wp, rp + i,
                                          gyr.Read(i * d, d, gy_row.data()), 1,
                                          d, gxi, pp + blk * d);
            if (gsp != nullptr) internal::AddVectors(gxi, gsp + i * d, d, gxi);
            if (separate_delta) gdr.Flush(gxi, i * d, d);
          }
        }
      });
      for (int64_t blk = 1; blk < blocks; ++blk) {
        for (int64_t j = 0; j < d; ++j) pp[j] += pp[blk * d + j];
      }
    });
    return {gx,
            add ? g_delta : torch::Tensor(),
            partial[0].to(weight_dtype),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& weight,
                      double eps, std::optional<torch::ScalarType> out_dtype) {
  const torch::ScalarType out = out_dtype.value_or(x.scalar_type());
  const bool shapes_fit = weight.device().is_cpu() && x.dim() > 0 &&
                          x.numel() > 0 && weight.dim() == 1 &&
                          weight.size(0) == x.size(-1);
  if (internal::RawLoopsTake(x) && shapes_fit) {
    if (out == x.scalar_type()) return RmsNormFunction::apply(x, weight, eps);
    if (x.scalar_type() == torch::kFloat32 &&
        (out == torch::kFloat32 || out == torch::kBFloat16)) {
      return AddRmsNormFunction::apply(x, x, weight, eps, out,
                                       /*add=*/false)[0];
    }
  }
  const auto stat_dtype =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor xf = x.to(stat_dtype);
  const torch::Tensor inv = torch::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return (xf * inv * weight.to(stat_dtype)).to(out);
}

NormedSum AddRmsNorm(const torch::Tensor& x, const torch::Tensor& delta,
                     const torch::Tensor& weight, double eps,
                     std::optional<torch::ScalarType> out_dtype) {
  const torch::ScalarType out = out_dtype.value_or(x.scalar_type());
  const torch::ScalarType t = x.scalar_type();
  // fp64 throughout, or an fp32 sum with fp32 / bf16 for the rest.
  const auto takes = [&](torch::ScalarType s) {
    return t == torch::kFloat64
               ? s == torch::kFloat64
               : t == torch::kFloat32 &&
                     (s == torch::kFloat32 || s == torch::kBFloat16);
  };
  if (internal::RawLoopsTake(x) && internal::RawLoopsTake(delta) &&
      takes(delta.scalar_type()) && takes(out) && delta.sizes() == x.sizes() &&
      weight.device().is_cpu() && x.dim() > 0 && x.numel() > 0 &&
      weight.dim() == 1 && weight.size(0) == x.size(-1)) {
    const variable_list outs =
        AddRmsNormFunction::apply(x, delta, weight, eps, out, /*add=*/true);
    return {outs[0], outs[1]};
  }
  torch::Tensor sum = x + delta;
  torch::Tensor normed = RmsNorm(sum, weight, eps, out);
  return {std::move(sum), std::move(normed)};
}

torch::Tensor GatedRmsNorm(const torch::Tensor& x, const torch::Tensor& gate,
                           const torch::Tensor& weight, double eps,
                           const GatedNormOptions& options) {
  const torch::ScalarType out_dtype =
      options.out_dtype.value_or(x.scalar_type());
  const bool fp64 = x.scalar_type() == torch::kFloat64;
  // fp64 throughout, or fp32 / bf16 in any mix.
  const auto computable = [&](torch::ScalarType t) {
    return fp64 ? t == torch::kFloat64
                : t == torch::kFloat32 || t == torch::kBFloat16;
  };
  if (internal::RawLoopsTake(x) && internal::RawLoopsTake(gate) &&
      computable(gate.scalar_type()) && computable(out_dtype) &&
      weight.device().is_cpu() && x.dim() > 0 && x.numel() > 0 &&
      gate.sizes() == x.sizes() && weight.dim() == 1 &&
      weight.size(0) == x.size(-1)) {
    return GatedRmsNormFunction::apply(
        x, gate, weight, eps, options.order == GatedNormOrder::kNormThenGate,
        options.activation == GateActivation::kSilu, out_dtype);
  }
  const auto stat_dtype = fp64 ? torch::kFloat64 : torch::kFloat32;
  const torch::Tensor xs = x.to(stat_dtype), zs = gate.to(stat_dtype);
  const torch::Tensor a = options.activation == GateActivation::kSilu
                              ? torch::silu(zs)
                              : torch::sigmoid(zs);
  const torch::Tensor y = options.order == GatedNormOrder::kNormThenGate
                              ? RmsNorm(xs, weight, eps) * a
                              : RmsNorm(a * xs, weight, eps);
  return y.to(out_dtype);
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  return RmsNorm(x, weight, eps_);
}

}  // namespace hlab::model
