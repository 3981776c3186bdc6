#include "model/kernels/attention_kernel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/TensorIterator.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/cpu/chunk_rows.h"
#include "model/cpu/fused_attention.h"
#include "model/cpu/fused_elementwise.h"
#include "model/cpu/raw_tensor.h"
#include "model/kernels/attention_args.h"
#include "model/kernels/attention_blocks.h"
#include "model/kernels/flash_attention.h"

namespace hlab::model {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Initial running max of a row without a sink. Finite, so that the rescale
// factor exp(m_old - m_new) is 0, not NaN, while every key seen so far is
// masked (-inf).
constexpr double kNoScoreYet = -1e30;

using internal::BlockThreads;
using internal::CheckArgs;
using internal::Deal;
using internal::Dims;
using internal::ForEachItemInParallel;
using internal::KeyBlock;
using internal::PlanBlocks;
using internal::QueryBlock;
using internal::ScheduleWork;
using internal::StatType;
using internal::WorkerCount;
using internal::WorkItem;
using model::ScopedAutocastOff;

// x: (B, H, T, D) -> (N, T * G, D), contiguous, times `scale`, in `dtype`.
Tensor FoldHeads(const Tensor& x, const Dims& dims, double scale,
                 torch::ScalarType dtype) {
  const Tensor grouped = x.reshape({dims.b, dims.hkv, dims.g, dims.t, dims.d})
                             .permute({0, 1, 3, 2, 4});
  Tensor out = at::empty({dims.b, dims.hkv, dims.t, dims.g, dims.d},
                         x.options().dtype(dtype));
  out.copy_(grouped);
  if (scale != 1.0) out.mul_(scale);
  return out.view({dims.n(), dims.t * dims.g, dims.d});
}

// Inverse of FoldHeads: (N, T * G, D) -> (B, H, T, D), contiguous, in dtype.
Tensor UnfoldHeads(const Tensor& x, const Dims& dims, torch::ScalarType dtype) {
  Tensor out =
      at::empty({dims.b, dims.h, dims.t, dims.d}, x.options().dtype(dtype));
  out.view({dims.b, dims.hkv, dims.g, dims.t, dims.d})
      .copy_(x.view({dims.b, dims.hkv, dims.t, dims.g, dims.d})
                 .permute({0, 1, 3, 2, 4}));
  return out;
}

// FoldHeads' inverse into the layout the output projection reads: (N, T * G,
// D) -> a contiguous (B, T, H, D) tensor, returned as its (B, H, T, D) view,
// so that the caller's o.transpose(1, 2).reshape(B, T, H * D) is a view,
// not a second copy.
Tensor UnfoldHeadsTokenMajor(const Tensor& x, const Dims& dims,
                             torch::ScalarType dtype) {
  Tensor out =
      at::empty({dims.b, dims.t, dims.h, dims.d}, x.options().dtype(dtype));
  out.view({dims.b, dims.t, dims.hkv, dims.g, dims.d})
      .copy_(x.view({dims.b, dims.hkv, dims.t, dims.g, dims.d})
                 .permute({0, 2, 1, 3, 4}));
  return out.transpose(1, 2);
}

// D = rowsum(dO * O) in the stat dtype, (N, T * G) in FoldHeads' row
// order; dout and out (B, H, T, D). On the CPU one pass over the two, where
// the composition folds both into stat-dtype copies, multiplies and sums.
Tensor RowDots(const Tensor& dout, const Tensor& out, const Dims& dims,
               torch::ScalarType stat) {
  if (!internal::RawLoopsTake(dout) || !internal::RawLoopsTake(out) ||
      dout.scalar_type() != out.scalar_type()) {
    return (FoldHeads(dout, dims, 1.0, stat) * FoldHeads(out, dims, 1.0, stat))
        .sum(-1);
  }
  // (B, H, T, D) with unit column stride, any other strides: the forward's
  // output is a view of a (B, T, H, D) tensor (UnfoldHeadsTokenMajor).
  const auto rows_readable = [](const Tensor& x) {
    return x.stride(3) == 1 ? x : x.contiguous();
  };
  const Tensor a = rows_readable(dout), b = rows_readable(out);
  Tensor drow = at::empty({dims.n(), dims.t * dims.g}, a.options().dtype(stat));
  internal::DispatchRaw(a.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    using S = internal::StorageOf<T>;
    using Acc = internal::AccumOf<T>;
    const S* ap = a.data_ptr<S>();
    const S* bp = b.data_ptr<S>();
    Acc* dp = drow.data_ptr<Acc>();
    const int64_t d = dims.d, rows = dims.b * dims.h * dims.t;
    // Rows in the accumulator type are read in place, bf16 rows widened.
    constexpr bool kInPlace = std::is_same_v<S, Acc>;
    at::parallel_for(0, rows, 256, [&](int64_t r0, int64_t r1) {
      std::vector<Acc> x(kInPlace ? 0 : d), y(kInPlace ? 0 : d);
      for (int64_t r = r0; r < r1; ++r) {
        // Row r is (b, h, t); folded, it is row t G + g of matrix b Hkv + kv.
        const int64_t t = r % dims.t, h = (r / dims.t) % dims.h,
                      batch = r / (dims.t * dims.h);
        const int64_t n = batch * dims.hkv + h / dims.g;
        const S* ar =
            ap + batch * a.stride(0) + h * a.stride(1) + t * a.stride(2);
        const S* br =
            bp + batch * b.stride(0) + h * b.stride(1) + t * b.stride(2);
        const Acc *xr, *yr;
        if constexpr (kInPlace) {
          xr = ar;
          yr = br;
        } else {
          internal::LoadRow(ar, x.data(), d);
          internal::LoadRow(br, y.data(), d);
          xr = x.data();
          yr = y.data();
        }
        dp[n * dims.t * dims.g + t * dims.g + h % dims.g] =
            internal::Dot(xr, yr, d);
      }
    });
  });
  return drow;
}

// Per-worker accumulators (workers, ...) summed over the workers, in dtype:
// one pass on the CPU.
Tensor SumWorkers(const Tensor& acc, torch::ScalarType dtype) {
  const int64_t workers = acc.size(0);
  if (workers == 1) return acc.select(0, 0).to(dtype);
  if (!internal::RawLoopsTake(acc) || !acc.is_contiguous() ||
      !(dtype == acc.scalar_type() ||
        (acc.scalar_type() == torch::kFloat32 && dtype == torch::kBFloat16))) {
    return acc.sum(0).to(dtype);
  }
  Tensor out = at::empty(acc.sizes().slice(1), acc.options().dtype(dtype));
  const int64_t numel = out.numel();
  AT_DISPATCH_FLOATING_TYPES(acc.scalar_type(), "SumWorkers", [&] {
    using A = scalar_t;
    const A* src = acc.data_ptr<A>();
    internal::DispatchRaw(dtype, [&](auto tag) {
      using S = internal::StorageOf<decltype(tag)>;
      if constexpr (std::is_same_v<S, A> || (std::is_same_v<S, at::BFloat16> &&
                                             std::is_same_v<A, float>)) {
        S* dst = out.data_ptr<S>();
        constexpr int64_t kChunk = 1024;
        at::parallel_for(0, numel, 16 * kChunk, [&](int64_t i0, int64_t i1) {
          A sum[kChunk];
          for (int64_t i = i0; i < i1; i += kChunk) {
            const int64_t m = std::min(kChunk, i1 - i);
            std::copy_n(src + i, m, sum);
            for (int64_t w = 1; w < workers; ++w) {
              internal::AddVectors(sum, src + w * numel + i, m, sum);
            }
            internal::StoreRow(sum, dst + i, m);
          }
        });
      }
    });
  });
  return out;
}

// sink: (H) -> (N, T * G) per-row sink logits in `dtype` (row t * G + g of
// batch b * Hkv + kv holds sink[kv * G + g]).
Tensor SinkRows(const Tensor& sink, const Dims& dims, int64_t t,
                torch::ScalarType dtype) {
  return sink.to(dtype)
      .view({1, dims.hkv, 1, dims.g})
      .expand({dims.b, dims.hkv, t, dims.g})
      .reshape({dims.n(), t * dims.g});
}

// A (contiguous) tensor of `sizes` carved from the front of a flat buffer.
Tensor Carve(const Tensor& buffer, at::IntArrayRef sizes) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  return buffer.narrow(0, 0, numel).view(sizes);
}

// Scratch buffers for one pass, allocated once and carved per block pair.
struct Scratch {
  Tensor scores;      // input dtype: S, then P (N * R * Tk)
  Tensor grads;       // input dtype: dP, then dS (backward only)
  Tensor work;        // stat dtype, for bf16 input only: P
  Tensor work_grads;  // stat dtype, for bf16 input only: dS (backward)
  Tensor product;     // input dtype, bf16 only: a block product (N * R * D)
};

Scratch MakeScratch(const Dims& dims, const AttentionBlocks& blocks,
                    torch::ScalarType dtype, bool backward,
                    const torch::Device& device) {
  const int64_t rows = std::min(blocks.query, dims.t) * dims.g;
  const int64_t keys = std::min(blocks.key, dims.t);
  const int64_t score_numel = dims.n() * rows * keys;
  const auto options = torch::TensorOptions().device(device);
  Scratch scratch;
  scratch.scores = at::empty({score_numel}, options.dtype(dtype));
  if (backward) scratch.grads = at::empty({score_numel}, options.dtype(dtype));
  const torch::ScalarType stat = StatType(dtype);
  if (dtype != stat) {
    scratch.work = at::empty({score_numel}, options.dtype(stat));
    if (backward) {
      scratch.work_grads = at::empty({score_numel}, options.dtype(stat));
    }
    scratch.product = at::empty({dims.n() * std::max(rows, keys) * dims.d},
                                options.dtype(dtype));
  }
  return scratch;
}

// S = qb kb^T, masked with -inf, in the input dtype (a Scratch::scores view).
// qb: (N, R, D); kb: (N, Tk, D) -> (N, R, Tk).
Tensor BlockScores(const Tensor& qb, const Tensor& kb, const KeyBlock& key,
                   const Scratch& scratch) {
  Tensor s = Carve(scratch.scores, {qb.size(0), qb.size(1), key.size});
  at::bmm_out(s, qb, kb.transpose(1, 2));
  if (key.mask.defined()) {
    s.masked_fill_(key.mask, -std::numeric_limits<double>::infinity());
  }
  return s;
}

// P = exp(x - shift), shift: (N, R, 1) in the stat dtype. Returns P in the
// stat dtype and leaves it in x in x's dtype, for the next matmul: for fp32
// and fp64 both are x itself; for bf16 P is computed in fp32
// (Scratch::work) from the bf16 scores and rounded once.
Tensor ExpShifted(Tensor& x, const Tensor& shift, const Scratch& scratch) {
  if (x.scalar_type() == shift.scalar_type()) {
    x.sub_(shift).exp_();
    return x;
  }
  Tensor p = Carve(scratch.work, x.sizes());
  p.copy_(x);
  p.sub_(shift).exp_();
  x.copy_(p);
  return p;
}

// acc += a @ b: acc (N, M, D) in the stat dtype, a and b in the input dtype.
void AccumulateProduct(Tensor acc, const Tensor& a, const Tensor& b,
                       const Scratch& scratch) {
  if (acc.scalar_type() == a.scalar_type()) {
    acc.baddbmm_(a, b);
    return;
  }
  Tensor product = Carve(scratch.product, {a.size(0), a.size(1), b.size(2)});
  at::bmm_out(product, a, b);
  acc.add_(product);
}

// Forward of one work item, online softmax over its key blocks. qf: (N, T*G,
// D) already scaled; kf, vf: (N, T, D); sink_rows: (N, Tq*G) or undefined.
// Writes the item's rows of out (N, T*G, D) and lse (N, T*G), stat dtype.
void ForwardItem(const WorkItem& item, const Tensor& qf, const Tensor& kf,
                 const Tensor& vf, const Tensor& sink_rows,
                 const Scratch& scratch, int64_t g, Tensor& out, Tensor& lse) {
  const QueryBlock& query = *item.query;
  const int64_t r = query.size * g;
  const int64_t row0 = query.start * g;
  const Tensor qb = qf.narrow(0, item.n0, item.n).narrow(1, row0, r);
  const Tensor kn = kf.narrow(0, item.n0, item.n);
  const Tensor vn = vf.narrow(0, item.n0, item.n);
  const auto stat_options = out.options();
  // Running max m and denominator l per row; the sink starts both (it is a
  // logit with no value), so rows never see an all -inf max.
  Tensor m, l;
  if (sink_rows.defined()) {
    m = sink_rows.narrow(0, item.n0, item.n).narrow(1, 0, r).clone();
    l = at::ones({item.n, r}, stat_options);
  } else {
    m = at::full({item.n, r}, kNoScoreYet, stat_options);
    l = at::zeros({item.n, r}, stat_options);
  }
  Tensor acc = out.narrow(0, item.n0, item.n).narrow(1, row0, r);
  acc.zero_();
  for (const KeyBlock& key : query.keys) {
    Tensor p = BlockScores(qb, kn.narrow(1, key.start, key.size), key, scratch);
    const Tensor m_new = at::maximum(m, at::amax(p, -1));
    const Tensor alpha = (m - m_new).exp_();
    // Unnormalised probabilities, p_stat in the stat dtype.
    const Tensor p_stat = ExpShifted(p, m_new.unsqueeze(-1), scratch);
    l.mul_(alpha).add_(p_stat.sum(-1));
    acc.mul_(alpha.unsqueeze(-1));
    AccumulateProduct(acc, p, vn.narrow(1, key.start, key.size), scratch);
    m = m_new;
  }
  acc.div_(l.unsqueeze(-1));
  Tensor lse_block = lse.narrow(0, item.n0, item.n).narrow(1, row0, r);
  at::log_out(lse_block, l);
  lse_block.add_(m);
}

// Backward of one work item (FlashAttention-2): recomputes its
// probabilities from the saved logsumexp. dof: (N, T*G, D) in the input
// dtype; drow = rowsum(dO * O): (N, T*G). Accumulates into the item's rows of
// dqf (N, T*G, D) and into dkf, dvf (N, T, D), all in the stat dtype; dqf is
// with respect to the scaled q.
void BackwardItem(const WorkItem& item, const Tensor& qf, const Tensor& kf,
                  const Tensor& vf, const Tensor& dof, const Tensor& lse,
                  const Tensor& drow, const Scratch& scratch, int64_t g,
                  Tensor& dqf, Tensor& dkf, Tensor& dvf) {
  const QueryBlock& query = *item.query;
  const bool low_precision = StatType(qf.scalar_type()) != qf.scalar_type();
  const int64_t r = query.size * g;
  const int64_t row0 = query.start * g;
  auto rows = [&](const Tensor& x) {
    return x.narrow(0, item.n0, item.n).narrow(1, row0, r);
  };
  const Tensor qb = rows(qf), dob = rows(dof);
  const Tensor lse_b = rows(lse).unsqueeze(-1);
  const Tensor drow_b = rows(drow).unsqueeze(-1);
  Tensor dqb = rows(dqf);
  const Tensor kn = kf.narrow(0, item.n0, item.n);
  const Tensor vn = vf.narrow(0, item.n0, item.n);
  const Tensor dkn = dkf.narrow(0, item.n0, item.n);
  const Tensor dvn = dvf.narrow(0, item.n0, item.n);
  for (const KeyBlock& key : query.keys) {
    const Tensor kb = kn.narrow(1, key.start, key.size);
    const Tensor vb = vn.narrow(1, key.start, key.size);
    Tensor p = BlockScores(qb, kb, key, scratch);
    const Tensor p_stat = ExpShifted(p, lse_b, scratch);
    AccumulateProduct(dvn.narrow(1, key.start, key.size), p.transpose(1, 2),
                      dob, scratch);
    // dS = P * (dO V^T - rowsum(dO * O)), the difference in the stat dtype.
    Tensor ds = Carve(scratch.grads, {item.n, r, key.size});
    at::bmm_out(ds, dob, vb.transpose(1, 2));
    if (low_precision) {
      Tensor ds_stat = Carve(scratch.work_grads, ds.sizes());
      ds_stat.copy_(ds);
      ds_stat.sub_(drow_b).mul_(p_stat);
      ds.copy_(ds_stat);
    } else {
      ds.sub_(drow_b).mul_(p_stat);
    }
    AccumulateProduct(dqb, ds, kb, scratch);
    AccumulateProduct(dkn.narrow(1, key.start, key.size), ds.transpose(1, 2),
                      qb, scratch);
  }
}

// ---------------------------------------------------------------------------
// The fused block loops (model/cpu/fused_attention.h): raw GEMM calls
// and row loops instead of ATen ops per block.

// Whether the fused loops run for these inputs: asked for, CPU tensors, and
// the GEMM entry points present in this process.
bool UseFusedLoops(const Tensor& q, bool requested) {
  if (!requested || !q.device().is_cpu()) return false;
  bool available = false;
  internal::DispatchRaw(q.scalar_type(), [&](auto tag) {
    available = internal::FusedAttentionAvailable<decltype(tag)>();
  });
  return available;
}

// x: (N, R, C) with unit column stride, as a Matrices view. T is float,
// double or internal::Bf16 (stored as at::BFloat16).
template <typename T>
internal::Matrices<T> AsMatrices(const Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.stride(2) == 1,
              "attention: internal layout error");
  return {internal::RawData<T>(x), x.stride(0), x.stride(1)};
}

// (N, R) with unit row stride as (N, 1, R) matrices.
template <typename T>
internal::Matrices<T> RowsAsMatrices(const Tensor& x) {
  return AsMatrices<T>(x.unsqueeze(1));
}

// (N, T, D) with unit column stride, copying only when needed.
Tensor WithUnitColumnStride(const Tensor& x) {
  return x.stride(2) == 1 ? x : x.contiguous();
}

// The plan as the fused loops take it, index for index.
std::vector<internal::AttentionBlockPlan> FusedPlan(
    const std::vector<QueryBlock>& plan) {
  std::vector<internal::AttentionBlockPlan> out;
  out.reserve(plan.size());
  for (const QueryBlock& query : plan) {
    internal::AttentionBlockPlan block;
    block.query_start = query.start;
    block.query_size = query.size;
    for (const KeyBlock& key : query.keys) {
      block.keys.emplace_back(key.start, key.size);
    }
    out.push_back(std::move(block));
  }
  return out;
}

// One set of block buffers per worker thread, sized for the largest block.
template <typename T>
std::vector<internal::AttentionScratch<T>> FusedScratch(
    int64_t threads, const Dims& dims, const AttentionBlocks& blocks,
    bool backward) {
  const int64_t rows = std::min(blocks.query, dims.t) * dims.g;
  const int64_t keys = std::min(blocks.key, dims.t);
  std::vector<internal::AttentionScratch<T>> scratch;
  scratch.reserve(static_cast<size_t>(threads));
  for (int64_t i = 0; i < threads; ++i) {
    scratch.emplace_back(rows, keys, backward);
  }
  return scratch;
}

// Forward pass of every item through the fused loops (element type T).
template <typename T>
void FusedForward(const std::vector<QueryBlock>& plan,
                  const std::vector<WorkItem>& items, int64_t threads,
                  const Dims& dims, int64_t window, double scale,
                  const AttentionBlocks& blocks, const Tensor& qf,
                  const Tensor& kf, const Tensor& vf, const Tensor& sink_rows,
                  Tensor& out_f, Tensor& lse) {
  using A = internal::AccumOf<T>;
  const std::vector<internal::AttentionBlockPlan> fused = FusedPlan(plan);
  const internal::AttentionLoopShape shape{dims.g, dims.d, window, scale};
  std::vector<internal::AttentionScratch<T>> scratch =
      FusedScratch<T>(threads, dims, blocks, /*backward=*/false);
  const auto q = AsMatrices<const T>(qf), k = AsMatrices<const T>(kf),
             v = AsMatrices<const T>(vf);
  // sink_rows may be a view with a zero column stride (B = 1, G = 1).
  const Tensor sink_dense =
      sink_rows.defined() ? sink_rows.contiguous() : Tensor();
  const internal::Matrices<const A> sink =
      sink_dense.defined() ? RowsAsMatrices<const A>(sink_dense)
                           : internal::Matrices<const A>{};
  const auto out = AsMatrices<A>(out_f);
  const auto lse_m = RowsAsMatrices<A>(lse);
  ForEachItemInParallel(items, threads, Deal::kQueue,
                        [&](const WorkItem& item, int64_t w) {
                          internal::AttentionForwardBlock<T>(
                              shape, fused[item.query - plan.data()], item.n0,
                              item.n, q, k, v, sink, out, lse_m, scratch[w]);
                        });
}

// Backward pass of every item through the fused loops: dq written, dk, dv
// (threads, N, T, D), one accumulator per worker.
template <typename T>
void FusedBackward(const std::vector<QueryBlock>& plan,
                   const std::vector<WorkItem>& items, int64_t threads,
                   const Dims& dims, int64_t window, double scale,
                   const AttentionBlocks& blocks, const Tensor& qf,
                   const Tensor& kf, const Tensor& vf, const Tensor& dof,
                   const Tensor& lse, const Tensor& drow, Tensor& dqf,
                   Tensor& dkf, Tensor& dvf) {
  using A = internal::AccumOf<T>;
  const std::vector<internal::AttentionBlockPlan> fused = FusedPlan(plan);
  const internal::AttentionLoopShape shape{dims.g, dims.d, window, scale};
  std::vector<internal::AttentionScratch<T>> scratch =
      FusedScratch<T>(threads, dims, blocks, /*backward=*/true);
  const auto q = AsMatrices<const T>(qf), k = AsMatrices<const T>(kf),
             v = AsMatrices<const T>(vf), dout = AsMatrices<const T>(dof);
  const auto lse_m = RowsAsMatrices<const A>(lse);
  const auto drow_m = RowsAsMatrices<const A>(drow);
  const auto dq = AsMatrices<A>(dqf);
  std::vector<internal::Matrices<A>> dk, dv;
  for (int64_t i = 0; i < threads; ++i) {
    dk.push_back(AsMatrices<A>(dkf.select(0, i)));
    dv.push_back(AsMatrices<A>(dvf.select(0, i)));
  }
  ForEachItemInParallel(
      items, threads, Deal::kFixed, [&](const WorkItem& item, int64_t w) {
        internal::AttentionBackwardBlock<T>(
            shape, fused[item.query - plan.data()], item.n0, item.n, q, k, v,
            dout, lse_m, drow_m, dq, dk[w], dv[w], scratch[w]);
      });
}

class BlockwiseAttentionFunction
    : public torch::autograd::Function<BlockwiseAttentionFunction> {
 public:
  // sink: (H), or empty for no sink.
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& sink_arg, int64_t window,
                        int64_t query_block, int64_t key_block,
                        bool fused_loops) {
    RECORD_FUNCTION("hlab::BlockwiseAttentionFunction::forward",
                    std::vector<c10::IValue>());
    ScopedAutocastOff autocast_off;
    const Tensor sink = sink_arg.numel() > 0 ? sink_arg : Tensor();
    const Dims dims = CheckArgs(q, k, v, sink, window);
    const AttentionBlocks blocks{query_block, key_block, fused_loops};
    const bool fused = UseFusedLoops(q, fused_loops);
    const torch::ScalarType dtype = q.scalar_type();
    const torch::ScalarType stat = StatType(dtype);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dims.d));

    // The fused loops scale the scores in their products; the ATen loops
    // take a scaled q.
    const Tensor qf = FoldHeads(q, dims, fused ? 1.0 : scale, dtype);
    const Tensor kf =
        WithUnitColumnStride(k.detach().reshape({dims.n(), dims.t, dims.d}));
    const Tensor vf =
        WithUnitColumnStride(v.detach().reshape({dims.n(), dims.t, dims.d}));
    const Tensor sink_rows =
        sink.defined()
            ? SinkRows(sink, dims, std::min(blocks.query, dims.t), stat)
            : Tensor();
    const std::vector<QueryBlock> plan =
        PlanBlocks(dims, window, blocks, q.device(), /*masks=*/!fused);
    const std::vector<WorkItem> items =
        ScheduleWork(plan, dims, BlockThreads(q.device()));
    const int64_t threads = WorkerCount(items, q.device());
    const auto stat_options = q.options().dtype(stat);
    Tensor out_f = at::empty({dims.n(), dims.t * dims.g, dims.d}, stat_options);
    Tensor lse = at::empty({dims.n(), dims.t * dims.g}, stat_options);
    if (fused) {
      internal::DispatchRaw(dtype, [&](auto tag) {
        FusedForward<decltype(tag)>(plan, items, threads, dims, window, scale,
                                    blocks, qf, kf, vf, sink_rows, out_f, lse);
      });
    } else {
      std::vector<Scratch> scratch;
      for (int64_t i = 0; i < threads; ++i) {
        scratch.push_back(
            MakeScratch(dims, blocks, dtype, /*backward=*/false, q.device()));
      }
      ForEachItemInParallel(items, threads, Deal::kQueue,
                            [&](const WorkItem& item, int64_t worker) {
                              ForwardItem(item, qf, kf, vf, sink_rows,
                                          scratch[worker], dims.g, out_f, lse);
                            });
    }
    Tensor out = UnfoldHeadsTokenMajor(out_f, dims, dtype);

    ctx->save_for_backward({q, k, v, sink_arg, out, lse});
    ctx->saved_data["window"] = window;
    ctx->saved_data["query_block"] = query_block;
    ctx->saved_data["key_block"] = key_block;
    ctx->saved_data["fused_loops"] = fused_loops;
    return out;
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    ScopedAutocastOff autocast_off;
    const variable_list saved = ctx->get_saved_variables();
    const Tensor& q = saved[0];
    const Tensor& k = saved[1];
    const Tensor& v = saved[2];
    const Tensor sink = saved[3].numel() > 0 ? saved[3] : Tensor();
    const Tensor& out = saved[4];
    const Tensor& lse = saved[5];
    const int64_t window = ctx->saved_data["window"].toInt();
    const AttentionBlocks blocks{ctx->saved_data["query_block"].toInt(),
                                 ctx->saved_data["key_block"].toInt(),
                                 ctx->saved_data["fused_loops"].toBool()};
    const bool fused = UseFusedLoops(q, blocks.fused_loops);
    const Dims dims = CheckArgs(q, k, v, sink, window);
    const torch::ScalarType dtype = q.scalar_type();
    const torch::ScalarType stat = StatType(dtype);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dims.d));

    const Tensor qf = FoldHeads(q, dims, fused ? 1.0 : scale, dtype);
    const Tensor kf =
        WithUnitColumnStride(k.detach().reshape({dims.n(), dims.t, dims.d}));
    const Tensor vf =
        WithUnitColumnStride(v.detach().reshape({dims.n(), dims.t, dims.d}));
    const Tensor dof = FoldHeads(grad_outputs[0], dims, 1.0, dtype);
    const Tensor drow = RowDots(grad_outputs[0], out, dims, stat);

    const auto stat_options = q.options().dtype(stat);
    const std::vector<QueryBlock> plan =
        PlanBlocks(dims, window, blocks, q.device(), /*masks=*/!fused);
    const std::vector<WorkItem> items =
        ScheduleWork(plan, dims, BlockThreads(q.device()));
    const int64_t threads = WorkerCount(items, q.device());
    // dq rows belong to one item each (the fused loops write them, the ATen
    // loops add); dk and dv get one accumulator per worker, summed at the
    // end.
    Tensor dqf =
        fused ? at::empty({dims.n(), dims.t * dims.g, dims.d}, stat_options)
              : at::zeros({dims.n(), dims.t * dims.g, dims.d}, stat_options);
    Tensor dkf = at::zeros({threads, dims.n(), dims.t, dims.d}, stat_options);
    Tensor dvf = at::zeros({threads, dims.n(), dims.t, dims.d}, stat_options);
    if (fused) {
      internal::DispatchRaw(dtype, [&](auto tag) {
        FusedBackward<decltype(tag)>(plan, items, threads, dims, window, scale,
                                     blocks, qf, kf, vf, dof, lse, drow, dqf,
                                     dkf, dvf);
      });
    } else {
      std::vector<Scratch> scratch;
      for (int64_t i = 0; i < threads; ++i) {
        scratch.push_back(
            MakeScratch(dims, blocks, dtype, /*backward=*/true, q.device()));
      }
      ForEachItemInParallel(items, threads, Deal::kFixed,
                            [&](const WorkItem& item, int64_t worker) {
                              Tensor dk_worker = dkf.select(0, worker),
                                     dv_worker = dvf.select(0, worker);
                              BackwardItem(item, qf, kf, vf, dof, lse, drow,
                                           scratch[worker], dims.g, dqf,
                                           dk_worker, dv_worker);
                            });
    }
    if (!fused) dqf.mul_(scale);  // qf was scaled
    Tensor dsink;
    if (sink.defined()) {
      // d sink_h = -sum over rows of head h of p_sink * rowsum(dO * O).
      const Tensor p_sink = (SinkRows(sink, dims, dims.t, stat) - lse).exp_();
      dsink = -(p_sink * drow)
                   .view({dims.b, dims.hkv, dims.t, dims.g})
                   .sum(at::IntArrayRef{0, 2})
                   .reshape({dims.h})
                   .to(sink.scalar_type());
    }
    return {UnfoldHeads(dqf, dims, dtype),
            SumWorkers(dkf, dtype).view({dims.b, dims.hkv, dims.t, dims.d}),
            SumWorkers(dvf, dtype).view({dims.b, dims.hkv, dims.t, dims.d}),
            dsink,
            Tensor(),
            Tensor(),
            Tensor(),
            Tensor()};
  }
};

}  // namespace

torch::Tensor BlockwiseAttention(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v,
                                 const torch::Tensor& sink, int64_t window,
                                 const AttentionBlocks& blocks) {
  if (blocks.flash && q.is_cuda()) {
    // What CUDA autocast does for LibTorch's own attention: fp32 operands
    // are cast to the autocast dtype.
    const bool cast = AutocastEnabled(c10::DeviceType::CUDA) &&
                      AutocastDtype(c10::DeviceType::CUDA) != at::kFloat &&
                      q.scalar_type() == at::kFloat;
    const torch::ScalarType dtype =
        cast ? AutocastDtype(c10::DeviceType::CUDA) : q.scalar_type();
    const Tensor qc = q.to(dtype), kc = k.to(dtype), vc = v.to(dtype);
    if (FlashAttentionServes(qc, kc, vc)) {
      return SinkFoldedAttention(qc, kc, vc, sink, window,
                                 AttentionCore::kFlash);
    }
  }
  // Custom functions take defined tensors only: "no sink" travels as an empty
  // tensor and is turned back into an undefined one inside.
  const Tensor sink_arg = sink.defined() ? sink : at::empty({0}, q.options());
  // Default query blocks: 32 positions for windows up to 256; else 64, or
  // 128 in bf16, where each block product's fixed cost is a larger share
  // (with AMX, a bf16 step of full at T=8192 took 13% less time with 128
  // rows than with 64; fp32 showed no difference; docs/performance.md).
  const int64_t query_block = blocks.query != 0                  ? blocks.query
                              : window > 0 && window <= 256      ? 32
                              : q.scalar_type() == at::kBFloat16 ? 128
                                                                 : 64;
  return BlockwiseAttentionFunction::apply(
      q, k, v, sink_arg, window, query_block, blocks.key, blocks.fused_loops);
}

}  // namespace hlab::model
