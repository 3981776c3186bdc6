#include "model/kernels/gated_delta_fused.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/blas.h"
#include "model/cpu/chunk_rows.h"
#include "model/cpu/small_bf16_gemm.h"
#include "model/cpu/unit_lower.h"
#include "model/cpu/vec_math.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model::internal {
namespace {

struct Dims {
  int64_t b = 0, h = 0, t = 0, dk = 0, dv = 0, c = 0, n = 0;
  bool bf16_products = false;  // ChunkGemm: bf16 operands when T is float
};

// One chunk of one batch-head in per-thread buffers, row-major. Products
// that share an operand are one GEMM over stacked or side-by-side buffers
// (fewer, larger calls: these matrices are 32 x 64). With len the chunk's
// length and dkv = dk + dv:
//   kbq   [kb; q] (2 len x dk): kb = beta k, then the rows of q
//   kr, vr the rows of k, v (views into the inputs when they are already
//         T, else converted into k, v);  beta, cum (log-decay since the
//         chunk start)
//   e = exp(cum), f = exp(cum_last - cum),  kd = k f,  qe = q e
//   kv    [kbe | vb] (len x dkv): kbe = kb e, vb = beta v
//   as    [a; s] (2 len x len): a = strict_lower((kb k^T) * D),
//         s = (q k^T) * D (lower with diagonal)
//   decay D_rc = exp(cum_r - cum_c) for c <= r, 0 above (len x len)
//   tinv  (I + a)^-1 (len x len)
//   wu    [w | u] (len x dkv) = tinv [kbe | vb]; then u becomes V' = u - w S
template <typename T>
struct Chunk {
  explicit Chunk(const Dims& d)
      : kbq(2 * d.c * d.dk),
        k(d.c * d.dk),
        v(d.c * d.dv),
        kd(d.c * d.dk),
        qe(d.c * d.dk),
        kv(d.c * (d.dk + d.dv)),
        wu(d.c * (d.dk + d.dv)),
        as(2 * d.c * d.c),
        decay(d.c * d.c),
        tinv(d.c * d.c),
        beta(d.c),
        cum(d.c),
        e(d.c),
        f(d.c),
        dk(d.dk),
        gemm(d.bf16_products) {}
  std::vector<T> kbq, k, v, kd, qe, kv, wu, as, decay, tinv, beta, cum, e, f;
  int64_t dk;
  ChunkGemm<T> gemm;  // every product of the chunk goes through it
  int64_t len = 0;
  RowBlock<T> kr, vr;  // the rows of k and v: views, or k / v converted

  T* kb() { return kbq.data(); }
  T* q() { return kbq.data() + len * dk; }
  T* a() { return as.data(); }
  T* s() { return as.data() + len * len; }
  T* w() { return wu.data(); }
  T* u() { return wu.data() + dk; }  // V' after NewValues
};

// Fills x for chunk i of batch-head (b, h) up to w and u (not yet V').
template <typename T>
HLAB_VECTOR_CLONES void LoadChunk(const Dims& d, const Rows& q, const Rows& k,
                                  const Rows& v, const T* g, const T* beta,
                                  int64_t b, int64_t h, int64_t i,
                                  Chunk<T>& x) {
  const int64_t t0 = i * d.c;
  const int64_t len = std::min(d.c, d.t - t0);
  const int64_t dkv = d.dk + d.dv;
  x.len = len;
  T* kb = x.kb();
  T* qr = x.q();
  LoadRows(q, b, h, t0, len, d.dk, qr);
  x.kr = ViewOrLoadRows(k, b, h, t0, len, d.dk, x.k.data());
  x.vr = ViewOrLoadRows(v, b, h, t0, len, d.dv, x.v.data());
  const T* kp = x.kr.data;
  const int64_t ldk = x.kr.ld;
  const int64_t row0 = (b * d.h + h) * d.t + t0;
  T acc = 0;
  for (int64_t j = 0; j < len; ++j) {
    x.cum[j] = acc += g[row0 + j];
    x.beta[j] = beta[row0 + j];
  }
  const T last = x.cum[len - 1];
  for (int64_t j = 0; j < len; ++j) {
    const T bj = x.beta[j];
    const T ej = ExpNonPositive(x.cum[j]);
    const T fj = ExpNonPositive(last - x.cum[j]);
    x.e[j] = ej;
    x.f[j] = fj;
    const int64_t o = j * d.dk;
    const T* kj = kp + j * ldk;
    T* kbe = x.kv.data() + j * dkv;
    T* vb = kbe + d.dk;
#pragma omp simd
    for (int64_t c = 0; c < d.dk; ++c) {
      const T kbc = kj[c] * bj;
      kb[o + c] = kbc;
      kbe[c] = kbc * ej;
      x.kd[o + c] = kj[c] * fj;
      x.qe[o + c] = qr[o + c] * ej;
    }
    const T* vr = x.vr.data + j * x.vr.ld;
#pragma omp simd
    for (int64_t c = 0; c < d.dv; ++c) vb[c] = vr[c] * bj;
  }
  // [a; s] = [kb; q] k^T, then the decays.
  x.gemm(false, true, 2 * len, len, d.dk, T(1), kb, d.dk, kp, ldk, T(0),
         x.as.data(), len);
  T* a = x.a();
  T* s = x.s();
  for (int64_t r = 0; r < len; ++r) {
    T* sr = s + r * len;
    T* dr = x.decay.data() + r * len;
    T* ar = a + r * len;
    DecayRow(x.cum.data(), x.cum[r], sr, dr, r + 1);
#pragma omp simd
    for (int64_t c = 0; c < r; ++c) ar[c] *= dr[c];
    std::fill(ar + r, ar + len, T(0));
    std::fill(sr + r + 1, sr + len, T(0));
    std::fill(dr + r + 1, dr + len, T(0));
  }
  InvertUnitLower(a, len, x.tinv.data());
  // [w | u] = tinv [kbe | vb].
  x.gemm(false, false, len, dkv, len, T(1), x.tinv.data(), len, x.kv.data(),
         dkv, T(0), x.wu.data(), dkv);
}

// u = V' = U - W S for the state S entering the chunk.
template <typename T>
void NewValues(const Dims& d, const T* state, Chunk<T>& x) {
  const int64_t dkv = d.dk + d.dv;
  x.gemm(false, false, x.len, d.dv, d.dk, T(-1), x.w(), dkv, state, d.dv, T(1),
         x.u(), dkv);
}

// Forward of batch-heads [bh0, bh1): the output and the state entering each
// chunk, states: (B * H, n, dk, dv).
template <typename T>
HLAB_VECTOR_CLONES void ForwardRange(const Dims& d, double scale, const Rows& q,
                                     const Rows& k, const Rows& v, const T* g,
                                     const T* beta, const torch::Tensor& out,
                                     T* states, int64_t bh0, int64_t bh1) {
  Chunk<T> x(d);
  std::vector<T> o(d.c * d.dv);
  const T alpha = static_cast<T>(scale);
  const int64_t size = d.dk * d.dv, dkv = d.dk + d.dv;
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / d.h, h = bh % d.h;
    T* first = states + bh * d.n * size;
    std::fill_n(first, size, T(0));
    for (int64_t i = 0; i < d.n; ++i) {
      const T* state = first + i * size;
      LoadChunk(d, q, k, v, g, beta, b, h, i, x);
      const int64_t len = x.len;
      NewValues(d, state, x);
      // O = scale (Qe S + s V'), straight into the output when it is T.
      T* direct = RowsBthdIfDtype<T>(out, b, h, i * d.c, d.dv);
      T* op = direct != nullptr ? direct : o.data();
      const int64_t ldo = direct != nullptr ? d.h * d.dv : d.dv;
      x.gemm(false, false, len, d.dv, d.dk, alpha, x.qe.data(), d.dk, state,
             d.dv, T(0), op, ldo);
      x.gemm(false, false, len, d.dv, len, alpha, x.s(), len, x.u(), dkv, T(1),
             op, ldo);
      if (direct == nullptr) StoreRowsBthd(op, len, d.dv, out, b, h, i * d.c);
      if (i + 1 < d.n) {
        // S_next = exp(cum_last) S + Kd^T V'.
        T* next = first + (i + 1) * size;
        const T decay = ExpNonPositive(x.cum[len - 1]);
        for (int64_t j = 0; j < size; ++j) next[j] = decay * state[j];
        x.gemm(true, false, d.dk, d.dv, len, T(1), x.kd.data(), d.dk, x.u(),
               dkv, T(1), next, d.dv);
      }
    }
  }
}

// Gradient buffers, contiguous in the compute dtype: q, k (B, H, T, dk),
// v (B, H, T, dv), g, beta (B, H, T).
template <typename T>
struct Grads {
  T *q, *k, *v, *g, *beta;
};

// Backward of batch-heads [bh0, bh1), chunks last to first, with G = dL/dS
// of the state leaving the current chunk carried back.
template <typename T>
HLAB_VECTOR_CLONES void BackwardRange(const Dims& d, double scale,
                                      const Rows& q, const Rows& k,
                                      const Rows& v, const Rows& dout,
                                      const T* g, const T* beta,
                                      const T* states, const Grads<T>& grads,
                                      int64_t bh0, int64_t bh1) {
  Chunk<T> x(d);
  const int64_t cc = d.c * d.c, ck = d.c * d.dk, cv = d.c * d.dv;
  const int64_t dkv = d.dk + d.dv;
  // dwu = [dW | dV'], dkv_in = [dKbe | dVb] (len x dkv); dh = [dA; ds]
  // (2 len x len), turned into [Ha; Hs]; dkbq = [dKb; dQ] (2 len x dk).
  std::vector<T> dout_c(cv), dwu(d.c * dkv), dkv_in(d.c * dkv), dkd(ck),
      dqe(ck), dkbq(2 * ck), dh(2 * cc), dtinv(cc), tmp(cc), dcum(d.c),
      carried(d.dk * d.dv);
  const T alpha = static_cast<T>(scale);
  const int64_t size = d.dk * d.dv;
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / d.h, h = bh % d.h;
    std::fill(carried.begin(), carried.end(), T(0));
    for (int64_t i = d.n - 1; i >= 0; --i) {
      const T* state = states + (bh * d.n + i) * size;
      LoadChunk(d, q, k, v, g, beta, b, h, i, x);
      NewValues(d, state, x);
      const int64_t len = x.len;
      const int64_t t0 = i * d.c;
      const RowBlock<T> dor =
          ViewOrLoadRows(dout, b, h, t0, len, d.dv, dout_c.data());
      const int64_t row0 = bh * d.t + t0;
      // dK and dV go straight into their gradients' rows.
      T* dk = grads.k + row0 * d.dk;
      T* dv = grads.v + row0 * d.dv;
      const T last_decay = ExpNonPositive(x.cum[len - 1]);
      T* dw = dwu.data();
      T* dvp = dwu.data() + d.dk;
      T* da = dh.data();
      T* ds = dh.data() + len * len;
      const T* vp = x.u();

      // Through O = scale (Qe S + s V') and S_next = exp(cum_last) S +
      // Kd^T V' (nothing leaves the last chunk):
      //   dV' = scale s^T dO + Kd G,  dKd = V' G^T,  dexp(cum_last) = <G, S>.
      x.gemm(true, false, len, d.dv, len, alpha, x.s(), len, dor.data, dor.ld,
             T(0), dvp, dkv);
      T d_last_decay = 0;
      if (i + 1 < d.n) {
        x.gemm(false, false, len, d.dv, d.dk, T(1), x.kd.data(), d.dk,
               carried.data(), d.dv, T(1), dvp, dkv);
        x.gemm(false, true, len, d.dk, d.dv, T(1), vp, dkv, carried.data(),
               d.dv, T(0), dkd.data(), d.dk);
        d_last_decay = Dot(carried.data(), state, size);
      } else {
        std::fill_n(dkd.begin(), len * d.dk, T(0));
      }
      //   dQe = scale dO S^T,  ds = scale dO V'^T.
      x.gemm(false, true, len, d.dk, d.dv, alpha, dor.data, dor.ld, state, d.dv,
             T(0), dqe.data(), d.dk);
      x.gemm(false, true, len, len, d.dv, alpha, dor.data, dor.ld, vp, dkv,
             T(0), ds, len);
      // Through V' = U - W S:  dW = -dV' S^T,  dU = dV'; and G for the state
      // entering the chunk: exp(cum_last) G + scale Qe^T dO - W^T dV'.
      x.gemm(false, true, len, d.dk, d.dv, T(-1), dvp, dkv, state, d.dv, T(0),
             dw, dkv);
      if (i > 0) {
        for (int64_t j = 0; j < size; ++j) carried[j] *= last_decay;
        x.gemm(true, false, d.dk, d.dv, len, alpha, x.qe.data(), d.dk, dor.data,
               dor.ld, T(1), carried.data(), d.dv);
        x.gemm(true, false, d.dk, d.dv, len, T(-1), x.w(), dkv, dvp, dkv, T(1),
               carried.data(), d.dv);
      }
      // Through [W | U] = Tinv [Kbe | Vb]:
      //   [dKbe | dVb] = Tinv^T [dW | dU],  dTinv = [dW | dU] [Kbe | Vb]^T;
      // through Tinv = (I + A)^-1:  dA = -Tinv^T dTinv Tinv^T.
      x.gemm(true, false, len, dkv, len, T(1), x.tinv.data(), len, dwu.data(),
             dkv, T(0), dkv_in.data(), dkv);
      x.gemm(false, true, len, len, dkv, T(1), dwu.data(), dkv, x.kv.data(),
             dkv, T(0), dtinv.data(), len);
      x.gemm(true, false, len, len, len, T(-1), x.tinv.data(), len,
             dtinv.data(), len, T(0), tmp.data(), len);
      x.gemm(false, true, len, len, len, T(1), tmp.data(), len, x.tinv.data(),
             len, T(0), da, len);
      // Through A = strict_lower((Kb K^T) * D) and s = (Q K^T) * D: with
      // Ha = dA * D (strict lower), Hs = ds * D (lower),
      //   [dKb; dQ] = [Ha; Hs] K,  dK = [Ha; Hs]^T [Kb; Q],
      // and through D, dcum_r += sum_c E_rc, dcum_c -= E_rc for
      // E = dA * A + ds * s.
      std::fill_n(dcum.begin(), len, T(0));
      const T* a = x.a();
      const T* s = x.s();
      for (int64_t r = 0; r < len; ++r) {
        T* har = da + r * len;
        T* hsr = ds + r * len;
        const T* ar = a + r * len;
        const T* sr = s + r * len;
        const T* dr = x.decay.data() + r * len;
        T row = 0;
#pragma omp simd reduction(+ : row)
        for (int64_t c = 0; c < r; ++c) {
          const T e = har[c] * ar[c] + hsr[c] * sr[c];
          row += e;
          dcum[c] -= e;
          har[c] *= dr[c];
          hsr[c] *= dr[c];
        }
        // The diagonal: D_rr = 1 and E_rr cancels in dcum; A has none.
        std::fill(har + r, har + len, T(0));
        std::fill(hsr + r + 1, hsr + len, T(0));
        dcum[r] += row;
      }
      x.gemm(false, false, 2 * len, d.dk, len, T(1), dh.data(), len, x.kr.data,
             x.kr.ld, T(0), dkbq.data(), d.dk);
      x.gemm(true, false, len, d.dk, 2 * len, T(1), dh.data(), len,
             x.kbq.data(), d.dk, T(0), dk, d.dk);
      T* dkb = dkbq.data();
      T* dq = dkbq.data() + len * d.dk;
      const T* qr = x.q();
      const T* kb = x.kb();
      // Through Kb = beta K, Kbe = Kb e, Vb = beta V, Kd = K f, Qe = Q e.
      T last_total = d_last_decay * last_decay;
      T* dbeta = grads.beta + (bh * d.t + t0);
      for (int64_t j = 0; j < len; ++j) {
        const int64_t o = j * d.dk;
        const T* kr = x.kr.data + j * x.kr.ld;
        const T* vr = x.vr.data + j * x.vr.ld;
        const T* dkbe = dkv_in.data() + j * dkv;
        const T* dvb = dkbe + d.dk;
        const T bj = x.beta[j], ej = x.e[j], fj = x.f[j];
        T s_beta = 0, s_e = 0, s_f = 0;
#pragma omp simd reduction(+ : s_beta, s_e, s_f)
        for (int64_t c = 0; c < d.dk; ++c) {
          const T kj = kr[c];
          const T g_kb = dkb[o + c] + dkbe[c] * ej;  // dL/d(beta k)
          dk[o + c] += bj * g_kb + dkd[o + c] * fj;
          s_beta += kj * g_kb;
          s_e += dkbe[c] * kb[o + c] + dqe[o + c] * qr[o + c];
          s_f += dkd[o + c] * kj;
          dq[o + c] += dqe[o + c] * ej;
        }
        const int64_t ov = j * d.dv;
#pragma omp simd reduction(+ : s_beta)
        for (int64_t c = 0; c < d.dv; ++c) {
          dv[ov + c] = dvb[c] * bj;
          s_beta += vr[c] * dvb[c];
        }
        dbeta[j] = s_beta;
        dcum[j] += s_e * ej - s_f * fj;
        last_total += s_f * fj;
      }
      dcum[len - 1] += last_total;
      // cum = cumsum(g) within the chunk: dg_j = sum_{r >= j} dcum_r.
      T* dg = grads.g + (bh * d.t + t0);
      T acc = 0;
      for (int64_t j = len - 1; j >= 0; --j) dg[j] = acc += dcum[j];
      std::copy_n(dq, len * d.dk, grads.q + row0 * d.dk);
    }
  }
}

Dims DimsOf(const torch::Tensor& q, const torch::Tensor& v, int64_t chunk,
            bool bf16_products) {
  Dims d;
  d.bf16_products = bf16_products;
  d.b = v.size(0);
  d.h = v.size(1);
  d.t = v.size(2);
  d.dk = q.size(3);
  d.dv = v.size(3);
  d.c = chunk;
  d.n = (d.t + chunk - 1) / chunk;
  return d;
}

class FusedGatedDeltaFunction
    : public torch::autograd::Function<FusedGatedDeltaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& q_arg,
                               const torch::Tensor& k_arg,
                               const torch::Tensor& v_arg,
                               const torch::Tensor& g_arg,
                               const torch::Tensor& beta_arg, double scale,
                               int64_t chunk, bool bf16_products) {
    RECORD_FUNCTION("hlab::FusedGatedDeltaFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor q = RowsReadable(q_arg), k = RowsReadable(k_arg),
                        v = RowsReadable(v_arg);
    const torch::ScalarType dtype =
        KernelComputeDtype({q, k, v, g_arg, beta_arg});
    const torch::Tensor g = g_arg.to(dtype).contiguous();
    const torch::Tensor beta = beta_arg.to(dtype).contiguous();
    const Dims d = DimsOf(q, v, chunk, bf16_products);
    torch::Tensor out = at::empty({d.b, d.t, d.h, d.dv}, v.options());
    torch::Tensor states =
        at::empty({d.b * d.h, d.n, d.dk, d.dv}, v.options().dtype(dtype));
    AT_DISPATCH_FLOATING_TYPES(dtype, "FusedGatedDelta", [&] {
      const Rows qr = RowsOf(q, d.h), kr = RowsOf(k, d.h), vr = RowsOf(v, d.h);
      ForEachBatchHead(d.b * d.h, [&](int64_t bh0, int64_t bh1) {
        ForwardRange<scalar_t>(d, scale, qr, kr, vr, g.data_ptr<scalar_t>(),
                               beta.data_ptr<scalar_t>(), out,
                               states.data_ptr<scalar_t>(), bh0, bh1);
      });
    });
    ctx->save_for_backward({q, k, v, g, beta, states});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["bf16_products"] = d.bf16_products;
    ctx->saved_data["g_dtype"] = static_cast<int64_t>(g_arg.scalar_type());
    ctx->saved_data["beta_dtype"] =
        static_cast<int64_t>(beta_arg.scalar_type());
    return out.transpose(1, 2);
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2],
                        &g = saved[3], &beta = saved[4], &states = saved[5];
    if (!grad_outputs[0].defined()) {
      return torch::autograd::variable_list(8);
    }
    const torch::Tensor dout = RowsReadable(grad_outputs[0]);
    const double scale = ctx->saved_data["scale"].toDouble();
    const Dims d = DimsOf(q, v, ctx->saved_data["chunk"].toInt(),
                          ctx->saved_data["bf16_products"].toBool());
    const auto options = states.options();
    torch::Tensor dq = at::empty({d.b, d.h, d.t, d.dk}, options);
    torch::Tensor dk = at::empty({d.b, d.h, d.t, d.dk}, options);
    torch::Tensor dv = at::empty({d.b, d.h, d.t, d.dv}, options);
    torch::Tensor dg = at::empty({d.b, d.h, d.t}, options);
    torch::Tensor dbeta = at::empty({d.b, d.h, d.t}, options);
    AT_DISPATCH_FLOATING_TYPES(
        states.scalar_type(), "FusedGatedDeltaBack", [&] {
          const Rows qr = RowsOf(q, d.h), kr = RowsOf(k, d.h),
                     vr = RowsOf(v, d.h), dr = RowsOf(dout, d.h);
          const Grads<scalar_t> grads{
              dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(),
              dv.data_ptr<scalar_t>(), dg.data_ptr<scalar_t>(),
              dbeta.data_ptr<scalar_t>()};
          ForEachBatchHead(d.b * d.h, [&](int64_t bh0, int64_t bh1) {
            BackwardRange<scalar_t>(
                d, scale, qr, kr, vr, dr, g.data_ptr<scalar_t>(),
                beta.data_ptr<scalar_t>(), states.data_ptr<scalar_t>(), grads,
                bh0, bh1);
          });
        });
    const auto dtype_of = [&](const char* key) {
      return static_cast<torch::ScalarType>(ctx->saved_data[key].toInt());
    };
    return {dq.to(q.scalar_type()),
            dk.to(k.scalar_type()),
            dv.to(v.scalar_type()),
            dg.to(dtype_of("g_dtype")),
            dbeta.to(dtype_of("beta_dtype")),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

bool FusedGatedDeltaServes(std::initializer_list<torch::Tensor> inputs) {
  return FusedKernelsTake(inputs);
}

torch::Tensor FusedChunkedGatedDelta(const torch::Tensor& q,
                                     const torch::Tensor& k,
                                     const torch::Tensor& v,
                                     const torch::Tensor& g,
                                     const torch::Tensor& beta, double scale,
                                     int64_t chunk, bool bf16_products) {
  return FusedGatedDeltaFunction::apply(q, k, v, g, beta, scale, chunk,
                                        bf16_products);
}

}  // namespace hlab::model::internal
