#include "model/kernels/recurrent_scan.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

namespace hlab::model {
namespace {

// fp64 when any defined input is fp64, else fp32.
torch::ScalarType ComputeDtype(std::initializer_list<torch::Tensor> inputs) {
  for (const torch::Tensor& t : inputs) {
    if (t.defined() && t.scalar_type() == torch::kFloat64) {
      return torch::kFloat64;
    }
  }
  return torch::kFloat32;
}

torch::Tensor Prepared(const torch::Tensor& t, torch::ScalarType dtype) {
  return t.defined() ? t.to(dtype).contiguous() : t;
}

// Heads H, input heads of each tensor and the sizes every scan shares.
struct ScanShape {
  int64_t batch = 0, heads = 0, steps = 0, dk = 0, dv = 0;
  int64_t q_heads = 0, k_heads = 0, v_heads = 0;
  bool g_batched = true;  // g: (B, H, T), else (1, H, T)
};

// The state to continue from: *state, or zeros.
torch::Tensor StartState(const ScanShape& s, torch::ScalarType dtype,
                         const torch::Device& device, torch::Tensor* state) {
  if (state->defined()) {
    TORCH_CHECK(state->dim() == 4 && state->size(0) == s.batch &&
                    state->size(1) == s.heads && state->size(2) == s.dk &&
                    state->size(3) == s.dv,
                "recurrent scan: state must be (", s.batch, ", ", s.heads, ", ",
                s.dk, ", ", s.dv, "), got ", state->sizes());
    return state->to(dtype).contiguous().clone();
  }
  return torch::zeros({s.batch, s.heads, s.dk, s.dv},
                      torch::TensorOptions().dtype(dtype).device(device));
}

// The loops of both recurrences over raw memory; `beta` null for scalar
// GLA, `q` null when no output is wanted. All arrays contiguous.
template <typename T>
void ScanLoop(const ScanShape& s, const T* q, const T* k, const T* v,
              const T* g, const T* beta, T scale, T* state, T* out) {
  const int64_t h = s.heads, steps = s.steps, dk = s.dk, dv = s.dv;
  at::parallel_for(0, s.batch * h, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> u(static_cast<size_t>(dv));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / h, head = bh % h;
      T* st = state + bh * dk * dv;
      const auto row = [&](const T* base, int64_t heads, int64_t t,
                           int64_t width) {
        return base + ((b * heads + head / (h / heads)) * steps + t) * width;
      };
      const T* gh = g + ((s.g_batched ? b : 0) * h + head) * steps;
      for (int64_t t = 0; t < steps; ++t) {
        const T decay = std::exp(gh[t]);
        const T* kt = row(k, s.k_heads, t, dk);
        const T* vt = row(v, s.v_heads, t, dv);
        if (beta == nullptr) {
          for (int64_t i = 0; i < dk; ++i) {
            for (int64_t j = 0; j < dv; ++j) {
              st[i * dv + j] = decay * st[i * dv + j] + kt[i] * vt[j];
            }
          }
        } else {
          const T bt = beta[bh * steps + t];
          for (int64_t e = 0; e < dk * dv; ++e) st[e] *= decay;
          for (int64_t j = 0; j < dv; ++j) u[j] = 0;
          for (int64_t i = 0; i < dk; ++i) {
            for (int64_t j = 0; j < dv; ++j) u[j] += kt[i] * st[i * dv + j];
          }
          for (int64_t j = 0; j < dv; ++j) u[j] = bt * (vt[j] - u[j]);
          for (int64_t i = 0; i < dk; ++i) {
            for (int64_t j = 0; j < dv; ++j) st[i * dv + j] += kt[i] * u[j];
          }
        }
        if (q == nullptr) continue;
        const T* qt = row(q, s.q_heads, t, dk);
        T* ot = out + (bh * steps + t) * dv;
        for (int64_t j = 0; j < dv; ++j) ot[j] = 0;
        for (int64_t i = 0; i < dk; ++i) {
          const T a = scale * qt[i];
          for (int64_t j = 0; j < dv; ++j) ot[j] += a * st[i * dv + j];
        }
      }
    }
  });
}

// The same with ATen ops per step (devices other than the CPU).
void ScanWithAten(const ScanShape& s, const torch::Tensor& q,
                  const torch::Tensor& k, const torch::Tensor& v,
                  const torch::Tensor& g, const torch::Tensor& beta,
                  double scale, torch::Tensor& state, torch::Tensor& out) {
  const auto widen = [&](const torch::Tensor& x, int64_t heads) {
    return heads == s.heads ? x : x.repeat_interleave(s.heads / heads, 1);
  };
  const torch::Tensor kw = widen(k, s.k_heads), vw = widen(v, s.v_heads);
  const torch::Tensor qw = q.defined() ? widen(q, s.q_heads) : q;
  const torch::Tensor gw = g.expand({s.batch, s.heads, s.steps});
  for (int64_t t = 0; t < s.steps; ++t) {
    const torch::Tensor kt = kw.select(2, t), vt = vw.select(2, t);
    state = state * gw.select(2, t).exp().view({s.batch, s.heads, 1, 1});
    if (beta.defined()) {
      const torch::Tensor ks = torch::matmul(kt.unsqueeze(-2), state);
      const torch::Tensor ut =
          beta.select(2, t).unsqueeze(-1) * (vt - ks.squeeze(-2));
      state = state + kt.unsqueeze(-1) * ut.unsqueeze(-2);
    } else {
      state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2);
    }
    if (qw.defined()) {
      out.select(2, t).copy_(
          torch::matmul((scale * qw.select(2, t)).unsqueeze(-2), state)
              .squeeze(-2));
    }
  }
}

torch::Tensor Scan(const torch::Tensor& q_in, const torch::Tensor& k_in,
                   const torch::Tensor& v_in, const torch::Tensor& g_in,
                   const torch::Tensor& beta_in, double scale,
                   torch::Tensor* state) {
  TORCH_CHECK(state != nullptr, "recurrent scan: no state");
  TORCH_CHECK(k_in.dim() == 4 && v_in.dim() == 4 && g_in.dim() == 3,
              "recurrent scan: k, v must be (B, H, T, d) and g (B, H, T)");
  torch::NoGradGuard no_grad;
  const torch::ScalarType dtype =
      ComputeDtype({q_in, k_in, v_in, g_in, beta_in});
  const torch::Tensor q = Prepared(q_in, dtype), k = Prepared(k_in, dtype),
                      v = Prepared(v_in, dtype), g = Prepared(g_in, dtype),
                      beta = Prepared(beta_in, dtype);
  ScanShape s;
  s.batch = v.size(0);
  s.heads = g.size(1);
  s.steps = v.size(2);
  s.dk = k.size(3);
  s.dv = v.size(3);
  s.q_heads = q.defined() ? q.size(1) : s.heads;
  s.k_heads = k.size(1);
  s.v_heads = v.size(1);
  s.g_batched = g.size(0) == s.batch;
  for (int64_t heads : {s.q_heads, s.k_heads, s.v_heads}) {
    TORCH_CHECK(heads > 0 && s.heads % heads == 0,
                "recurrent scan: input heads must divide ", s.heads);
  }
  TORCH_CHECK(s.g_batched || g.size(0) == 1, "recurrent scan: g's batch");
  torch::Tensor st = StartState(s, dtype, v.device(), state);
  torch::Tensor out =
      q.defined() ? torch::empty({s.batch, s.heads, s.steps, s.dv}, v.options())
                  : torch::Tensor();
  if (v.device().is_cpu()) {
    AT_DISPATCH_FLOATING_TYPES(dtype, "recurrent_scan", [&] {
      ScanLoop<scalar_t>(s, q.defined() ? q.data_ptr<scalar_t>() : nullptr,
                         k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                         g.data_ptr<scalar_t>(),
                         beta.defined() ? beta.data_ptr<scalar_t>() : nullptr,
                         static_cast<scalar_t>(scale), st.data_ptr<scalar_t>(),
                         out.defined() ? out.data_ptr<scalar_t>() : nullptr);
    });
  } else {
    ScanWithAten(s, q, k, v, g, beta, scale, st, out);
  }
  *state = st;
  return out.defined() ? out.to(v_in.scalar_type()) : out;
}

}  // namespace

torch::Tensor ScalarGlaScan(const torch::Tensor& q, const torch::Tensor& k,
                            const torch::Tensor& v, const torch::Tensor& g,
                            double scale, torch::Tensor* state) {
  return Scan(q, k, v, g, torch::Tensor(), scale, state);
}

torch::Tensor GatedDeltaScan(const torch::Tensor& q, const torch::Tensor& k,
                             const torch::Tensor& v, const torch::Tensor& g,
                             const torch::Tensor& beta, double scale,
                             torch::Tensor* state) {
  TORCH_CHECK(beta.defined() && beta.dim() == 3,
              "GatedDeltaScan: beta must be (B, H, T)");
  TORCH_CHECK(k.size(1) == g.size(1) && v.size(1) == g.size(1),
              "GatedDeltaScan: k, v and g must have the same heads");
  return Scan(q, k, v, g, beta, scale, state);
}

}  // namespace hlab::model
