// ParallelBaddbmm and UnitLowerInverse (declared in
// model/kernels/scalar_gla_kernel.h): batches of small matrices, split across
// the intra-op threads. On the CPU in fp32 / fp64 each matrix is one direct
// row-major GEMM call on raw memory (model/cpu/blas.h), transposed views read
// through their strides; ATen's bmm would instead loop over the batch with
// select + addmm per matrix (tens of thousands of dispatched ops per training
// step at T=8192). The unit-lower inverse is forward substitution on raw
// memory. Other devices and dtypes, and a process without the BLAS symbols,
// take the ATen ops.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/blas.h"
#include "model/cpu/raw_tensor.h"
#include "model/cpu/unit_lower.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model {
namespace {

// Calls fn(begin, end) on ranges splitting [0, n) across the intra-op
// threads, with autograd dispatch off (fn only writes into tensors it owns).
// Each range gets at least ~2^16 multiply-adds of work. The BLAS is
// single-threaded (internal::UseOneThreadPool): the threads are ours.
// On any device but the CPU it is one call, fn(0, n): there fn's ops are
// kernel launches on one stream, and host threads would only multiply them.
//
// at::parallel_for is header-inline: it runs in parallel only when this file
// is compiled with OpenMP (-fopenmp), and serially otherwise.
template <typename Fn>
void ParallelOverBatch(const torch::Device& device, int64_t n,
                       int64_t work_per_item, const Fn& fn) {
  if (!device.is_cpu()) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    fn(0, n);
    return;
  }
  constexpr int64_t kMinWork = int64_t{1} << 16;
  internal::UseOneThreadPool();
  const int64_t grain =
      std::max<int64_t>(1, kMinWork / std::max<int64_t>(1, work_per_item));
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    fn(begin, end);
  });
}

// How the matrices of a 3-D (N, r, c) tensor lie in memory for a row-major
// GEMM: row-major with row stride ld (strides (.., ld, 1)), or the row-major
// storage of the transpose (strides (.., 1, ld)). Dimensions of size 1 take
// any stride.
struct MatrixLayout {
  bool usable = false;
  bool transposed = false;
  int64_t ld = 0;
};

MatrixLayout LayoutOf(const torch::Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2);
  const int64_t s_row = t.stride(1), s_col = t.stride(2);
  MatrixLayout layout;
  if ((cols == 1 || s_col == 1) && (rows == 1 || s_row >= cols)) {
    layout = {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : s_row};
  } else if ((rows == 1 || s_row == 1) && (cols == 1 || s_col >= rows)) {
    layout = {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : s_col};
  }
  if (layout.ld > INT_MAX) layout.usable = false;
  return layout;
}

// t itself when LayoutOf(t) is usable, else a contiguous copy.
torch::Tensor GemmReadable(const torch::Tensor& t) {
  return LayoutOf(t).usable ? t : t.contiguous();
}

// out[i] = alpha a[i] b[i] + beta out[i] for i in [begin, end); out is
// contiguous, a and b GemmReadable.
template <typename T>
void GemmBatch(const torch::Tensor& a, const torch::Tensor& b, T alpha, T beta,
               torch::Tensor& out, int64_t begin, int64_t end) {
  const MatrixLayout la = LayoutOf(a), lb = LayoutOf(b);
  const int64_t m = a.size(1), k = a.size(2), n = b.size(2);
  const T* a_data = a.data_ptr<T>();
  const T* b_data = b.data_ptr<T>();
  T* out_data = out.data_ptr<T>();
  for (int64_t i = begin; i < end; ++i) {
    internal::Gemm(la.transposed, lb.transposed, m, n, k, alpha,
                   a_data + i * a.stride(0), la.ld, b_data + i * b.stride(0),
                   lb.ld, beta, out_data + i * m * n, n);
  }
}

// out = beta * c + alpha * a @ b through direct GEMM calls; c may be
// undefined. Requires internal::BlasServes(a) and matching dtypes.
torch::Tensor BlasBaddbmm(const torch::Tensor& c, const torch::Tensor& a_arg,
                          const torch::Tensor& b_arg, double beta,
                          double alpha) {
  const torch::Tensor a = GemmReadable(a_arg), b = GemmReadable(b_arg);
  const int64_t n = a.size(0), rows = a.size(1), inner = a.size(2),
                cols = b.size(2);
  torch::Tensor out = c.defined() ? c.clone(at::MemoryFormat::Contiguous)
                                  : at::empty({n, rows, cols}, a.options());
  const double gemm_beta = c.defined() ? beta : 0.0;
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "BlasBaddbmm", [&] {
    ParallelOverBatch(a.device(), n, rows * inner * cols,
                      [&](int64_t begin, int64_t end) {
                        GemmBatch<scalar_t>(a, b, static_cast<scalar_t>(alpha),
                                            static_cast<scalar_t>(gemm_beta),
                                            out, begin, end);
                      });
  });
  return out;
}

// out = beta * c + alpha * a @ b without autograd; c may be undefined.
torch::Tensor RawParallelBaddbmm(const torch::Tensor& c, const torch::Tensor& a,
                                 const torch::Tensor& b, double beta,
                                 double alpha) {
  const int64_t n = a.size(0), rows = a.size(1), inner = a.size(2),
                cols = b.size(2);
  const bool same_dtype = b.scalar_type() == a.scalar_type() &&
                          (!c.defined() || c.scalar_type() == a.scalar_type());
  if (inner > 0 && same_dtype && internal::BlasServes(a)) {
    return BlasBaddbmm(c, a, b, beta, alpha);
  }
  torch::Tensor out = at::empty({n, rows, cols}, a.options());
  ParallelOverBatch(
      a.device(), n, rows * inner * cols, [&](int64_t begin, int64_t end) {
        const int64_t len = end - begin;
        torch::Tensor o = out.narrow(0, begin, len);
        if (c.defined()) {
          at::baddbmm_out(o, c.narrow(0, begin, len), a.narrow(0, begin, len),
                          b.narrow(0, begin, len), beta, alpha);
        } else {
          at::bmm_out(o, a.narrow(0, begin, len), b.narrow(0, begin, len));
          if (alpha != 1.0) o.mul_(alpha);
        }
      });
  return out;
}

class ParallelBaddbmmFunction
    : public torch::autograd::Function<ParallelBaddbmmFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const c10::optional<torch::Tensor>& c,
                               const torch::Tensor& a, const torch::Tensor& b,
                               double beta, double alpha) {
    RECORD_FUNCTION("hlab::ParallelBaddbmmFunction::forward",
                    std::vector<c10::IValue>());
    const bool has_c = c.has_value() && c->defined();
    ctx->save_for_backward({a, b});
    ctx->saved_data["c_grad"] = has_c && c->requires_grad();
    ctx->saved_data["beta"] = beta;
    ctx->saved_data["alpha"] = alpha;
    return RawParallelBaddbmm(has_c ? *c : torch::Tensor(), a, b, beta, alpha);
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor& a = saved[0];
    const torch::Tensor& b = saved[1];
    const double alpha = ctx->saved_data["alpha"].toDouble();
    const torch::Tensor grad = grads[0];
    torch::Tensor grad_c, grad_a, grad_b;
    if (ctx->saved_data["c_grad"].toBool()) {
      const double beta = ctx->saved_data["beta"].toDouble();
      grad_c = beta == 1.0 ? grad : grad * beta;
    }
    if (a.requires_grad()) {
      grad_a = RawParallelBaddbmm({}, grad, b.transpose(1, 2), 0.0, alpha);
    }
    if (b.requires_grad()) {
      grad_b = RawParallelBaddbmm({}, a.transpose(1, 2), grad, 0.0, alpha);
    }
    return {grad_c, grad_a, grad_b, torch::Tensor(), torch::Tensor()};
  }
};

// grad_a (C x C) = strict_lower(-x^T g x^T) for the inverse x and the
// output gradient g, both row-major; tmp: C x C scratch.
template <typename T>
void UnitLowerInverseGrad(const T* x, const T* g, int64_t c, T* tmp,
                          T* grad_a) {
  internal::Gemm(true, false, c, c, c, T(-1), x, c, g, c, T(0), tmp, c);
  internal::Gemm(false, true, c, c, c, T(1), tmp, c, x, c, T(0), grad_a, c);
  for (int64_t i = 0; i < c; ++i)
    std::fill(grad_a + i * c + i, grad_a + (i + 1) * c, T(0));
}

// (I + strict_lower(a))^-1, differentiable in a.
class UnitLowerInverseFunction
    : public torch::autograd::Function<UnitLowerInverseFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& a) {
    RECORD_FUNCTION("hlab::UnitLowerInverseFunction::forward",
                    std::vector<c10::IValue>());
    const int64_t n = a.size(0), c = a.size(1);
    torch::Tensor inverse = at::empty({n, c, c}, a.options());
    const bool raw =
        a.device().is_cpu() && (a.scalar_type() == torch::kFloat32 ||
                                a.scalar_type() == torch::kFloat64);
    if (raw) {
      const torch::Tensor ac = a.contiguous();
      AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "UnitLowerInverse", [&] {
        const scalar_t* in = ac.data_ptr<scalar_t>();
        scalar_t* out = inverse.data_ptr<scalar_t>();
        ParallelOverBatch(
            a.device(), n, c * c * c / 6, [&](int64_t begin, int64_t end) {
              for (int64_t i = begin; i < end; ++i) {
                internal::InvertUnitLower(in + i * c * c, c, out + i * c * c);
              }
            });
      });
    } else {
      const torch::Tensor eye = at::eye(c, a.options());
      ParallelOverBatch(
          a.device(), n, c * c * c / 2, [&](int64_t begin, int64_t end) {
            const int64_t len = end - begin;
            torch::Tensor out = inverse.narrow(0, begin, len);
            at::linalg_solve_triangular_out(out, a.narrow(0, begin, len),
                                            eye.expand({len, c, c}),
                                            /*upper=*/false, /*left=*/true,
                                            /*unitriangular=*/true);
          });
    }
    ctx->save_for_backward({inverse});
    return inverse;
  }

  // d(M^-1) = -M^-1 dM M^-1, so dL/dM = -M^-T (dL/dM^-1) M^-T, of which only
  // the strict lower triangle reaches a.
  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const torch::Tensor inverse = ctx->get_saved_variables()[0];
    if (!internal::BlasServes(inverse) ||
        grads[0].scalar_type() != inverse.scalar_type()) {
      const torch::Tensor inverse_t = inverse.transpose(1, 2);
      const torch::Tensor grad = RawParallelBaddbmm(
          {}, RawParallelBaddbmm({}, inverse_t, grads[0], 0.0, -1.0), inverse_t,
          0.0, 1.0);
      return {grad.tril(-1)};
    }
    const int64_t n = inverse.size(0), c = inverse.size(1);
    const torch::Tensor g = grads[0].contiguous();
    torch::Tensor grad_a = at::empty_like(inverse);
    AT_DISPATCH_FLOATING_TYPES(
        inverse.scalar_type(), "UnitLowerInverseGrad", [&] {
          const scalar_t* x = inverse.data_ptr<scalar_t>();
          const scalar_t* gd = g.data_ptr<scalar_t>();
          scalar_t* out = grad_a.data_ptr<scalar_t>();
          ParallelOverBatch(inverse.device(), n, 2 * c * c * c,
                            [&](int64_t begin, int64_t end) {
                              std::vector<scalar_t> tmp(c * c);
                              for (int64_t i = begin; i < end; ++i) {
                                UnitLowerInverseGrad(
                                    x + i * c * c, gd + i * c * c, c,
                                    tmp.data(), out + i * c * c);
                              }
                            });
        });
    return {grad_a};
  }
};

}  // namespace

torch::Tensor ParallelBaddbmm(const c10::optional<torch::Tensor>& c,
                              const torch::Tensor& a, const torch::Tensor& b,
                              double beta, double alpha) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) &&
                  a.size(2) == b.size(1),
              "ParallelBaddbmm: expected a (N, m, k), b (N, k, n), got ",
              a.sizes(), " and ", b.sizes());
  TORCH_CHECK(
      !c.has_value() || !c->defined() ||
          c->sizes() == torch::IntArrayRef({a.size(0), a.size(1), b.size(2)}),
      "ParallelBaddbmm: c must be (N, m, n)");
  return ParallelBaddbmmFunction::apply(c, a, b, beta, alpha);
}

torch::Tensor UnitLowerInverse(const torch::Tensor& a) {
  TORCH_CHECK(a.dim() == 3 && a.size(1) == a.size(2),
              "UnitLowerInverse: expected (N, C, C), got ", a.sizes());
  return UnitLowerInverseFunction::apply(a);
}

}  // namespace hlab::model
