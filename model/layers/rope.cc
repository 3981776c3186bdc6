#include "model/layers/rope.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/fused_elementwise.h"
#include "model/cpu/raw_tensor.h"

namespace hlab::model {
namespace {

// (T, D, theta, compute dtype, device) -> (cos, sin), each (T, D).
using RopeKey =
    std::tuple<int64_t, int64_t, double, torch::ScalarType, std::string>;

// (cos, sin), each (T, D), of positions offset .. offset + T - 1.
std::pair<torch::Tensor, torch::Tensor> ComputeRopeTables(
    int64_t offset, int64_t t, int64_t d, double theta, torch::ScalarType dtype,
    const torch::Device& device) {
  // Frequencies and angles in fp64, then cast: exact enough for every dtype.
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor inv_freq =
      torch::pow(theta, -torch::arange(0, d, 2, f64) / static_cast<double>(d));
  const torch::Tensor angles = torch::outer(
      torch::arange(offset, offset + t, f64), inv_freq);       // (T, D/2)
  const torch::Tensor emb = torch::cat({angles, angles}, -1);  // (T, D)
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  return {emb.cos().to(options), emb.sin().to(options)};
}

std::pair<torch::Tensor, torch::Tensor> RopeTables(
    int64_t t, int64_t d, double theta, torch::ScalarType dtype,
    const torch::Device& device) {
  // A handful of (T, D, theta) combinations occur in a run; the bound only
  // guards against unbounded growth when T varies a lot (e.g. evaluation).
  constexpr size_t kMaxEntries = 64;
  static std::mutex mu;
  static std::map<RopeKey, std::pair<torch::Tensor, torch::Tensor>>
      cache;  // guarded by mu
  const RopeKey key{t, d, theta, dtype, device.str()};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;

  torch::NoGradGuard no_grad;
  // Made outside inference mode even when an evaluation asks first: a table
  // made inside it would be an inference tensor, which autograd refuses to
  // save, so a later backward (training, gradient profiling) would fail.
  c10::InferenceMode normal_tensors(false);
  std::pair<torch::Tensor, torch::Tensor> tables =
      ComputeRopeTables(0, t, d, theta, dtype, device);
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(key, tables);
  return tables;
}

// Rotates rows (B, H, T, D) of `in` into `out` (any strides with a unit
// last stride) by the table angles of each row's position; sign -1 rotates
// back (the backward).
void RotateRows(const torch::Tensor& in, const torch::Tensor& out,
                const torch::Tensor& cos, const torch::Tensor& sin,
                double sign) {
  const int64_t h = in.size(1), t = in.size(2), d = in.size(3);
  const int64_t rows = in.size(0) * h * t;
  internal::DispatchRaw(in.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    using A = internal::AccumOf<T>;
    const T* ip = internal::RawData<const T>(in);
    T* op = internal::RawData<T>(out);
    const A* cp = cos.data_ptr<A>();
    const A* sp = sin.data_ptr<A>();
    at::parallel_for(
        0, rows, std::max<int64_t>(1, 16384 / d), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            const int64_t bi = r / (h * t), hi = (r / t) % h, ti = r % t;
            internal::RopeRow(
                ip + bi * in.stride(0) + hi * in.stride(1) + ti * in.stride(2),
                cp + ti * d, sp + ti * d, d / 2, static_cast<A>(sign),
                op + bi * out.stride(0) + hi * out.stride(1) +
                    ti * out.stride(2));
          }
        });
  });
}

// An output like x: x's strides when x is dense (a view of a projection
// keeps its memory order, and its gradient then needs no copy), else
// contiguous.
torch::Tensor EmptyLike(const torch::Tensor& x) {
  return x.is_non_overlapping_and_dense()
             ? at::empty_strided(x.sizes(), x.strides(), x.options())
             : at::empty(x.sizes(), x.options());
}

// The rotation as one autograd node over the raw row loop of
// model/cpu/fused_elementwise.h: one pass forward, one backward (the
// inverse rotation), nothing saved but the cached tables.
class RopeFunction : public torch::autograd::Function<RopeFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& x_arg,
                               const torch::Tensor& cos,
                               const torch::Tensor& sin) {
    RECORD_FUNCTION("hlab::RopeFunction::forward", std::vector<c10::IValue>());
    const torch::Tensor x = x_arg.stride(3) == 1 ? x_arg : x_arg.contiguous();
    torch::Tensor y = EmptyLike(x);
    RotateRows(x, y, cos, sin, 1.0);
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["strides"] = x.strides().vec();
    ctx->saved_data["dense"] = x.is_non_overlapping_and_dense();
    return y;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor& g = grads[0];
    const torch::Tensor dy = g.stride(3) == 1 ? g : g.contiguous();
    const torch::Tensor dx =
        ctx->saved_data["dense"].toBool()
            ? at::empty_strided(dy.sizes(),
                                ctx->saved_data["strides"].toIntVector(),
                                dy.options())
            : at::empty(dy.sizes(), dy.options());
    RotateRows(dy, dx, saved[0], saved[1], -1.0);
    return {dx, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor ApplyRope(const torch::Tensor& x, double theta) {
  TORCH_CHECK(x.dim() == 4, "ApplyRope: x must be (B, H, T, D), got ",
              x.sizes());
  const int64_t t = x.size(2);
  const int64_t d = x.size(3);
  TORCH_CHECK(d % 2 == 0, "ApplyRope: head dim must be even, got ", d);
  const torch::ScalarType compute =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto [cos, sin] = RopeTables(t, d, theta, compute, x.device());
  if (internal::RawLoopsTake(x) && x.numel() > 0) {
    return RopeFunction::apply(x, cos, sin);
  }
  const torch::Tensor xc = x.to(compute);
  const std::vector<torch::Tensor> halves = xc.chunk(2, -1);
  const torch::Tensor rotated = torch::cat({-halves[1], halves[0]}, -1);
  return (xc * cos + rotated * sin).to(x.scalar_type());
}

torch::Tensor ApplyRopeAt(const torch::Tensor& x, double theta,
                          int64_t offset) {
  TORCH_CHECK(x.dim() == 4, "ApplyRopeAt: x must be (B, H, T, D), got ",
              x.sizes());
  TORCH_CHECK(offset >= 0, "ApplyRopeAt: offset must be >= 0, got ", offset);
  const int64_t d = x.size(3);
  TORCH_CHECK(d % 2 == 0, "ApplyRopeAt: head dim must be even, got ", d);
  torch::NoGradGuard no_grad;
  const torch::ScalarType compute =
      x.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  const auto [cos, sin] =
      ComputeRopeTables(offset, x.size(2), d, theta, compute, x.device());
  if (internal::RawLoopsTake(x) && x.numel() > 0) {
    const torch::Tensor in = x.stride(3) == 1 ? x : x.contiguous();
    torch::Tensor out = EmptyLike(in);
    RotateRows(in, out, cos, sin, 1.0);
    return out;
  }
  const torch::Tensor xc = x.to(compute);
  const std::vector<torch::Tensor> halves = xc.chunk(2, -1);
  const torch::Tensor rotated = torch::cat({-halves[1], halves[0]}, -1);
  return (xc * cos + rotated * sin).to(x.scalar_type());
}

}  // namespace hlab::model
