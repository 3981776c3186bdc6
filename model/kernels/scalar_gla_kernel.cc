#include "model/kernels/scalar_gla_kernel.h"

#include <algorithm>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/kernels/scalar_gla_fused.h"

namespace hlab::model {
namespace {

void CheckShapes(const torch::Tensor& q, const torch::Tensor& k,
                 const torch::Tensor& v, const torch::Tensor& g) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && g.dim() == 3,
              "scalar GLA: q, k, v must be 4-D and g 3-D");
  const int64_t b = v.size(0), h = g.size(1), t = v.size(2);
  const auto heads_ok = [h](const torch::Tensor& x) {
    return x.size(1) > 0 && h % x.size(1) == 0;
  };
  TORCH_CHECK(q.size(0) == b && k.size(0) == b && q.size(2) == t &&
                  k.size(2) == t && q.size(3) == k.size(3) && heads_ok(q) &&
                  heads_ok(k) && heads_ok(v),
              "scalar GLA: expected q, k (B, Hq or Hk, T, dk) and v (B, Hv, "
              "T, dv) with head counts dividing g's H = ",
              h, "; got q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK((g.size(0) == b || g.size(0) == 1) && g.size(2) == t,
              "scalar GLA: g must be (B or 1, H, T), got ", g.sizes(),
              " with v ", v.sizes());
}

// t with its heads (dimension 1) repeated to `heads`, each in place
// (GQA's grouping: head j serves heads j * group .. (j + 1) * group - 1).
torch::Tensor RepeatHeadsTo(const torch::Tensor& t, int64_t heads) {
  return t.size(1) == heads ? t : t.repeat_interleave(heads / t.size(1), 1);
}

// q, k, v with the head counts the ATen compositions take: v with all H
// heads, q and k both with one (broadcast) or both with H.
struct HeadsExpanded {
  torch::Tensor q, k, v;
};
HeadsExpanded ExpandHeads(const torch::Tensor& q, const torch::Tensor& k,
                          const torch::Tensor& v, int64_t heads) {
  if (q.size(1) == 1 && k.size(1) == 1) return {q, k, RepeatHeadsTo(v, heads)};
  return {RepeatHeadsTo(q, heads), RepeatHeadsTo(k, heads),
          RepeatHeadsTo(v, heads)};
}

// (b, h, n * c, d) -> (b, h, n, c, d).
torch::Tensor SplitChunks(const torch::Tensor& t, int64_t n, int64_t c) {
  return t.reshape({t.size(0), t.size(1), n, c, t.size(3)});
}

// a @ b for 5-D (B, H, n, r, k) @ (B, H, n, k, c) tensors with equal leading
// dimensions, through ParallelBmm.
torch::Tensor MatmulChunks(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor out = ParallelBmm(a.reshape({-1, a.size(3), a.size(4)}),
                                        b.reshape({-1, b.size(3), b.size(4)}));
  return out.view({a.size(0), a.size(1), a.size(2), a.size(3), b.size(4)});
}

// State entering each chunk, from the per-chunk contributions ds: (B, H, n,
// dk, dv) and whole-chunk log-decays a: (B or 1, H, n). The only sequential
// part of the chunked kernel: S_0 = 0, S_{i+1} = exp(a_i) S_i + ds_i. On the
// CPU a hand-written scan (StateScanFunction below); elsewhere in matmul
// form (internal::ScanChunkStatesAsMatmul), a few large ops instead of a
// kernel launch per chunk.

// The scan of batch-heads [b0, b1) on contiguous (BH, n, size) buffers, with
// decay: (BH, n).
template <typename T>
void StateScanForward(int64_t n, int64_t size, int64_t b0, int64_t b1,
                      const T* ds, const T* decay, T* states) {
  for (int64_t b = b0; b < b1; ++b) {
    T* s = states + b * n * size;
    std::fill_n(s, size, T(0));
    for (int64_t i = 0; i + 1 < n; ++i) {
      const T d = decay[b * n + i];
      const T* dsi = ds + (b * n + i) * size;
      T* next = s + (i + 1) * size;
      const T* cur = s + i * size;
      for (int64_t j = 0; j < size; ++j) next[j] = d * cur[j] + dsi[j];
    }
  }
}

// Backward: with G_i = dL/dS_i in total (its own gradient plus d_i G_{i+1}),
// dL/dds_i = G_{i+1}, dL/dd_i = <G_{i+1}, S_i> (both 0 for the last chunk).
// g: scratch of `size`.
template <typename T>
void StateScanBackward(int64_t n, int64_t size, int64_t b0, int64_t b1,
                       const T* decay, const T* states, const T* g_states,
                       T* gds, T* gdecay) {
  std::vector<T> g(size);
  for (int64_t b = b0; b < b1; ++b) {
    std::fill(g.begin(), g.end(), T(0));  // G_{i+1}
    for (int64_t i = n - 1; i >= 0; --i) {
      const int64_t chunk = b * n + i;
      T* gdsi = gds + chunk * size;
      const T* s = states + chunk * size;
      const T* gs = g_states + chunk * size;
      const T d = decay[chunk];
      T dd = 0;
      for (int64_t j = 0; j < size; ++j) {
        gdsi[j] = g[j];
        dd += g[j] * s[j];
        g[j] = gs[j] + d * g[j];
      }
      gdecay[chunk] = dd;
    }
  }
}

class StateScanFunction : public torch::autograd::Function<StateScanFunction> {
 public:
  // ds: (BH, n, size), decay: (BH, n).
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& ds_arg,
                               const torch::Tensor& decay_arg) {
    RECORD_FUNCTION("hlab::StateScanFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor ds = ds_arg.contiguous(),
                        decay = decay_arg.contiguous();
    const int64_t bh = ds.size(0), n = ds.size(1), size = ds.size(2);
    torch::Tensor states = at::empty_like(ds);
    AT_DISPATCH_FLOATING_TYPES(ds.scalar_type(), "StateScan", [&] {
      at::parallel_for(0, bh, 1, [&](int64_t b0, int64_t b1) {
        StateScanForward<scalar_t>(n, size, b0, b1, ds.data_ptr<scalar_t>(),
                                   decay.data_ptr<scalar_t>(),
                                   states.data_ptr<scalar_t>());
      });
    });
    ctx->save_for_backward({decay, states});
    return states;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &decay = saved[0], &states = saved[1];
    const int64_t bh = states.size(0), n = states.size(1),
                  size = states.size(2);
    const torch::Tensor g_states = grads[0].contiguous();
    torch::Tensor gds = at::empty_like(states), gdecay = at::empty_like(decay);
    AT_DISPATCH_FLOATING_TYPES(states.scalar_type(), "StateScanBackward", [&] {
      at::parallel_for(0, bh, 1, [&](int64_t b0, int64_t b1) {
        StateScanBackward<scalar_t>(
            n, size, b0, b1, decay.data_ptr<scalar_t>(),
            states.data_ptr<scalar_t>(), g_states.data_ptr<scalar_t>(),
            gds.data_ptr<scalar_t>(), gdecay.data_ptr<scalar_t>());
      });
    });
    return {gds, gdecay};
  }
};

// On the CPU one autograd node with a hand-written backward, batch-heads
// split across threads; the matmul form elsewhere.
torch::Tensor ScanChunkStates(const torch::Tensor& ds,
                              const torch::Tensor& log_decay) {
  if (!ds.device().is_cpu()) {
    return internal::ScanChunkStatesAsMatmul(ds, log_decay);
  }
  const int64_t b = ds.size(0), h = ds.size(1), n = ds.size(2), dk = ds.size(3),
                dv = ds.size(4);
  const torch::Tensor decay = log_decay.exp().expand({b, h, n});
  return StateScanFunction::apply(ds.reshape({b * h, n, dk * dv}),
                                  decay.reshape({b * h, n}))
      .view({b, h, n, dk, dv});
}

}  // namespace

torch::ScalarType KernelComputeDtype(
    std::initializer_list<torch::Tensor> inputs) {
  for (const torch::Tensor& t : inputs) {
    if (t.scalar_type() == torch::kFloat64) return torch::kFloat64;
  }
  return torch::kFloat32;
}

torch::Tensor AtLeastFp32(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat64 ? t : t.to(torch::kFloat32);
}

torch::Tensor PadTime(const torch::Tensor& t, int64_t t_padded) {
  const int64_t pad = t_padded - t.size(2);
  if (pad == 0) return t;
  // constant_pad_nd lists (before, after) pairs from the last dimension back.
  std::vector<int64_t> pads(2 * (t.dim() - 2), 0);
  pads[2 * (t.dim() - 3) + 1] = pad;
  return torch::constant_pad_nd(t, pads, 0);
}

torch::Tensor UnpadTime(const torch::Tensor& t, int64_t length) {
  return t.size(2) == length ? t : t.narrow(2, 0, length);
}

torch::Tensor StrictUpperMask(int64_t chunk, const torch::Device& device) {
  return torch::ones({chunk, chunk},
                     torch::TensorOptions().dtype(torch::kBool).device(device))
      .triu(1);
}

torch::Tensor ChunkedScalarGla(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& g,
                               double scale, int64_t chunk) {
  CheckShapes(q, k, v, g);
  TORCH_CHECK(chunk > 0, "scalar GLA: chunk must be > 0, got ", chunk);
  // Under bf16 autocast the chunk products take bf16 operands, as autocast
  // would give the composition's matmuls; the rest stays fp32.
  const bool bf16_products = AutocastToBf16(q.device().type());
  ScopedAutocastOff no_autocast;
  if (internal::FusedScalarGlaServes(q, k, v, g)) {
    return internal::FusedChunkedScalarGla(q, k, v, g, scale, chunk,
                                           bf16_products);
  }
  return internal::ChunkedScalarGlaWithAten(q, k, v, g, scale, chunk);
}

namespace internal {

torch::Tensor ScanChunkStatesAsMatmul(const torch::Tensor& ds,
                                      const torch::Tensor& log_decay) {
  const int64_t b = ds.size(0), h = ds.size(1), n = ds.size(2), dk = ds.size(3),
                dv = ds.size(4);
  TORCH_CHECK(log_decay.dim() == 3 &&
                  (log_decay.size(0) == b || log_decay.size(0) == 1) &&
                  log_decay.size(1) == h && log_decay.size(2) == n,
              "chunk state scan: log-decays ", log_decay.sizes(),
              " do not match the contributions ", ds.sizes());
  // seg[i, m] = a_{m+1} + ... + a_i for m <= i (-inf above the diagonal):
  // each sum of its own terms (a masked cumsum), not a difference of long
  // prefix sums, which would lose the short spans' digits in fp32.
  const auto bool_options =
      torch::TensorOptions().dtype(torch::kBool).device(ds.device());
  const torch::Tensor later =
      torch::ones({n, n}, bool_options).tril(-1);  // [l, m]: l > m
  const torch::Tensor seg =
      log_decay.unsqueeze(-1)
          .expand({log_decay.size(0), h, n, n})
          .masked_fill(later.logical_not(), 0.0)
          .cumsum(-2)
          .masked_fill(StrictUpperMask(n, ds.device()),
                       -std::numeric_limits<double>::infinity());
  // X_i = S_{i+1} = sum_{m <= i} exp(seg[i, m]) ds_m; the state entering
  // chunk i is X_{i-1} (S_0 = 0).
  const torch::Tensor after =
      torch::matmul(seg.exp(), ds.reshape({b, h, n, dk * dv}));
  return torch::constant_pad_nd(after.narrow(2, 0, n - 1), {0, 0, 1, 0}, 0.0)
      .view({b, h, n, dk, dv});
}

torch::Tensor ChunkedScalarGlaWithAten(const torch::Tensor& q_arg,
                                       const torch::Tensor& k_arg,
                                       const torch::Tensor& v_arg,
                                       const torch::Tensor& g, double scale,
                                       int64_t chunk) {
  CheckShapes(q_arg, k_arg, v_arg, g);
  const auto [q, k, v] = ExpandHeads(q_arg, k_arg, v_arg, g.size(1));
  ScopedAutocastOff no_autocast;
  const torch::ScalarType dtype = KernelComputeDtype({q, k, v, g});
  const int64_t b = v.size(0), h = v.size(1), t = v.size(2), dv = v.size(3);
  const int64_t n = (t + chunk - 1) / chunk;
  const int64_t t_padded = n * chunk;

  // Padded steps have q = k = v = 0 and g = 0: they change nothing. The
  // scale is the alpha of the output's two matmuls, not applied to q.
  const torch::Tensor qc = SplitChunks(PadTime(q.to(dtype), t_padded), n,
                                       chunk);  // (B, H|1, n, C, dk)
  const torch::Tensor kc = SplitChunks(PadTime(k.to(dtype), t_padded), n,
                                       chunk);  // (B, H|1, n, C, dk)
  const torch::Tensor vc = SplitChunks(PadTime(v.to(dtype), t_padded), n,
                                       chunk);  // (B, H, n, C, dv)
  // Log-decay since the start of the chunk: (B|1, H, n, C).
  const torch::Tensor cum = PadTime(g.to(dtype), t_padded)
                                .reshape({g.size(0), h, n, chunk})
                                .cumsum(-1);
  const torch::Tensor cum_last = cum.narrow(-1, chunk - 1, 1);  // (.., n, 1)

  // Intra-chunk scores (Q K^T) * D with D_ij = exp(G_i - G_j) for j <= i,
  // the upper triangle masked with -inf before exp (it could overflow).
  const torch::Tensor decay =
      (cum.unsqueeze(-1) - cum.unsqueeze(-2))
          .masked_fill(StrictUpperMask(chunk, v.device()),
                       -std::numeric_limits<double>::infinity())
          .exp();  // (B|1, H, n, C, C)
  const torch::Tensor scores =
      MatmulChunks(qc, kc.transpose(-1, -2)) * decay;  // (B, H, n, C, C)

  // Each chunk's contribution to the state, decayed to the chunk end, then
  // the sequential scan for the state entering each chunk.
  const torch::Tensor k_to_end =
      kc * (cum_last - cum).exp().unsqueeze(-1);  // (B, H, n, C, dk)
  const torch::Tensor chunk_states =
      MatmulChunks(k_to_end.transpose(-1, -2), vc);  // (B, H, n, dk, dv)
  const torch::Tensor states =
      ScanChunkStates(chunk_states, cum_last.squeeze(-1));

  // O = scale ((Q * exp(G)) S_in + scores V), all chunks in one batch.
  const int64_t rows = b * h * n;
  const int64_t dk = q.size(3);
  // The scale rides on the GEMMs' alpha (beta = 1 passes the gradient on
  // as it is).
  const torch::Tensor inter = ParallelBaddbmm(
      c10::nullopt, (qc * cum.exp().unsqueeze(-1)).reshape({rows, chunk, dk}),
      states.reshape({rows, dk, dv}), /*beta=*/0.0, /*alpha=*/scale);
  const torch::Tensor out = ParallelBaddbmm(
      inter, scores.reshape({rows, chunk, chunk}),
      vc.reshape({rows, chunk, dv}), /*beta=*/1.0, /*alpha=*/scale);
  return UnpadTime(out.view({b, h, t_padded, dv}), t).to(v.scalar_type());
}

}  // namespace internal

torch::Tensor RecurrentScalarGla(const torch::Tensor& q_arg,
                                 const torch::Tensor& k_arg,
                                 const torch::Tensor& v_arg,
                                 const torch::Tensor& g, double scale) {
  CheckShapes(q_arg, k_arg, v_arg, g);
  const auto [q, k, v] = ExpandHeads(q_arg, k_arg, v_arg, g.size(1));
  ScopedAutocastOff no_autocast;
  const torch::ScalarType dtype = KernelComputeDtype({q, k, v, g});
  const int64_t b = v.size(0), h = v.size(1), dk = q.size(3), dv = v.size(3);
  const std::vector<torch::Tensor> q_t = (q.to(dtype) * scale).unbind(2);
  const std::vector<torch::Tensor> k_t = k.to(dtype).unbind(2);
  const std::vector<torch::Tensor> v_t = v.to(dtype).unbind(2);
  const std::vector<torch::Tensor> alpha_t =
      g.to(dtype).exp().unsqueeze(-1).unsqueeze(-1).unbind(2);

  torch::Tensor state =
      torch::zeros({b, h, dk, dv}, v.options().dtype(dtype));  // (B, H, dk, dv)
  std::vector<torch::Tensor> outs;
  outs.reserve(q_t.size());
  for (size_t i = 0; i < q_t.size(); ++i) {
    state = state * alpha_t[i] + k_t[i].unsqueeze(-1) * v_t[i].unsqueeze(-2);
    outs.push_back(
        torch::matmul(q_t[i].unsqueeze(-2), state).squeeze(-2));  // (B, H, dv)
  }
  return torch::stack(outs, 2).to(v.scalar_type());
}

}  // namespace hlab::model
