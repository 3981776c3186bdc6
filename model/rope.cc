#include "model/rope.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

namespace hlab::model {
namespace {

// (T, D, theta, compute dtype, device) -> (cos, sin), each (T, D).
using RopeKey =
    std::tuple<int64_t, int64_t, double, torch::ScalarType, std::string>;

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
  // Frequencies and angles in fp64, then cast: exact enough for every dtype.
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const torch::Tensor inv_freq =
      torch::pow(theta, -torch::arange(0, d, 2, f64) / static_cast<double>(d));
  const torch::Tensor angles =
      torch::outer(torch::arange(t, f64), inv_freq);           // (T, D/2)
  const torch::Tensor emb = torch::cat({angles, angles}, -1);  // (T, D)
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  std::pair<torch::Tensor, torch::Tensor> tables{emb.cos().to(options),
                                                 emb.sin().to(options)};
  if (cache.size() >= kMaxEntries) cache.clear();
  cache.emplace(key, tables);
  return tables;
}

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
  const torch::Tensor xc = x.to(compute);
  const std::vector<torch::Tensor> halves = xc.chunk(2, -1);
  const torch::Tensor rotated = torch::cat({-halves[1], halves[0]}, -1);
  return (xc * cos + rotated * sin).to(x.scalar_type());
}

}  // namespace hlab::model
