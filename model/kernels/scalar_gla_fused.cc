#include "model/kernels/scalar_gla_fused.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "model/cpu/blas.h"
#include "model/cpu/chunk_rows.h"
#include "model/cpu/small_bf16_gemm.h"
#include "model/cpu/vec_math.h"
#include "model/kernels/scalar_gla_kernel.h"

namespace hlab::model::internal {
namespace {

struct Dims {
  int64_t b = 0, h = 0, t = 0, dk = 0, dv = 0, c = 0, n = 0;
  int64_t gb = 0;              // g's batch: 1 (shared) or b
  bool bf16_products = false;  // ChunkGemm: bf16 operands when T is float
};

// Per-chunk work buffers of one thread.
template <typename T>
struct Scratch {
  explicit Scratch(const Dims& d)
      : q(d.c * d.dk),
        k(d.c * d.dk),
        v(d.c * d.dv),
        qe(d.c * d.dk),
        kd(d.c * d.dk),
        o(d.c * d.dv),
        s(d.c * d.c),
        decay(d.c * d.c),
        cum(d.c),
        e(d.c),
        f(d.c),
        gemm(d.bf16_products) {}
  std::vector<T> q, k, v, qe, kd, o, s, decay, cum, e, f;
  ChunkGemm<T> gemm;  // every product of the chunk goes through it
};

// Loads chunk i of batch-head (b, h) into w: q, k, v rows, cum (the log-decay
// since the chunk start), e = exp(cum), f = exp(cum_last - cum), qe = q e,
// kd = k f, and s = (q k^T) * D with D in w.decay (lower triangle; zero
// above). Returns the chunk's length.
template <typename T>
HLAB_VECTOR_CLONES int64_t LoadChunk(const Dims& d, const Rows& q,
                                     const Rows& k, const Rows& v, const T* g,
                                     int64_t b, int64_t h, int64_t i,
                                     Scratch<T>& w) {
  const int64_t t0 = i * d.c;
  const int64_t len = std::min(d.c, d.t - t0);
  LoadRows(q, b, h, t0, len, d.dk, w.q.data());
  LoadRows(k, b, h, t0, len, d.dk, w.k.data());
  LoadRows(v, b, h, t0, len, d.dv, w.v.data());
  const T* gr = g + ((d.gb == 1 ? 0 : b) * d.h + h) * d.t + t0;
  T acc = 0;
  for (int64_t j = 0; j < len; ++j) w.cum[j] = acc += gr[j];
  const T last = w.cum[len - 1];
  for (int64_t j = 0; j < len; ++j) {
    w.e[j] = ExpNonPositive(w.cum[j]);
    w.f[j] = ExpNonPositive(last - w.cum[j]);
#pragma omp simd
    for (int64_t c = 0; c < d.dk; ++c) {
      w.qe[j * d.dk + c] = w.q[j * d.dk + c] * w.e[j];
      w.kd[j * d.dk + c] = w.k[j * d.dk + c] * w.f[j];
    }
  }
  w.gemm(false, true, len, len, d.dk, T(1), w.q.data(), d.dk, w.k.data(), d.dk,
         T(0), w.s.data(), len);
  for (int64_t r = 0; r < len; ++r) {
    T* row = w.s.data() + r * len;
    T* dr = w.decay.data() + r * len;
    DecayRow(w.cum.data(), w.cum[r], row, dr, r + 1);
    std::fill(row + r + 1, row + len, T(0));
    std::fill(dr + r + 1, dr + len, T(0));
  }
  return len;
}

// Forward of batch-heads [bh0, bh1): the output and the state entering each
// chunk, states: (B * H, n, dk, dv).
template <typename T>
HLAB_VECTOR_CLONES void ForwardRange(const Dims& d, double scale, const Rows& q,
                                     const Rows& k, const Rows& v, const T* g,
                                     const torch::Tensor& out, T* states,
                                     int64_t bh0, int64_t bh1) {
  Scratch<T> w(d);
  const T alpha = static_cast<T>(scale);
  const int64_t size = d.dk * d.dv;
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / d.h, h = bh % d.h;
    T* s_in = states + bh * d.n * size;
    std::fill_n(s_in, size, T(0));
    for (int64_t i = 0; i < d.n; ++i) {
      T* state = s_in + i * size;  // S entering chunk i
      const int64_t len = LoadChunk(d, q, k, v, g, b, h, i, w);
      // O = scale ((Q exp(G)) S + ((Q K^T) * D) V).
      w.gemm(false, false, len, d.dv, d.dk, alpha, w.qe.data(), d.dk, state,
             d.dv, T(0), w.o.data(), d.dv);
      w.gemm(false, false, len, d.dv, len, alpha, w.s.data(), len, w.v.data(),
             d.dv, T(1), w.o.data(), d.dv);
      StoreRowsBthd(w.o.data(), len, d.dv, out, b, h, i * d.c);
      if (i + 1 < d.n) {
        // S_next = exp(G_last) S + (K exp(G_last - G))^T V.
        T* next = state + size;
        const T decay = ExpNonPositive(w.cum[len - 1]);
        for (int64_t j = 0; j < size; ++j) next[j] = decay * state[j];
        w.gemm(true, false, d.dk, d.dv, len, T(1), w.kd.data(), d.dk,
               w.v.data(), d.dv, T(1), next, d.dv);
      }
    }
  }
}

// Gradient buffers, contiguous in the compute dtype: dq, dk (B, H, T, dk),
// dv (B, H, T, dv), dg (B, H, T).
template <typename T>
struct Grads {
  T *q, *k, *v, *g;
};

// Backward of batch-heads [bh0, bh1), chunks last to first, with G = dL/dS
// of the state leaving the current chunk carried back.
template <typename T>
HLAB_VECTOR_CLONES void BackwardRange(const Dims& d, double scale,
                                      const Rows& q, const Rows& k,
                                      const Rows& v, const Rows& dout,
                                      const T* g, const T* states,
                                      const Grads<T>& grads, int64_t bh0,
                                      int64_t bh1) {
  Scratch<T> w(d);
  std::vector<T> dout_c(d.c * d.dv), dqe(d.c * d.dk), dkd(d.c * d.dk),
      ds(d.c * d.c), dq(d.c * d.dk), dk(d.c * d.dk), dv(d.c * d.dv), dcum(d.c),
      carried(d.dk * d.dv);
  const T alpha = static_cast<T>(scale);
  const int64_t size = d.dk * d.dv;
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / d.h, h = bh % d.h;
    std::fill(carried.begin(), carried.end(), T(0));
    for (int64_t i = d.n - 1; i >= 0; --i) {
      const T* state = states + (bh * d.n + i) * size;
      const int64_t len = LoadChunk(d, q, k, v, g, b, h, i, w);
      const int64_t t0 = i * d.c;
      LoadRows(dout, b, h, t0, len, d.dv, dout_c.data());
      const T last_decay = ExpNonPositive(w.cum[len - 1]);

      // Through O = scale (Qe S + s V).
      w.gemm(false, true, len, d.dk, d.dv, alpha, dout_c.data(), d.dv, state,
             d.dv, T(0), dqe.data(), d.dk);
      w.gemm(false, true, len, len, d.dv, alpha, dout_c.data(), d.dv,
             w.v.data(), d.dv, T(0), ds.data(), len);
      w.gemm(true, false, len, d.dv, len, alpha, w.s.data(), len, dout_c.data(),
             d.dv, T(0), dv.data(), d.dv);
      // Through S_next = exp(G_last) S + Kd^T V (nothing leaves the last
      // chunk): dKd = V G^T, dV += Kd G, dexp(G_last) = <G, S>.
      T d_last_decay = 0;
      if (i + 1 < d.n) {
        w.gemm(false, true, len, d.dk, d.dv, T(1), w.v.data(), d.dv,
               carried.data(), d.dv, T(0), dkd.data(), d.dk);
        w.gemm(false, false, len, d.dv, d.dk, T(1), w.kd.data(), d.dk,
               carried.data(), d.dv, T(1), dv.data(), d.dv);
        d_last_decay = Dot(carried.data(), state, size);
      } else {
        std::fill_n(dkd.begin(), len * d.dk, T(0));
      }
      // G for the state entering this chunk: exp(G_last) G + scale Qe^T dO.
      if (i > 0) {
        for (int64_t j = 0; j < size; ++j) carried[j] *= last_decay;
        w.gemm(true, false, d.dk, d.dv, len, alpha, w.qe.data(), d.dk,
               dout_c.data(), d.dv, T(1), carried.data(), d.dv);
      }
      // Through s = (Q K^T) * D: with H = ds * D, dQ = H K, dK = H^T Q, and
      // through D, dcum_r += sum_c E_rc, dcum_c -= E_rc for E = ds * s.
      std::fill_n(dcum.begin(), len, T(0));
      for (int64_t r = 0; r < len; ++r) {
        T* hr = ds.data() + r * len;
        const T* sr = w.s.data() + r * len;
        const T* dr = w.decay.data() + r * len;
        T row = 0;
#pragma omp simd reduction(+ : row)
        for (int64_t c = 0; c <= r; ++c) {
          const T e = hr[c] * sr[c];
          row += e;
          dcum[c] -= e;
          hr[c] *= dr[c];
        }
        dcum[r] += row;
        std::fill(hr + r + 1, hr + len, T(0));
      }
      w.gemm(false, false, len, d.dk, len, T(1), ds.data(), len, w.k.data(),
             d.dk, T(0), dq.data(), d.dk);
      w.gemm(true, false, len, d.dk, len, T(1), ds.data(), len, w.q.data(),
             d.dk, T(0), dk.data(), d.dk);
      // Through Qe = Q exp(cum) and Kd = K exp(cum_last - cum).
      T last_total = d_last_decay * last_decay;
      for (int64_t j = 0; j < len; ++j) {
        const int64_t o = j * d.dk;
        const T sq = Dot(dqe.data() + o, w.q.data() + o, d.dk);
        const T sk = Dot(dkd.data() + o, w.k.data() + o, d.dk);
#pragma omp simd
        for (int64_t c = 0; c < d.dk; ++c) {
          dq[o + c] += dqe[o + c] * w.e[j];
          dk[o + c] += dkd[o + c] * w.f[j];
        }
        const T hk = sk * w.f[j];
        dcum[j] += sq * w.e[j] - hk;
        last_total += hk;
      }
      dcum[len - 1] += last_total;
      // cum = cumsum(g) within the chunk: dg_j = sum_{r >= j} dcum_r.
      T* dg = grads.g + bh * d.t + t0;
      T acc = 0;
      for (int64_t j = len - 1; j >= 0; --j) dg[j] = acc += dcum[j];
      const int64_t row0 = bh * d.t + t0;
      std::copy_n(dq.begin(), len * d.dk, grads.q + row0 * d.dk);
      std::copy_n(dk.begin(), len * d.dk, grads.k + row0 * d.dk);
      std::copy_n(dv.begin(), len * d.dv, grads.v + row0 * d.dv);
    }
  }
}

class FusedScalarGlaFunction
    : public torch::autograd::Function<FusedScalarGlaFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx,
                               const torch::Tensor& q_arg,
                               const torch::Tensor& k_arg,
                               const torch::Tensor& v_arg,
                               const torch::Tensor& g_arg, double scale,
                               int64_t chunk, bool bf16_products) {
    RECORD_FUNCTION("hlab::FusedScalarGlaFunction::forward",
                    std::vector<c10::IValue>());
    const torch::Tensor q = RowsReadable(q_arg), k = RowsReadable(k_arg),
                        v = RowsReadable(v_arg);
    const torch::ScalarType dtype = KernelComputeDtype({q, k, v, g_arg});
    const torch::Tensor g = g_arg.to(dtype).contiguous();  // (1 or B, H, T)
    const Dims d = DimsOf(q, v, g, chunk, bf16_products);
    torch::Tensor out = at::empty({d.b, d.t, d.h, d.dv}, v.options());
    torch::Tensor states =
        at::empty({d.b * d.h, d.n, d.dk, d.dv}, v.options().dtype(dtype));
    AT_DISPATCH_FLOATING_TYPES(dtype, "FusedScalarGla", [&] {
      const Rows qr = RowsOf(q, d.h), kr = RowsOf(k, d.h), vr = RowsOf(v, d.h);
      ForEachBatchHead(d.b * d.h, [&](int64_t bh0, int64_t bh1) {
        ForwardRange<scalar_t>(d, scale, qr, kr, vr, g.data_ptr<scalar_t>(),
                               out, states.data_ptr<scalar_t>(), bh0, bh1);
      });
    });
    ctx->save_for_backward({q, k, v, g, states});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["bf16_products"] = d.bf16_products;
    ctx->saved_data["g_dtype"] = static_cast<int64_t>(g_arg.scalar_type());
    return out.transpose(1, 2);
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grad_outputs) {
    const std::vector<torch::Tensor> saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2],
                        &g = saved[3], &states = saved[4];
    if (!grad_outputs[0].defined()) {
      return torch::autograd::variable_list(7);
    }
    const torch::Tensor dout = RowsReadable(grad_outputs[0]);
    const double scale = ctx->saved_data["scale"].toDouble();
    const Dims d = DimsOf(q, v, g, ctx->saved_data["chunk"].toInt(),
                          ctx->saved_data["bf16_products"].toBool());
    const auto options = states.options();
    torch::Tensor dq = at::empty({d.b, d.h, d.t, d.dk}, options);
    torch::Tensor dk = at::empty({d.b, d.h, d.t, d.dk}, options);
    torch::Tensor dv = at::empty({d.b, d.h, d.t, d.dv}, options);
    torch::Tensor dg = at::empty({d.b, d.h, d.t}, options);
    AT_DISPATCH_FLOATING_TYPES(states.scalar_type(), "FusedScalarGlaBack", [&] {
      const Rows qr = RowsOf(q, d.h), kr = RowsOf(k, d.h), vr = RowsOf(v, d.h),
                 dr = RowsOf(dout, d.h);
      const Grads<scalar_t> grads{
          dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(),
          dv.data_ptr<scalar_t>(), dg.data_ptr<scalar_t>()};
      ForEachBatchHead(d.b * d.h, [&](int64_t bh0, int64_t bh1) {
        BackwardRange<scalar_t>(d, scale, qr, kr, vr, dr,
                                g.data_ptr<scalar_t>(),
                                states.data_ptr<scalar_t>(), grads, bh0, bh1);
      });
    });
    // Inputs with fewer heads (or a shared batch) get the sums over the
    // heads (batch) they served.
    const auto per_input_heads = [&](const torch::Tensor& grad, int64_t heads) {
      if (heads == d.h) return grad;
      return grad.view({d.b, heads, d.h / heads, d.t, grad.size(3)}).sum(2);
    };
    dq = per_input_heads(dq, q.size(1));
    dk = per_input_heads(dk, k.size(1));
    dv = per_input_heads(dv, v.size(1));
    if (d.gb == 1 && d.b > 1) dg = dg.sum(0, /*keepdim=*/true);
    const auto g_dtype =
        static_cast<torch::ScalarType>(ctx->saved_data["g_dtype"].toInt());
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()),
            dv.to(v.scalar_type()), dg.to(g_dtype),
            torch::Tensor(),        torch::Tensor(),
            torch::Tensor()};
  }

 private:
  static Dims DimsOf(const torch::Tensor& q, const torch::Tensor& v,
                     const torch::Tensor& g, int64_t chunk,
                     bool bf16_products) {
    Dims d;
    d.bf16_products = bf16_products;
    d.b = v.size(0);
    d.h = g.size(1);
    d.t = v.size(2);
    d.dk = q.size(3);
    d.dv = v.size(3);
    d.c = chunk;
    d.n = (d.t + chunk - 1) / chunk;
    d.gb = g.size(0);
    return d;
  }
};

}  // namespace

bool FusedScalarGlaServes(const torch::Tensor& q, const torch::Tensor& k,
                          const torch::Tensor& v, const torch::Tensor& g) {
  return FusedKernelsTake({q, k, v, g});
}

torch::Tensor FusedChunkedScalarGla(const torch::Tensor& q,
                                    const torch::Tensor& k,
                                    const torch::Tensor& v,
                                    const torch::Tensor& g, double scale,
                                    int64_t chunk, bool bf16_products) {
  return FusedScalarGlaFunction::apply(q, k, v, g, scale, chunk, bf16_products);
}

}  // namespace hlab::model::internal
