#include "model/layers/linear.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/cpu/blas.h"
#include "model/cpu/fused_elementwise.h"
#include "model/cpu/raw_tensor.h"

namespace hlab::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Calls fn(begin, end) on ranges of [0, n) spread over the intra-op
// threads, each a run of whole `chunk`-row chunks (begin a multiple of
// chunk): a caller that walks its range chunk by chunk makes the same BLAS
// calls whatever the thread count.
template <typename Fn>
void SplitChunks(int64_t n, int64_t chunk, const Fn& fn) {
  internal::UseOneThreadPool();
  const int64_t chunks = (n + chunk - 1) / chunk;
  at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    fn(c0 * chunk, std::min(n, c1 * chunk));
  });
}

// Rows of a product's output below which a split does not pay.
constexpr int64_t kMinRows = 64;

// Rows per block of an fp32 product's output: about `target` blocks of a
// multiple of `align` rows, at least `min_rows` and at most `max_rows`
// (which wins). A function of the shape alone, never of the thread count.
int64_t BlockRows(int64_t rows, int64_t target, int64_t align, int64_t min_rows,
                  int64_t max_rows) {
  const int64_t per_block = (rows + target - 1) / target;
  const int64_t aligned = (per_block + align - 1) / align * align;
  return std::min(std::max(aligned, min_rows), max_rows);
}

// Calls fn(begin, end) on the blocks [i * block, min(n, (i + 1) * block))
// of [0, n), spread over the intra-op threads, each block one
// single-threaded BLAS call. The blocks are fixed by n and block, not by the
// thread count: the BLAS picks its kernel, and with it the order of each
// sum, by the shape of the call (OpenBLAS's 300 x 32 -> 16 product made in
// 75-row calls differs in the last bits from one call, as does oneDNN's
// 999 x 200 x 96 in calls of 1-16 rows), so every element must come from
// the same call whatever the thread count.
template <typename Fn>
void ForEachBlock(int64_t n, int64_t block, const Fn& fn) {
  SplitChunks(n, block, [&](int64_t begin, int64_t end) {
    for (int64_t r0 = begin; r0 < end; r0 += block) {
      fn(r0, std::min(end, r0 + block));
    }
  });
}

// Rows per block of a product's output (y or dx): about 16 blocks of
// 64-512 rows. Each call packs the weight again: one thread of oneDNN's
// sgemm (tried, not used now) ran the FFN and QKV shapes (4096 rows) 5-18%
// slower in 64-row calls than in one call, and as fast or 1-11% faster in
// 512-row calls (docs/performance.md).
int64_t ProductBlockRows(int64_t m) {
  return BlockRows(m, 16, 64, kMinRows, 512);
}

// Rows per block of the fp32 forward product y = x w^T (out outputs a row):
// one call for up to 512 rows in whole 64-row blocks with out >= 24, else
// ProductBlockRows. There the one call gives the same bits as the 64-row
// blocks it replaces (OpenBLAS 0.3.21 takes both through its packed kernel,
// summing each element over `in` in the same order; only a block small enough
// for its small-matrix kernel, out * rows <= 1200, or a short last block
// differs), packs w once instead of once a block, and ran the micro model's
// products 10-13% faster (docs/performance.md, "Micro-model steps"). Bitwise
// against the 64-row blocks: tests/model/layers/linear_test.cc.
//
// Not for a wide output (out > 4096, an LM head's vocabulary): one call is
// one thread, and the LM head's loss in 512-row blocks
// (model/kernels/linear_cross_entropy.h) then ran its forward products on
// one of two cores: Llama 3's 128,256 ids, d_model 64, 8,192 tokens a step
// (hlab-bench-train --prepared, 2 threads) took 6.17 and 6.02 s a step
// against 5.26 and 5.64 s in 64-row blocks, which give the same bits there.
int64_t ForwardBlockRows(int64_t m, int64_t out) {
  constexpr int64_t kMaxOneCallRows = 512, kMinOneCallOut = 24;
  constexpr int64_t kMaxOneCallOut = 4096;
  if (m <= kMaxOneCallRows && m % kMinRows == 0 && out >= kMinOneCallOut &&
      out <= kMaxOneCallOut) {
    return m;
  }
  return ProductBlockRows(m);
}

// dw = dy^T x (dy: m x out, x: m x in, dw: out x in), without a split that
// depends on the thread count. The sum over the m rows (tokens) is split
// into groups of at least 4096 rows, at most 16 groups and 64 MiB of
// partial sums (fixed by the shape): each group's product is one call, and
// the groups' partial sums are added in group order. Splitting the sum
// rather than dw's rows keeps each call's packing of dy and x to its own
// rows: OpenBLAS ran the FFN down projection's dw (m = 8192, one thread)
// at 79.6 GFLOP/s on half of dw's rows, the split this replaces, and 97.0
// in one call; oneDNN's (tried) 7-17% faster in 1024-4096-row groups than
// in quarters of dw's rows. Groups are large because adding the partial sums is
// a pass over memory: with AMX's bf16 GEMM, eight 1024-row groups' sums would
// cost ~20% of the product (docs/performance.md). Below two groups, blocks of
// dw's rows.
//
// In is the operands' type (float, double, or Bf16 under autocast), T the
// accumulator's and dw's.
template <typename T, typename In>
void WeightGradient(int64_t m, int64_t in, int64_t out, const In* dy,
                    const In* x, T* dw) {
  constexpr int64_t kMinGroupRows = 4096, kMaxGroups = 16;
  constexpr int64_t kMaxPartialBytes = int64_t{64} << 20;
  const int64_t size = out * in;
  const int64_t groups = std::min(
      {kMaxGroups, m / kMinGroupRows,
       1 + kMaxPartialBytes / std::max<int64_t>(1, size * int64_t{sizeof(T)})});
  if (groups < 2) {
    ForEachBlock(out, BlockRows(out, 4, 16, 16, out),
                 [&](int64_t r0, int64_t r1) {
                   internal::Gemm(true, false, r1 - r0, in, m, T(1), dy + r0,
                                  out, x, in, T(0), dw + r0 * in, in);
                 });
    return;
  }
  const int64_t rows = (m + groups - 1) / groups;
  const std::unique_ptr<T[]> partial(new T[(groups - 1) * size]);
  ForEachBlock(groups, 1, [&](int64_t g, int64_t) {
    const int64_t r0 = g * rows, r1 = std::min(m, r0 + rows);
    T* c = g == 0 ? dw : partial.get() + (g - 1) * size;
    if (r1 <= r0) {
      std::fill(c, c + size, T(0));
      return;
    }
    internal::Gemm(true, false, out, in, r1 - r0, T(1), dy + r0 * out, out,
                   x + r0 * in, in, T(0), c, in);
  });
  at::parallel_for(0, size, 16384, [&](int64_t i0, int64_t i1) {
    for (int64_t g = 0; g + 1 < groups; ++g) {
      const T* p = partial.get() + g * size;
      for (int64_t i = i0; i < i1; ++i) dw[i] += p[i];
    }
  });
}

// x's shape with its last dimension `last`.
std::vector<int64_t> WithLastDim(const torch::Tensor& x, int64_t last) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = last;
  return shape;
}

// One autograd node for the whole product, whatever x's rank: the (M, in)
// matrix of x's rows and the reshapes back are made inside forward and
// backward, not as view nodes around it (two nodes fewer a linear, each a
// dispatch forward and a node in backward).
class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  // x_nd: (..., in); weight: (out, in) contiguous. Returns (..., out).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_nd,
                               const torch::Tensor& weight) {
    RECORD_FUNCTION("hlab::LinearFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor x = x_nd.reshape({-1, x_nd.size(-1)}).contiguous();
    const int64_t m = x.size(0), in = x.size(1), out = weight.size(0);
    // (M, out) rows in the layout of (..., out).
    torch::Tensor y = at::empty(WithLastDim(x_nd, out), x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "LinearForward", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      const scalar_t* wp = weight.data_ptr<scalar_t>();
      scalar_t* yp = y.data_ptr<scalar_t>();
      const int64_t block = std::is_same_v<scalar_t, float>
                                ? ForwardBlockRows(m, out)
                                : ProductBlockRows(m);
      ForEachBlock(m, block, [&](int64_t r0, int64_t r1) {
        internal::Gemm(false, true, r1 - r0, out, in, scalar_t(1), xp + r0 * in,
                       in, wp, in, scalar_t(0), yp + r0 * out, out);
      });
    });
    ctx->save_for_backward({x, weight});
    ctx->saved_data["x_shape"] = x_nd.sizes().vec();
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &weight = saved[1];
    const int64_t m = x.size(0), in = x.size(1), out = weight.size(0);
    const torch::Tensor dy = grads[0].reshape({m, out}).contiguous();
    torch::Tensor dx, dw;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "LinearBackward", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      const scalar_t* wp = weight.data_ptr<scalar_t>();
      const scalar_t* gp = dy.data_ptr<scalar_t>();
      if (ctx->needs_input_grad(0)) {
        // dx = dy w: rows of dx.
        dx = at::empty(ctx->saved_data["x_shape"].toIntVector(), x.options());
        scalar_t* dxp = dx.data_ptr<scalar_t>();
        ForEachBlock(m, ProductBlockRows(m), [&](int64_t r0, int64_t r1) {
          internal::Gemm(false, false, r1 - r0, in, out, scalar_t(1),
                         gp + r0 * out, out, wp, in, scalar_t(0), dxp + r0 * in,
                         in);
        });
      }
      if (ctx->needs_input_grad(1)) {
        dw = at::empty({out, in}, weight.options());
        WeightGradient(m, in, out, gp, xp, dw.data_ptr<scalar_t>());
      }
    });
    return {dx, dw};
  }
};

// Rows per bf16 GEMM call within a thread's range: the call's fp32 output
// (rows x out) is still in cache when it is rounded to bf16.
constexpr int64_t kBf16ChunkRows = 256;

const internal::Bf16* Bf16Data(const torch::Tensor& t) {
  return reinterpret_cast<const internal::Bf16*>(t.data_ptr<at::BFloat16>());
}
internal::Bf16* MutableBf16Data(torch::Tensor& t) {
  return reinterpret_cast<internal::Bf16*>(t.data_ptr<at::BFloat16>());
}

// t (fp32 or bf16) as a contiguous bf16 tensor, rounded in one pass.
torch::Tensor ToBf16(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kBFloat16) return t.contiguous();
  const torch::Tensor src = t.contiguous().to(torch::kFloat32);
  torch::Tensor out =
      at::empty(src.sizes(), src.options().dtype(torch::kBFloat16));
  internal::NarrowToBf16(src.data_ptr<float>(), MutableBf16Data(out),
                         src.numel());
  return out;
}

// Under CPU autocast: x (M, in) in fp32 or bf16 and the fp32 weight (out,
// in) multiply as bf16 through oneDNN's bf16 x bf16 -> fp32 GEMM, the output
// rounded to bf16 once, as autocast's linear gives. The rows go in chunks
// of kBf16ChunkRows (fixed by the shape, spread over the intra-op
// threads): each chunk's rows of x are rounded to bf16, multiplied, and the
// fp32 product rounded to bf16 while both are in cache (ATen's casts around
// one big GEMM cost three extra passes over memory: 35 ms of a 1.5 s
// swa-128 step at T=8192). Backward: dx in x's dtype the same way, dw in
// fp32 straight from the fp32 accumulators, summed over token groups as
// the fp32 path does (WeightGradient; autocast's mm would round it to
// bf16). Results do not depend on the thread count.
class LinearBf16Function
    : public torch::autograd::Function<LinearBf16Function> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight) {
    RECORD_FUNCTION("hlab::LinearBf16Function::forward",
                    std::vector<c10::IValue>());
    const bool x_bf16 = x.scalar_type() == torch::kBFloat16;
    const torch::Tensor xc = x.contiguous();
    const torch::Tensor wb = ToBf16(weight);
    const int64_t m = xc.size(0), in = xc.size(1), out = wb.size(0);
    torch::Tensor xb =
        x_bf16 ? xc : at::empty({m, in}, xc.options().dtype(torch::kBFloat16));
    torch::Tensor y = at::empty({m, out}, xc.options().dtype(torch::kBFloat16));
    const float* x32 = x_bf16 ? nullptr : xc.data_ptr<float>();
    internal::Bf16* x16 = MutableBf16Data(xb);
    const internal::Bf16* w16 = Bf16Data(wb);
    internal::Bf16* y16 = MutableBf16Data(y);
    SplitChunks(m, kBf16ChunkRows, [&](int64_t begin, int64_t end) {
      std::vector<float> acc(std::min(kBf16ChunkRows, end - begin) * out);
      for (int64_t r0 = begin; r0 < end; r0 += kBf16ChunkRows) {
        const int64_t rows = std::min(kBf16ChunkRows, end - r0);
        if (x32 != nullptr) {
          internal::NarrowToBf16(x32 + r0 * in, x16 + r0 * in, rows * in);
        }
        internal::Gemm(false, true, rows, out, in, 1.0f, x16 + r0 * in, in, w16,
                       in, 0.0f, acc.data(), out);
        internal::NarrowToBf16(acc.data(), y16 + r0 * out, rows * out);
      }
    });
    ctx->save_for_backward({xb, wb});
    ctx->saved_data["x_bf16"] = x_bf16;  // else fp32
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &xb = saved[0], &wb = saved[1];
    const torch::Tensor g = ToBf16(grads[0]);
    const int64_t m = xb.size(0), in = xb.size(1), out = wb.size(0);
    torch::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) {
      const bool dx_bf16 = ctx->saved_data["x_bf16"].toBool();
      dx = at::empty({m, in}, xb.options().dtype(dx_bf16 ? torch::kBFloat16
                                                         : torch::kFloat32));
      float* dx32 = dx_bf16 ? nullptr : dx.data_ptr<float>();
      internal::Bf16* dx16 = dx_bf16 ? MutableBf16Data(dx) : nullptr;
      const internal::Bf16* g16 = Bf16Data(g);
      const internal::Bf16* w16 = Bf16Data(wb);
      SplitChunks(m, kBf16ChunkRows, [&](int64_t begin, int64_t end) {
        std::vector<float> acc(
            dx_bf16 ? std::min(kBf16ChunkRows, end - begin) * in : 0);
        for (int64_t r0 = begin; r0 < end; r0 += kBf16ChunkRows) {
          const int64_t rows = std::min(kBf16ChunkRows, end - r0);
          float* c = dx_bf16 ? acc.data() : dx32 + r0 * in;
          internal::Gemm(false, false, rows, in, out, 1.0f, g16 + r0 * out, out,
                         w16, in, 0.0f, c, in);
          if (dx_bf16) internal::NarrowToBf16(c, dx16 + r0 * in, rows * in);
        }
      });
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty({out, in}, xb.options().dtype(torch::kFloat32));
      WeightGradient(m, in, out, Bf16Data(g), Bf16Data(xb),
                     dw.data_ptr<float>());
    }
    return {dx, dw};
  }
};

}  // namespace

torch::Tensor LinearProduct(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  const bool ours =
      !bias.defined() && x.device().is_cpu() && weight.device().is_cpu() &&
      x.scalar_type() == weight.scalar_type() && internal::BlasServes(x) &&
      weight.dim() == 2 && x.dim() >= 1 && x.size(-1) == weight.size(1) &&
      x.numel() > 0 && !AutocastEnabled(torch::kCPU);
  if (!ours) {
    const bool bf16_autocast =
        AutocastToBf16(torch::kCPU) && !bias.defined() && x.device().is_cpu() &&
        weight.device().is_cpu() &&
        (x.scalar_type() == torch::kFloat32 ||
         x.scalar_type() == torch::kBFloat16) &&
        weight.scalar_type() == torch::kFloat32 && weight.dim() == 2 &&
        x.dim() >= 1 && x.size(-1) == weight.size(1) && x.numel() > 0 &&
        internal::BlasAvailable<internal::Bf16>();
    if (!bf16_autocast) return at::linear(x, weight, bias);
    return LinearBf16Function::apply(x.reshape({-1, x.size(-1)}), weight)
        .view(WithLastDim(x, weight.size(0)));
  }
  return LinearFunction::apply(x, weight.contiguous());
}

torch::ScalarType LinearInputDtype(torch::ScalarType t) {
  return AutocastToBf16(torch::kCPU) &&
                 (t == torch::kFloat32 || t == torch::kBFloat16)
             ? torch::kBFloat16
             : t;
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  return LinearProduct(x, weight, bias);
}

torch::Tensor ConcatenatedLinear(const torch::Tensor& x,
                                 const std::vector<Linear>& layers) {
  TORCH_CHECK(!layers.empty(), "ConcatenatedLinear: no layers");
  if (layers.size() == 1) {
    return LinearProduct(x, layers[0]->weight, layers[0]->bias);
  }
  std::vector<torch::Tensor> weights;
  bool any_bias = false;
  for (const Linear& layer : layers) {
    weights.push_back(layer->weight);
    any_bias = any_bias || layer->bias.defined();
  }
  if (any_bias) {
    std::vector<torch::Tensor> outputs;
    for (const Linear& layer : layers) {
      outputs.push_back(LinearProduct(x, layer->weight, layer->bias));
    }
    return torch::cat(outputs, -1);
  }
  return LinearProduct(x, torch::cat(weights, 0));
}

}  // namespace hlab::model
