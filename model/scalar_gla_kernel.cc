#include "model/scalar_gla_kernel.h"

#include <limits>
#include <vector>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace hlab::model {
namespace {

void CheckShapes(const torch::Tensor& q, const torch::Tensor& k,
                 const torch::Tensor& v, const torch::Tensor& g) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && g.dim() == 3,
              "scalar GLA: q, k, v must be 4-D and g 3-D");
  const int64_t b = v.size(0), h = v.size(1), t = v.size(2);
  TORCH_CHECK(q.sizes() == k.sizes() && q.size(0) == b &&
                  (q.size(1) == h || q.size(1) == 1) && q.size(2) == t,
              "scalar GLA: q, k must both be (B, H or 1, T, dk), got q ",
              q.sizes(), ", k ", k.sizes(), " with v ", v.sizes());
  TORCH_CHECK(
      (g.size(0) == b || g.size(0) == 1) && g.size(1) == h && g.size(2) == t,
      "scalar GLA: g must be (B or 1, H, T), got ", g.sizes());
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
// dk, dv) and whole-chunk decays chunk_decay: (B or 1, H, n, 1, 1). The only
// sequential part of the chunked kernel: S_0 = 0, S_{i+1} = decay_i S_i + ds_i.
torch::Tensor ScanChunkStates(const torch::Tensor& ds,
                              const torch::Tensor& chunk_decay) {
  const std::vector<torch::Tensor> ds_i = ds.unbind(2);
  const std::vector<torch::Tensor> decay_i = chunk_decay.unbind(2);
  const int64_t n = static_cast<int64_t>(ds_i.size());
  std::vector<torch::Tensor> states;
  states.reserve(n);
  torch::Tensor s = torch::zeros_like(ds_i[0]);
  for (int64_t i = 0; i < n; ++i) {
    states.push_back(s);
    if (i + 1 < n) s = torch::addcmul(ds_i[i], s, decay_i[i]);
  }
  return torch::stack(states, 2);
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
  ScopedCpuAutocastOff no_autocast;
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
      ScanChunkStates(chunk_states, cum_last.exp().unsqueeze(-1));

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

torch::Tensor RecurrentScalarGla(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, const torch::Tensor& g,
                                 double scale) {
  CheckShapes(q, k, v, g);
  ScopedCpuAutocastOff no_autocast;
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
