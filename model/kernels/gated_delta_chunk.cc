#include "model/kernels/gated_delta_chunk.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/blas.h"
#include "model/cpu/raw_tensor.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model::internal {
namespace {

// ---------------------------------------------------------------------------
// MakeChunkInputs.

// As LibTorch ops under autograd: for other devices and dtypes.
ChunkInputs ChunkInputsWithAten(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v,
                                const torch::Tensor& beta,
                                const torch::Tensor& cum) {
  const torch::Tensor b = beta.unsqueeze(-1);
  const torch::Tensor e = cum.exp().unsqueeze(-1);
  const torch::Tensor to_end =
      (cum.narrow(-1, cum.size(-1) - 1, 1) - cum).exp().unsqueeze(-1);
  const torch::Tensor kb = k * b;
  return {kb, kb * e, v * b, k * to_end, q * e};
}

// Sizes: rows of C steps, dk and dv per step.
struct InputDims {
  int64_t rows = 0, c = 0, dk = 0, dv = 0;
};

// Forward of rows [r0, r1) on contiguous buffers.
template <typename T>
void ChunkInputsForward(const InputDims& d, int64_t r0, int64_t r1, const T* q,
                        const T* k, const T* v, const T* beta, const T* cum,
                        T* kb, T* kbe, T* vb, T* kd, T* qe) {
  for (int64_t r = r0; r < r1; ++r) {
    const T last = cum[r * d.c + d.c - 1];
    for (int64_t i = 0; i < d.c; ++i) {
      const int64_t step = r * d.c + i;
      const T b = beta[step], e = std::exp(cum[step]),
              f = std::exp(last - cum[step]);
      const int64_t o = step * d.dk;
      for (int64_t j = o; j < o + d.dk; ++j) {
        kb[j] = k[j] * b;
        kbe[j] = kb[j] * e;
        kd[j] = k[j] * f;
        qe[j] = q[j] * e;
      }
      const int64_t ov = step * d.dv;
      for (int64_t j = ov; j < ov + d.dv; ++j) vb[j] = v[j] * b;
    }
  }
}

// Backward of rows [r0, r1): gradients of q, k, v, beta, cum from those of
// kb, kbe, vb, kd, qe. Through f = exp(cum_C - cum_i) cum_i gets -h_i and
// cum_C gets sum_i h_i, with h_i = sum_j dkd_ij k_ij f_i.
template <typename T>
void ChunkInputsBackward(const InputDims& d, int64_t r0, int64_t r1, const T* q,
                         const T* k, const T* v, const T* beta, const T* cum,
                         const T* g_kb, const T* g_kbe, const T* g_vb,
                         const T* g_kd, const T* g_qe, T* gq, T* gk, T* gv,
                         T* gbeta, T* gcum) {
  for (int64_t r = r0; r < r1; ++r) {
    const T last = cum[r * d.c + d.c - 1];
    T g_last = 0;
    for (int64_t i = 0; i < d.c; ++i) {
      const int64_t step = r * d.c + i;
      const T b = beta[step], e = std::exp(cum[step]),
              f = std::exp(last - cum[step]);
      T s_beta = 0, s_e = 0, s_f = 0;
      const int64_t o = step * d.dk;
      for (int64_t j = o; j < o + d.dk; ++j) {
        const T g_kb_total = g_kb[j] + g_kbe[j] * e;  // dL/d(beta k)
        gk[j] = b * g_kb_total + g_kd[j] * f;
        gq[j] = g_qe[j] * e;
        s_beta += k[j] * g_kb_total;
        s_e += g_kbe[j] * k[j] * b + g_qe[j] * q[j];
        s_f += g_kd[j] * k[j];
      }
      const int64_t ov = step * d.dv;
      for (int64_t j = ov; j < ov + d.dv; ++j) {
        gv[j] = g_vb[j] * b;
        s_beta += v[j] * g_vb[j];
      }
      gbeta[step] = s_beta;
      gcum[step] = s_e * e - s_f * f;
      g_last += s_f * f;
    }
    gcum[r * d.c + d.c - 1] += g_last;
  }
}

// Runs fn(r0, r1) over ranges of rows on the intra-op threads (each calling
// a single-threaded BLAS).
template <typename Fn>
void ForEachRowRange(int64_t rows, int64_t work_per_row, const Fn& fn) {
  internal::UseOneThreadPool();
  const int64_t grain = std::max<int64_t>(
      1, (int64_t{1} << 15) / std::max<int64_t>(1, work_per_row));
  at::parallel_for(0, rows, grain, fn);
}

class ChunkInputsFunction
    : public torch::autograd::Function<ChunkInputsFunction> {
 public:
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, const torch::Tensor& q_arg,
      const torch::Tensor& k_arg, const torch::Tensor& v_arg,
      const torch::Tensor& beta_arg, const torch::Tensor& cum_arg) {
    RECORD_FUNCTION("hlab::ChunkInputsFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor q = q_arg.contiguous(), k = k_arg.contiguous(),
                        v = v_arg.contiguous(), beta = beta_arg.contiguous(),
                        cum = cum_arg.contiguous();
    const InputDims d{q.size(0), q.size(1), q.size(2), v.size(2)};
    torch::Tensor kb = at::empty_like(k), kbe = at::empty_like(k),
                  vb = at::empty_like(v), kd = at::empty_like(k),
                  qe = at::empty_like(q);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ChunkInputs", [&] {
      ForEachRowRange(
          d.rows, d.c * (4 * d.dk + d.dv), [&](int64_t r0, int64_t r1) {
            ChunkInputsForward<scalar_t>(
                d, r0, r1, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                v.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(),
                cum.data_ptr<scalar_t>(), kb.data_ptr<scalar_t>(),
                kbe.data_ptr<scalar_t>(), vb.data_ptr<scalar_t>(),
                kd.data_ptr<scalar_t>(), qe.data_ptr<scalar_t>());
          });
    });
    ctx->save_for_backward({q, k, v, beta, cum});
    return {kb, kbe, vb, kd, qe};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2],
                        &beta = saved[3], &cum = saved[4];
    const InputDims d{q.size(0), q.size(1), q.size(2), v.size(2)};
    // Undefined gradients (outputs unused) are zero.
    const auto grad_or_zero = [&](size_t i, const torch::Tensor& like) {
      return grads[i].defined() ? grads[i].contiguous()
                                : torch::zeros_like(like);
    };
    const torch::Tensor g_kb = grad_or_zero(0, k), g_kbe = grad_or_zero(1, k),
                        g_vb = grad_or_zero(2, v), g_kd = grad_or_zero(3, k),
                        g_qe = grad_or_zero(4, q);
    torch::Tensor gq = at::empty_like(q), gk = at::empty_like(k),
                  gv = at::empty_like(v), gbeta = at::empty_like(beta),
                  gcum = at::empty_like(cum);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "ChunkInputsBackward", [&] {
      ForEachRowRange(
          d.rows, d.c * (6 * d.dk + 2 * d.dv), [&](int64_t r0, int64_t r1) {
            ChunkInputsBackward<scalar_t>(
                d, r0, r1, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(),
                v.data_ptr<scalar_t>(), beta.data_ptr<scalar_t>(),
                cum.data_ptr<scalar_t>(), g_kb.data_ptr<scalar_t>(),
                g_kbe.data_ptr<scalar_t>(), g_vb.data_ptr<scalar_t>(),
                g_kd.data_ptr<scalar_t>(), g_qe.data_ptr<scalar_t>(),
                gq.data_ptr<scalar_t>(), gk.data_ptr<scalar_t>(),
                gv.data_ptr<scalar_t>(), gbeta.data_ptr<scalar_t>(),
                gcum.data_ptr<scalar_t>());
          });
    });
    return {gq, gk, gv, gbeta, gcum};
  }
};

// ---------------------------------------------------------------------------
// DecayedScores.

// As LibTorch ops under autograd: D built with a -inf mask before exp (the
// upper triangle could overflow), then two batched matmuls.
std::pair<torch::Tensor, torch::Tensor> DecayedScoresWithAten(
    const torch::Tensor& kb, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& cum) {
  const int64_t c = cum.size(-1);
  const torch::Tensor decay =
      (cum.unsqueeze(-1) - cum.unsqueeze(-2))
          .masked_fill(StrictUpperMask(c, cum.device()),
                       -std::numeric_limits<double>::infinity())
          .exp();  // (rows, C, C)
  const torch::Tensor k_t = k.transpose(1, 2);
  return {ParallelBmm(kb, k_t) * decay, ParallelBmm(q, k_t) * decay};
}

// Forward of rows [r0, r1): D, then kk = (kb k^T) * D and s = (q k^T) * D.
template <typename T>
void DecayedScoresForward(const InputDims& d, int64_t r0, int64_t r1,
                          const T* kb, const T* q, const T* k, const T* cum,
                          T* decay, T* kk, T* s) {
  const int64_t c = d.c, cc = d.c * d.c;
  for (int64_t r = r0; r < r1; ++r) {
    const T* kr = k + r * c * d.dk;
    T* kkr = kk + r * cc;
    T* sr = s + r * cc;
    T* dr = decay + r * cc;
    Gemm(false, true, c, c, d.dk, T(1), kb + r * c * d.dk, d.dk, kr, d.dk, T(0),
         kkr, c);
    Gemm(false, true, c, c, d.dk, T(1), q + r * c * d.dk, d.dk, kr, d.dk, T(0),
         sr, c);
    const T* cr = cum + r * c;
    for (int64_t i = 0; i < c; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        const T dij = std::exp(cr[i] - cr[j]);
        dr[i * c + j] = dij;
        kkr[i * c + j] *= dij;
        sr[i * c + j] *= dij;
      }
      for (int64_t j = i + 1; j < c; ++j) {
        dr[i * c + j] = kkr[i * c + j] = sr[i * c + j] = 0;
      }
    }
  }
}

// Backward of rows [r0, r1). With H = dL/d(out) * D for each output:
// dkb = H_kk k, dq = H_s k, dk = H_kk^T kb + H_s^T q; and through D,
// dcum_i = sum_j E_ij - sum_j E_ji with E = dL/dkk * kk + dL/ds * s.
// h: 2 C^2 scratch.
template <typename T>
void DecayedScoresBackward(const InputDims& d, int64_t r0, int64_t r1,
                           const T* kb, const T* q, const T* k, const T* decay,
                           const T* kk, const T* s, const T* g_kk, const T* g_s,
                           T* gkb, T* gq, T* gk, T* gcum, T* h) {
  const int64_t c = d.c, cc = d.c * d.c, dk = d.dk;
  T* h_kk = h;
  T* h_s = h + cc;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t m = r * cc;
    T* gc = gcum + r * c;
    std::fill_n(gc, c, T(0));
    // Above the diagonal D, kk and s are 0: so are H and E.
    for (int64_t i = 0; i < c; ++i) {
      T row = 0;
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t x = m + i * c + j;
        h_kk[i * c + j] = g_kk[x] * decay[x];
        h_s[i * c + j] = g_s[x] * decay[x];
        const T e = g_kk[x] * kk[x] + g_s[x] * s[x];
        row += e;
        gc[j] -= e;
      }
      gc[i] += row;
      std::fill(h_kk + i * c + i + 1, h_kk + (i + 1) * c, T(0));
      std::fill(h_s + i * c + i + 1, h_s + (i + 1) * c, T(0));
    }
    const int64_t o = r * c * dk;
    Gemm(false, false, c, dk, c, T(1), h_kk, c, k + o, dk, T(0), gkb + o, dk);
    Gemm(false, false, c, dk, c, T(1), h_s, c, k + o, dk, T(0), gq + o, dk);
    Gemm(true, false, c, dk, c, T(1), h_kk, c, kb + o, dk, T(0), gk + o, dk);
    Gemm(true, false, c, dk, c, T(1), h_s, c, q + o, dk, T(1), gk + o, dk);
  }
}

class DecayedScoresFunction
    : public torch::autograd::Function<DecayedScoresFunction> {
 public:
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, const torch::Tensor& kb_arg,
      const torch::Tensor& q_arg, const torch::Tensor& k_arg,
      const torch::Tensor& cum_arg) {
    RECORD_FUNCTION("hlab::DecayedScoresFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor kb = kb_arg.contiguous(), q = q_arg.contiguous(),
                        k = k_arg.contiguous(), cum = cum_arg.contiguous();
    const InputDims d{q.size(0), q.size(1), q.size(2), 0};
    torch::Tensor decay = at::empty({d.rows, d.c, d.c}, q.options());
    torch::Tensor kk = at::empty_like(decay), s = at::empty_like(decay);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "DecayedScores", [&] {
      ForEachRowRange(
          d.rows, 2 * d.c * d.c * d.dk, [&](int64_t r0, int64_t r1) {
            DecayedScoresForward<scalar_t>(
                d, r0, r1, kb.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(),
                k.data_ptr<scalar_t>(), cum.data_ptr<scalar_t>(),
                decay.data_ptr<scalar_t>(), kk.data_ptr<scalar_t>(),
                s.data_ptr<scalar_t>());
          });
    });
    ctx->save_for_backward({kb, q, k, decay, kk, s});
    return {kk, s};
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &kb = saved[0], &q = saved[1], &k = saved[2],
                        &decay = saved[3], &kk = saved[4], &s = saved[5];
    const InputDims d{q.size(0), q.size(1), q.size(2), 0};
    const torch::Tensor g_kk =
        grads[0].defined() ? grads[0].contiguous() : torch::zeros_like(kk);
    const torch::Tensor g_s =
        grads[1].defined() ? grads[1].contiguous() : torch::zeros_like(s);
    torch::Tensor gkb = at::empty_like(kb), gq = at::empty_like(q),
                  gk = at::empty_like(k),
                  gcum = at::empty({d.rows, d.c}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "DecayedScoresBackward", [&] {
      ForEachRowRange(
          d.rows, 4 * d.c * d.c * d.dk, [&](int64_t r0, int64_t r1) {
            std::vector<scalar_t> h(2 * d.c * d.c);
            DecayedScoresBackward<scalar_t>(
                d, r0, r1, kb.data_ptr<scalar_t>(), q.data_ptr<scalar_t>(),
                k.data_ptr<scalar_t>(), decay.data_ptr<scalar_t>(),
                kk.data_ptr<scalar_t>(), s.data_ptr<scalar_t>(),
                g_kk.data_ptr<scalar_t>(), g_s.data_ptr<scalar_t>(),
                gkb.data_ptr<scalar_t>(), gq.data_ptr<scalar_t>(),
                gk.data_ptr<scalar_t>(), gcum.data_ptr<scalar_t>(), h.data());
          });
    });
    return {gkb, gq, gk, gcum};
  }
};

}  // namespace

// The inputs in one pass (and one pass back) on the CPU, ATen ops elsewhere.
ChunkInputs MakeChunkInputs(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& beta,
                            const torch::Tensor& cum) {
  const bool cpu = q.device().is_cpu() && (q.scalar_type() == torch::kFloat32 ||
                                           q.scalar_type() == torch::kFloat64);
  if (!cpu) return ChunkInputsWithAten(q, k, v, beta, cum);
  const torch::autograd::variable_list out =
      ChunkInputsFunction::apply(q, k, v, beta, cum);
  return {out[0], out[1], out[2], out[3], out[4]};
}

std::pair<torch::Tensor, torch::Tensor> DecayedScores(
    const torch::Tensor& kb, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& cum) {
  if (!BlasServes(q)) return DecayedScoresWithAten(kb, q, k, cum);
  const torch::autograd::variable_list out =
      DecayedScoresFunction::apply(kb, q, k, cum);
  return {out[0], out[1]};
}

}  // namespace hlab::model::internal
