#include "model/gated_delta_kernel.h"

#include <limits>
#include <vector>

#include <torch/torch.h>

#include "model/scalar_gla_kernel.h"

namespace hlab::model {
namespace {

void CheckShapes(const torch::Tensor& q, const torch::Tensor& k,
                 const torch::Tensor& v, const torch::Tensor& g,
                 const torch::Tensor& beta) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && g.dim() == 3 &&
                  beta.dim() == 3,
              "gated delta: q, k, v must be 4-D and g, beta 3-D");
  TORCH_CHECK(q.sizes() == k.sizes(), "gated delta: q ", q.sizes(), " and k ",
              k.sizes(), " differ");
  TORCH_CHECK(v.sizes().slice(0, 3) == q.sizes().slice(0, 3) &&
                  g.sizes() == q.sizes().slice(0, 3) &&
                  beta.sizes() == g.sizes(),
              "gated delta: expected v (B, H, T, dv) and g, beta (B, H, T) "
              "for q ",
              q.sizes(), "; got v ", v.sizes(), ", g ", g.sizes(), ", beta ",
              beta.sizes());
}

}  // namespace

torch::Tensor ChunkedGatedDelta(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& g,
                                const torch::Tensor& beta, double scale,
                                int64_t chunk) {
  CheckShapes(q, k, v, g, beta);
  TORCH_CHECK(chunk > 0, "gated delta: chunk must be > 0, got ", chunk);
  ScopedCpuAutocastOff no_autocast;
  const torch::ScalarType dtype = KernelComputeDtype({q, k, v, g, beta});
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), dk = q.size(3),
                dv = v.size(3);
  const int64_t n = (t + chunk - 1) / chunk;
  const int64_t t_padded = n * chunk;
  const int64_t bh = b * h;

  // Batch, heads and chunks are flattened: tensors are (bh * n, C, d), viewed
  // as (bh, n, C, d) for the sequential loop over n. Padded steps have
  // g = beta = 0 and k = v = 0: they change nothing. The scale is applied to
  // the output (alpha of the last matmul), not to q.
  const int64_t rows = bh * n;
  const torch::Tensor qc =
      PadTime(q.to(dtype), t_padded).reshape({rows, chunk, dk});
  const torch::Tensor kc =
      PadTime(k.to(dtype), t_padded).reshape({rows, chunk, dk});
  const torch::Tensor vc =
      PadTime(v.to(dtype), t_padded).reshape({rows, chunk, dv});
  const torch::Tensor betac =
      PadTime(beta.to(dtype), t_padded).reshape({rows, chunk, 1});
  // Log-decay since the start of the chunk: (rows, C).
  const torch::Tensor cum =
      PadTime(g.to(dtype), t_padded).reshape({rows, chunk}).cumsum(-1);
  const torch::Tensor cum_last = cum.narrow(-1, chunk - 1, 1);  // (rows, 1)
  const torch::Tensor decay_from_start = cum.exp().unsqueeze(-1);

  // D_ij = exp(G_i - G_j) for j <= i; the upper triangle is masked with -inf
  // before exp (it could overflow).
  const torch::Tensor decay =
      (cum.unsqueeze(-1) - cum.unsqueeze(-2))
          .masked_fill(StrictUpperMask(chunk, q.device()),
                       -std::numeric_limits<double>::infinity())
          .exp();  // (rows, C, C)

  // WY/UT representation: with A = strict_lower((beta K K^T) * D),
  //   W = (I + A)^-1 (beta K * exp(G)),  U = (I + A)^-1 (beta V).
  // (I + A)^-1 comes from a batched unit-lower-triangular solve against the
  // identity (C right-hand sides instead of dk + dv), then two matmuls.
  // UnitLowerInverse reads only the strict lower triangle, so the diagonal of
  // (beta K K^T) * D need not be masked.
  const torch::Tensor k_beta = kc * betac;
  const torch::Tensor inverse = UnitLowerInverse(
      ParallelBmm(k_beta, kc.transpose(1, 2)) * decay);  // (rows, C, C)
  const std::vector<torch::Tensor> w_i =
      ParallelBmm(inverse, k_beta * decay_from_start)
          .view({bh, n, chunk, dk})
          .unbind(1);  // each (bh, C, dk)
  const std::vector<torch::Tensor> u_i = ParallelBmm(inverse, vc * betac)
                                             .view({bh, n, chunk, dv})
                                             .unbind(1);  // each (bh, C, dv)

  // Keys decayed to the chunk end (transposed for the state update) and the
  // whole-chunk decays.
  const std::vector<torch::Tensor> k_to_end_t =
      (kc * (cum_last - cum).exp().unsqueeze(-1))
          .view({bh, n, chunk, dk})
          .transpose(-1, -2)
          .unbind(1);  // each (bh, dk, C)
  const std::vector<torch::Tensor> chunk_decay =
      cum_last.exp().view({bh, n, 1, 1}).unbind(1);  // each (bh, 1, 1)

  // Sequential over chunks: V'_n = U_n - W_n S; S = exp(G_C) S + Kd_n^T V'_n.
  std::vector<torch::Tensor> states, new_values;
  states.reserve(n);
  new_values.reserve(n);
  torch::Tensor s = torch::zeros({bh, dk, dv}, q.options().dtype(dtype));
  for (int64_t i = 0; i < n; ++i) {
    states.push_back(s);
    new_values.push_back(ParallelBaddbmm(u_i[i], w_i[i], s, /*beta=*/1,
                                         /*alpha=*/-1));  // (bh, C, dv)
    if (i + 1 < n) {
      s = ParallelBaddbmm(s * chunk_decay[i], k_to_end_t[i], new_values.back(),
                          /*beta=*/1, /*alpha=*/1);
    }
  }

  // All chunks at once: O = scale ((Q * exp(G)) S_in + ((Q K^T) * D) V').
  const torch::Tensor scores = ParallelBmm(qc, kc.transpose(1, 2)) * decay;
  const torch::Tensor inter = ParallelBmm(
      qc * decay_from_start, torch::stack(states, 1).view({rows, dk, dv}));
  const torch::Tensor out = ParallelBaddbmm(
      inter, scores, torch::stack(new_values, 1).view({rows, chunk, dv}),
      /*beta=*/scale, /*alpha=*/scale);
  return out.view({b, h, t_padded, dv}).narrow(2, 0, t).to(v.scalar_type());
}

torch::Tensor RecurrentGatedDelta(const torch::Tensor& q,
                                  const torch::Tensor& k,
                                  const torch::Tensor& v,
                                  const torch::Tensor& g,
                                  const torch::Tensor& beta, double scale) {
  CheckShapes(q, k, v, g, beta);
  ScopedCpuAutocastOff no_autocast;
  const torch::ScalarType dtype = KernelComputeDtype({q, k, v, g, beta});
  const int64_t b = q.size(0), h = q.size(1), dk = q.size(3), dv = v.size(3);
  const std::vector<torch::Tensor> q_t = (q.to(dtype) * scale).unbind(2);
  const std::vector<torch::Tensor> k_t = k.to(dtype).unbind(2);
  const std::vector<torch::Tensor> v_t = v.to(dtype).unbind(2);
  const std::vector<torch::Tensor> alpha_t =
      g.to(dtype).exp().unsqueeze(-1).unsqueeze(-1).unbind(2);  // (B, H, 1, 1)
  const std::vector<torch::Tensor> beta_t =
      beta.to(dtype).unsqueeze(-1).unbind(2);  // (B, H, 1)

  torch::Tensor state =
      torch::zeros({b, h, dk, dv}, v.options().dtype(dtype));  // (B, H, dk, dv)
  std::vector<torch::Tensor> outs;
  outs.reserve(q_t.size());
  for (size_t i = 0; i < q_t.size(); ++i) {
    state = state * alpha_t[i];
    const torch::Tensor recalled =
        torch::matmul(k_t[i].unsqueeze(-2), state).squeeze(-2);  // (B, H, dv)
    const torch::Tensor u = beta_t[i] * (v_t[i] - recalled);
    state = state + k_t[i].unsqueeze(-1) * u.unsqueeze(-2);
    outs.push_back(
        torch::matmul(q_t[i].unsqueeze(-2), state).squeeze(-2));  // (B, H, dv)
  }
  return torch::stack(outs, 2).to(v.scalar_type());
}

}  // namespace hlab::model
