#include "model/silu_heads.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/internal/vec_math.h"

namespace hlab::model {
namespace {

constexpr double kL2Eps = 1e-6;  // fla's l2norm

// ---------------------------------------------------------------------------
// One head's row of dh values. The float versions are vectorised row loops.

using internal::Sigmoid;  // model/internal/vec_math.h

// y = silu(x); returns |y|^2.
HLAB_VECTOR_CLONES float SiluRow(const float* x, float* y, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] * Sigmoid(x[i]);
    sum += y[i] * y[i];
  }
  return sum;
}
double SiluRow(const double* x, double* y, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] * Sigmoid(x[i]);
    sum += y[i] * y[i];
  }
  return sum;
}

HLAB_VECTOR_CLONES void ScaleRow(float* y, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}
void ScaleRow(double* y, int64_t n, double s) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

// dx from dy for y = r silu(x) with r = (|silu(x)|^2 + eps)^-1/2 (l2) or
// r = 1: ds = r (dy - y (y . dy)), dx = ds sigmoid(x) (1 + x (1 - sigmoid(x))).
// s: scratch of n.
HLAB_VECTOR_CLONES void SiluBackwardRow(const float* x, const float* dy,
                                        float* dx, float* s, int64_t n,
                                        bool l2) {
  float ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) {
    s[i] = x[i] * Sigmoid(x[i]);
    ss += s[i] * s[i];
  }
  const float r = l2 ? 1.0f / std::sqrt(ss + static_cast<float>(kL2Eps)) : 1;
  float dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t i = 0; i < n; ++i) dot += s[i] * dy[i];
  const float c = l2 ? r * r * dot : 0;  // (y . dy) with y = r s, times r
  for (int64_t i = 0; i < n; ++i) {
    const float sig = Sigmoid(x[i]);
    const float ds = r * dy[i] - c * r * s[i];
    dx[i] = ds * sig * (1 + x[i] * (1 - sig));
  }
}
void SiluBackwardRow(const double* x, const double* dy, double* dx, double* s,
                     int64_t n, bool l2) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    s[i] = x[i] * Sigmoid(x[i]);
    ss += s[i] * s[i];
  }
  const double r = l2 ? 1.0 / std::sqrt(ss + kL2Eps) : 1;
  double dot = 0;
  for (int64_t i = 0; i < n; ++i) dot += s[i] * dy[i];
  const double c = l2 ? r * r * dot : 0;
  for (int64_t i = 0; i < n; ++i) {
    const double sig = Sigmoid(x[i]);
    const double ds = r * dy[i] - c * r * s[i];
    dx[i] = ds * sig * (1 + x[i] * (1 - sig));
  }
}

// ---------------------------------------------------------------------------
// Whole tensors: x (B, T, H * dh) with strides (sb, st, 1); heads-major
// (B, H, T, dh) contiguous buffers of the accumulator type Acc.

struct Dims {
  int64_t b = 0, t = 0, h = 0, dh = 0;
  int64_t sb = 0, st = 0;  // x's batch and time strides
};

// Calls fn(b, t, scratch) for every row of x on the intra-op threads;
// scratch: three buffers of dh per thread.
template <typename Acc, typename Fn>
void ForEachRow(const Dims& d, const Fn& fn) {
  const int64_t grain = std::max<int64_t>(1, 4096 / (d.h * d.dh));
  at::parallel_for(0, d.b * d.t, grain, [&](int64_t begin, int64_t end) {
    std::vector<Acc> scratch(3 * d.dh);
    for (int64_t row = begin; row < end; ++row) {
      fn(row / d.t, row % d.t, scratch.data());
    }
  });
}

template <typename In, typename Acc>
void Forward(const Dims& d, bool l2, const In* x, Acc* y) {
  ForEachRow<Acc>(d, [&](int64_t b, int64_t t, Acc* xa) {
    for (int64_t h = 0; h < d.h; ++h) {
      const In* xr = x + b * d.sb + t * d.st + h * d.dh;
      for (int64_t i = 0; i < d.dh; ++i) xa[i] = static_cast<Acc>(xr[i]);
      Acc* yr = y + ((b * d.h + h) * d.t + t) * d.dh;
      const Acc ss = SiluRow(xa, yr, d.dh);
      if (l2) ScaleRow(yr, d.dh, Acc(1) / std::sqrt(ss + Acc(kL2Eps)));
    }
  });
}

template <typename In, typename Acc>
void Backward(const Dims& d, bool l2, const In* x, const Acc* dy, In* dx) {
  ForEachRow<Acc>(d, [&](int64_t b, int64_t t, Acc* scratch) {
    Acc* xa = scratch;
    Acc* dxa = scratch + d.dh;
    Acc* s = scratch + 2 * d.dh;
    for (int64_t h = 0; h < d.h; ++h) {
      const In* xr = x + b * d.sb + t * d.st + h * d.dh;
      for (int64_t i = 0; i < d.dh; ++i) xa[i] = static_cast<Acc>(xr[i]);
      const Acc* dyr = dy + ((b * d.h + h) * d.t + t) * d.dh;
      SiluBackwardRow(xa, dyr, dxa, s, d.dh, l2);
      In* dxr = dx + (b * d.t + t) * d.h * d.dh + h * d.dh;
      for (int64_t i = 0; i < d.dh; ++i) dxr[i] = static_cast<In>(dxa[i]);
    }
  });
}

template <typename In>
using AccOf = std::conditional_t<std::is_same_v<In, double>, double, float>;

Dims DimsOf(const torch::Tensor& x, int64_t heads) {
  return {x.size(0),         x.size(1),   heads,
          x.size(2) / heads, x.stride(0), x.stride(1)};
}

class SiluToHeadsFunction
    : public torch::autograd::Function<SiluToHeadsFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x_arg, int64_t heads,
                               bool l2_normalize) {
    RECORD_FUNCTION("hlab::SiluToHeadsFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor x = x_arg.stride(2) == 1 ? x_arg : x_arg.contiguous();
    const Dims d = DimsOf(x, heads);
    const auto acc =
        x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    torch::Tensor y = at::empty({d.b, d.h, d.t, d.dh}, x.options().dtype(acc));
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kBFloat16, at::kHalf, x.scalar_type(), "SiluToHeads", [&] {
          Forward<scalar_t, AccOf<scalar_t>>(d, l2_normalize,
                                             x.data_ptr<scalar_t>(),
                                             y.data_ptr<AccOf<scalar_t>>());
        });
    ctx->save_for_backward({x});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["l2"] = l2_normalize;
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const Dims d = DimsOf(x, ctx->saved_data["heads"].toInt());
    const bool l2 = ctx->saved_data["l2"].toBool();
    const auto acc =
        x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    const torch::Tensor dy = grads[0].to(acc).contiguous();
    torch::Tensor dx = at::empty({d.b, d.t, d.h * d.dh}, x.options());
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::kBFloat16, at::kHalf, x.scalar_type(), "SiluToHeadsBackward", [&] {
          Backward<scalar_t, AccOf<scalar_t>>(d, l2, x.data_ptr<scalar_t>(),
                                              dy.data_ptr<AccOf<scalar_t>>(),
                                              dx.data_ptr<scalar_t>());
        });
    return {dx, torch::Tensor(), torch::Tensor()};
  }
};

// The same with ATen ops, for devices other than the CPU.
torch::Tensor SiluToHeadsWithAten(const torch::Tensor& x, int64_t heads,
                                  bool l2_normalize) {
  const int64_t b = x.size(0), t = x.size(1), dh = x.size(2) / heads;
  torch::Tensor y =
      torch::silu(x.scalar_type() == torch::kFloat64 ? x
                                                     : x.to(torch::kFloat32))
          .view({b, t, heads, dh});
  if (l2_normalize) {
    y = y * torch::rsqrt(y.square().sum(-1, /*keepdim=*/true) + kL2Eps);
  }
  return y.transpose(1, 2).contiguous();
}

}  // namespace

torch::Tensor SiluToHeads(const torch::Tensor& x, int64_t heads,
                          bool l2_normalize) {
  TORCH_CHECK(x.dim() == 3 && heads > 0 && x.size(2) % heads == 0,
              "SiluToHeads: expected x (B, T, heads * dh) with heads = ", heads,
              ", got ", x.sizes());
  const bool cpu_dtype = x.scalar_type() == torch::kFloat32 ||
                         x.scalar_type() == torch::kFloat64 ||
                         x.scalar_type() == torch::kBFloat16 ||
                         x.scalar_type() == torch::kHalf;
  if (!x.device().is_cpu() || !cpu_dtype) {
    return SiluToHeadsWithAten(x, heads, l2_normalize);
  }
  return SiluToHeadsFunction::apply(x, heads, l2_normalize);
}

}  // namespace hlab::model
