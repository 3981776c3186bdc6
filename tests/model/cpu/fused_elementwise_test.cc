// Tests of the fused element-wise ops (model/cpu/fused_elementwise.h
// behind RmsNorm, AddRmsNorm, GatedRmsNorm, SwiGluProduct and ApplyRope):
// outputs and gradients against the plain LibTorch formulas in fp64, in fp64
// (1e-12), fp32 and bf16, with odd sizes, non-contiguous inputs, extreme gate
// values, and a weight gradient that does not depend on the thread count.
#include "model/cpu/fused_elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/cpu/blas.h"
#include "model/layers/feed_forward.h"
#include "model/layers/norm.h"
#include "model/layers/rope.h"
#include "tests/model/model_test_util.h"

namespace hlab::model {
namespace {

using torch::Tensor;

// The output and the gradients of fn's inputs for the upstream gradient
// `upstream` (loss = sum(fn(inputs) * upstream)).
struct Result {
  Tensor out;
  std::vector<Tensor> grads;
};
Result RunWithGrads(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                    const std::vector<Tensor>& inputs, const Tensor& upstream) {
  std::vector<Tensor> leaves;
  for (const Tensor& x : inputs) {
    leaves.push_back(x.detach().clone().requires_grad_(true));
  }
  const Tensor out = fn(leaves);
  (out.to(torch::kFloat64) * upstream).sum().backward();
  Result r{out.detach(), {}};
  for (const Tensor& x : leaves) r.grads.push_back(x.grad());
  return r;
}

// The gradient of input `index` from RunWithGrads on `threads` intra-op
// threads (the count restored after).
Tensor GradientOnThreads(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs, const Tensor& upstream, size_t index,
    int threads) {
  const int before = at::get_num_threads();
  at::set_num_threads(threads);
  Tensor grad = RunWithGrads(fn, inputs, upstream).grads[index];
  at::set_num_threads(before);
  return grad;
}

// Runs `fused` with inputs cast to dtype and `reference` in fp64 on the same
// (cast) values; expects outputs and every gradient within tol.
void ExpectMatches(
    const std::function<Tensor(const std::vector<Tensor>&)>& fused,
    const std::function<Tensor(const std::vector<Tensor>&)>& reference,
    const std::vector<Tensor>& inputs64, torch::ScalarType dtype, double tol,
    const std::string& what) {
  std::vector<Tensor> cast, back;
  for (const Tensor& x : inputs64) {
    cast.push_back(x.to(dtype));
    back.push_back(cast.back().to(torch::kFloat64));
  }
  const Tensor probe = fused(cast);
  ASSERT_EQ(probe.scalar_type(), dtype) << what;
  const Tensor upstream = torch::randn(probe.sizes(), torch::kFloat64);
  const Result got = RunWithGrads(fused, cast, upstream);
  const Result want = RunWithGrads(reference, back, upstream);
  EXPECT_LT(RelErr(got.out, want.out), tol) << what << ": output";
  for (size_t i = 0; i < got.grads.size(); ++i) {
    ASSERT_TRUE(got.grads[i].defined()) << what << ": grad " << i;
    EXPECT_EQ(got.grads[i].scalar_type(), cast[i].scalar_type());
    EXPECT_LT(RelErr(got.grads[i], want.grads[i]), tol)
        << what << ": gradient of input " << i;
  }
}

struct DtypeTol {
  torch::ScalarType dtype;
  double tol;
};
const std::vector<DtypeTol> kDtypes = {{torch::kFloat64, 1e-12},
                                       {torch::kFloat32, 2e-6},
                                       {torch::kBFloat16, 1e-2}};

// ------------------------------------------------------------------ RMSNorm

Tensor RmsNormFormula(const Tensor& x, const Tensor& w, double eps) {
  return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

TEST(FusedRmsNormTest, MatchesFormula) {
  torch::manual_seed(1);
  const double eps = 1e-6;
  for (const auto& [rows, d] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 5}, {3, 7}, {600, 64}, {1000, 33}}) {
    const Tensor x = torch::randn({rows, d}, torch::kFloat64) * 3;
    const Tensor w = torch::randn({d}, torch::kFloat64);
    for (const DtypeTol& dt : kDtypes) {
      ExpectMatches(
          [&](const std::vector<Tensor>& in) {
            return RmsNorm(in[0], in[1], eps);
          },
          [&](const std::vector<Tensor>& in) {
            return RmsNormFormula(in[0], in[1], eps);
          },
          {x, w}, dt.dtype, dt.tol,
          "rmsnorm " + std::to_string(rows) + "x" + std::to_string(d) + " " +
              std::string(c10::toString(dt.dtype)));
    }
  }
}

TEST(FusedRmsNormTest, TakesLeadingDimsAndNonContiguousInput) {
  torch::manual_seed(2);
  const Tensor x = torch::randn({2, 50, 3, 16}, torch::kFloat64);
  const Tensor xt = x.transpose(1, 2);  // (2, 3, 50, 16), not contiguous
  const Tensor w = torch::randn({16}, torch::kFloat64);
  ExpectMatches(
      [](const std::vector<Tensor>& in) {
        return RmsNorm(in[0].transpose(1, 2), in[1], 1e-5);
      },
      [](const std::vector<Tensor>& in) {
        return RmsNormFormula(in[0].transpose(1, 2), in[1], 1e-5);
      },
      {x, w}, torch::kFloat64, 1e-12, "transposed rmsnorm");
  EXPECT_EQ(RmsNorm(xt, w, 1e-5).sizes(), xt.sizes());
}

// Mamba-2's gated norm: RMSNorm(x * silu(gate)) * w, x and gate of the same
// dtype (fp64, fp32, bf16), with every input's gradient.
TEST(FusedRmsNormTest, GatedMatchesFormula) {
  torch::manual_seed(4);
  const Tensor x = torch::randn({2, 30, 24}, torch::kFloat64) * 2;
  const Tensor gate = torch::randn({2, 30, 24}, torch::kFloat64) * 3;
  const Tensor w = torch::randn({24}, torch::kFloat64);
  for (const DtypeTol& dt : kDtypes) {
    ExpectMatches(
        [](const std::vector<Tensor>& in) {
          return GatedRmsNorm(in[0], in[1], in[2], 1e-6);
        },
        [](const std::vector<Tensor>& in) {
          return RmsNormFormula(in[0] * torch::silu(in[1]), in[2], 1e-6);
        },
        {x, gate, w}, dt.dtype, dt.tol,
        "gated rmsnorm " + std::string(c10::toString(dt.dtype)));
  }
}

// GDN's order, RMSNorm(x) * w * silu(gate), and Lightning's, with
// sigmoid(gate), over more rows than one block of the weight gradient's
// fixed-order sum.
TEST(FusedRmsNormTest, NormThenGateMatchesFormula) {
  torch::manual_seed(7);
  const Tensor x = torch::randn({2, 300, 24}, torch::kFloat64) * 2;
  const Tensor gate = torch::randn({2, 300, 24}, torch::kFloat64) * 3;
  const Tensor w = torch::randn({24}, torch::kFloat64);
  for (const GateActivation act :
       {GateActivation::kSilu, GateActivation::kSigmoid}) {
    const auto activate = [act](const Tensor& z) {
      return act == GateActivation::kSilu ? torch::silu(z) : torch::sigmoid(z);
    };
    for (const DtypeTol& dt : kDtypes) {
      ExpectMatches(
          [act](const std::vector<Tensor>& in) {
            return GatedRmsNorm(in[0], in[1], in[2], 1e-6,
                                {.order = GatedNormOrder::kNormThenGate,
                                 .activation = act,
                                 .out_dtype = std::nullopt});
          },
          [&](const std::vector<Tensor>& in) {
            return RmsNormFormula(in[0], in[2], 1e-6) * activate(in[1]);
          },
          {x, gate, w}, dt.dtype, dt.tol,
          std::string(act == GateActivation::kSilu ? "silu" : "sigmoid") +
              " norm-then-gate " + std::string(c10::toString(dt.dtype)));
    }
  }
}

// The mixers under bf16 autocast: x fp32 with the gate fp32 (Mamba-2) or
// bf16 (GDN, Lightning), the result written in bf16, either activation; each
// gradient in its input's dtype, against the formula in fp64 on the same
// values.
TEST(FusedRmsNormTest, GatedTakesMixedDtypes) {
  torch::manual_seed(8);
  const Tensor x = torch::randn({3, 100, 32}, torch::kFloat64) * 2;
  const Tensor gate64 = torch::randn({3, 100, 32}, torch::kFloat64) * 3;
  const Tensor w = torch::randn({32}, torch::kFloat64);
  for (const GatedNormOrder order :
       {GatedNormOrder::kGateThenNorm, GatedNormOrder::kNormThenGate}) {
    for (const torch::ScalarType gate_dtype :
         {torch::kFloat32, torch::kBFloat16}) {
      for (const GateActivation act :
           {GateActivation::kSilu, GateActivation::kSigmoid}) {
        for (const torch::ScalarType out_dtype :
             {torch::kFloat32, torch::kBFloat16}) {
          const std::string what =
              std::string(order == GatedNormOrder::kNormThenGate
                              ? "norm first"
                              : "gate first") +
              " gate " + c10::toString(gate_dtype) + " out " +
              c10::toString(out_dtype) +
              (act == GateActivation::kSilu ? " silu" : " sigmoid");
          const std::vector<Tensor> in = {x.to(torch::kFloat32),
                                          gate64.to(gate_dtype),
                                          w.to(torch::kFloat32)};
          std::vector<Tensor> in64;
          for (const Tensor& t : in) in64.push_back(t.to(torch::kFloat64));
          const Tensor upstream = torch::randn(x.sizes(), torch::kFloat64);
          const Result got = RunWithGrads(
              [&](const std::vector<Tensor>& v) {
                return GatedRmsNorm(v[0], v[1], v[2], 1e-6,
                                    {.order = order,
                                     .activation = act,
                                     .out_dtype = out_dtype});
              },
              in, upstream);
          const Result want = RunWithGrads(
              [&](const std::vector<Tensor>& v) {
                const Tensor a = act == GateActivation::kSilu
                                     ? torch::silu(v[1])
                                     : torch::sigmoid(v[1]);
                return order == GatedNormOrder::kNormThenGate
                           ? RmsNormFormula(v[0], v[2], 1e-6) * a
                           : RmsNormFormula(v[0] * a, v[2], 1e-6);
              },
              in64, upstream);
          EXPECT_EQ(got.out.scalar_type(), out_dtype) << what;
          const bool any_bf16 =
              gate_dtype == torch::kBFloat16 || out_dtype == torch::kBFloat16;
          const double tol = any_bf16 ? 1e-2 : 2e-6;
          EXPECT_LT(RelErr(got.out, want.out), tol) << what << ": output";
          for (int i = 0; i < 3; ++i) {
            EXPECT_EQ(got.grads[i].scalar_type(), in[i].scalar_type()) << what;
            EXPECT_LT(RelErr(got.grads[i], want.grads[i]), tol)
                << what << ": gradient of input " << i;
          }
        }
      }
    }
  }
}

TEST(FusedRmsNormTest, WeightGradientDoesNotDependOnThreads) {
  torch::manual_seed(3);
  const Tensor x = torch::randn({1500, 40});
  const Tensor w = torch::randn({40});
  const Tensor upstream = torch::randn({1500, 40}, torch::kFloat64);
  const auto norm = [](const std::vector<Tensor>& in) {
    return RmsNorm(in[0], in[1], 1e-6);
  };
  EXPECT_TRUE(torch::equal(GradientOnThreads(norm, {x, w}, upstream, 1, 1),
                           GradientOnThreads(norm, {x, w}, upstream, 1, 3)));
}

TEST(FusedRmsNormTest, GatedWeightGradientDoesNotDependOnThreads) {
  torch::manual_seed(9);
  const Tensor x = torch::randn({1500, 40});
  const Tensor gate = torch::randn({1500, 40});
  const Tensor w = torch::randn({40});
  const Tensor upstream = torch::randn({1500, 40}, torch::kFloat64);
  for (const GatedNormOrder order :
       {GatedNormOrder::kGateThenNorm, GatedNormOrder::kNormThenGate}) {
    const auto norm = [&](const std::vector<Tensor>& in) {
      return GatedRmsNorm(in[0], in[1], in[2], 1e-6,
                          {.order = order, .out_dtype = std::nullopt});
    };
    EXPECT_TRUE(
        torch::equal(GradientOnThreads(norm, {x, gate, w}, upstream, 2, 1),
                     GradientOnThreads(norm, {x, gate, w}, upstream, 2, 3)));
  }
}

// The residual add with the norm after it (AddRmsNorm): both outputs and
// the gradients of x, delta and the weight, with an upstream gradient on
// the sum, the normed output or both, against the composition in fp64.
// Cases: all fp64 (1e-12); an fp32 sum with delta and the normed output in
// fp32 or bf16 (2e-6, or 1e-2 where a bf16 rounding enters: a bf16 output,
// and a bf16 input's own gradient).
struct AddNormCase {
  torch::ScalarType x, delta, out;
  double tol;
};

void ExpectAddRmsNormMatches(int64_t rows, int64_t d, const AddNormCase& c,
                             bool use_sum, bool use_normed) {
  const std::string what = std::to_string(rows) + "x" + std::to_string(d) +
                           " x " + c10::toString(c.x) + " delta " +
                           c10::toString(c.delta) + " out " +
                           c10::toString(c.out) + (use_sum ? " sum" : "") +
                           (use_normed ? " normed" : "");
  const Tensor x64 = torch::randn({rows, d}, torch::kFloat64) * 2;
  const Tensor delta64 = torch::randn({rows, d}, torch::kFloat64);
  const Tensor w64 = torch::randn({d}, torch::kFloat64);
  const Tensor up_sum = torch::randn({rows, d}, torch::kFloat64);
  const Tensor up_normed = torch::randn({rows, d}, torch::kFloat64);
  const double eps = 1e-6;
  // loss = sum(sum * up_sum) + sum(normed * up_normed), as chosen.
  const auto run = [&](const std::vector<Tensor>& inputs, bool fused) {
    std::vector<Tensor> leaves;
    for (const Tensor& t : inputs) {
      leaves.push_back(t.detach().clone().requires_grad_(true));
    }
    Tensor sum, normed;
    if (fused) {
      NormedSum r = AddRmsNorm(leaves[0], leaves[1], leaves[2], eps, c.out);
      sum = r.sum;
      normed = r.normed;
    } else {
      sum = leaves[0] + leaves[1];
      normed = RmsNormFormula(sum, leaves[2], eps);
    }
    Tensor loss = torch::zeros({}, torch::kFloat64);
    if (use_sum) loss = loss + (sum.to(torch::kFloat64) * up_sum).sum();
    if (use_normed) {
      loss = loss + (normed.to(torch::kFloat64) * up_normed).sum();
    }
    loss.backward();
    Result r{sum.detach(), {}};
    r.grads = {leaves[0].grad(), leaves[1].grad(), leaves[2].grad(),
               normed.detach()};
    return r;
  };
  const std::vector<Tensor> in = {x64.to(c.x), delta64.to(c.delta),
                                  w64.to(c.x)};
  std::vector<Tensor> in64;
  for (const Tensor& t : in) in64.push_back(t.to(torch::kFloat64));
  const Result got = run(in, /*fused=*/true);
  const Result want = run(in64, /*fused=*/false);
  EXPECT_EQ(got.out.scalar_type(), c.x) << what;
  EXPECT_EQ(got.grads[3].scalar_type(), c.out) << what;
  EXPECT_LT(RelErr(got.out, want.out), c.x == torch::kFloat64 ? 1e-14 : 1e-7)
      << what << ": sum";
  EXPECT_LT(RelErr(got.grads[3], want.grads[3]), c.tol) << what << ": normed";
  for (int i = 0; i < 3; ++i) {
    if (i == 2 && !use_normed) {
      // The weight only reaches the loss through the normed output.
      EXPECT_EQ(torch::count_nonzero(got.grads[2]).item<int64_t>(), 0) << what;
      continue;
    }
    ASSERT_TRUE(got.grads[i].defined()) << what << ": grad " << i;
    EXPECT_EQ(got.grads[i].scalar_type(), in[i].scalar_type()) << what;
    // A bf16 input's gradient is rounded to bf16.
    const double tol =
        in[i].scalar_type() == torch::kBFloat16 ? std::max(c.tol, 1e-2) : c.tol;
    EXPECT_LT(RelErr(got.grads[i], want.grads[i]), tol)
        << what << ": gradient of input " << i;
  }
}

TEST(FusedRmsNormTest, AddRmsNormMatchesTheComposition) {
  torch::manual_seed(11);
  const std::vector<AddNormCase> cases = {
      {torch::kFloat64, torch::kFloat64, torch::kFloat64, 1e-12},
      {torch::kFloat32, torch::kFloat32, torch::kFloat32, 2e-6},
      {torch::kFloat32, torch::kBFloat16, torch::kFloat32, 2e-6},
      {torch::kFloat32, torch::kFloat32, torch::kBFloat16, 1e-2},
      {torch::kFloat32, torch::kBFloat16, torch::kBFloat16, 1e-2}};
  for (const AddNormCase& c : cases) {
    // 600 rows span three of the weight gradient's blocks of rows.
    for (const auto& [rows, d] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {600, 64}, {7, 33}}) {
      ExpectAddRmsNormMatches(rows, d, c, /*use_sum=*/true,
                              /*use_normed=*/true);
    }
    ExpectAddRmsNormMatches(300, 16, c, /*use_sum=*/false, /*use_normed=*/true);
    ExpectAddRmsNormMatches(300, 16, c, /*use_sum=*/true, /*use_normed=*/false);
  }
}

TEST(FusedRmsNormTest, AddRmsNormTakesTheFusedNodeOnlyWhereItFits) {
  const Tensor x = torch::randn({2, 3, 8}).requires_grad_(true);
  const Tensor w = torch::ones({8}).requires_grad_(true);
  const NormedSum fused =
      AddRmsNorm(x, x.to(torch::kBFloat16), w, 1e-6, torch::kBFloat16);
  EXPECT_NE(fused.normed.grad_fn()->name().find("AddRmsNormFunction"),
            std::string::npos);
  EXPECT_EQ(fused.normed.scalar_type(), torch::kBFloat16);
  // A bf16 sum is not fused: the composition, with the same values.
  const Tensor xb = x.detach().to(torch::kBFloat16).requires_grad_(true);
  const NormedSum composed = AddRmsNorm(xb, xb, w, 1e-6);
  EXPECT_EQ(composed.normed.grad_fn()->name().find("AddRmsNormFunction"),
            std::string::npos);
  EXPECT_EQ(composed.sum.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(composed.normed, RmsNorm(xb + xb, w, 1e-6)));
}

// An fp32 input normed into bf16 (the norm before a linear under autocast):
// the fp32 norm rounded once; the gradient comes back in fp32.
TEST(FusedRmsNormTest, WritesTheRequestedDtype) {
  torch::manual_seed(12);
  const Tensor x = torch::randn({300, 48}).requires_grad_(true);
  const Tensor w = torch::randn({48}).requires_grad_(true);
  const Tensor y = RmsNorm(x, w, 1e-6, torch::kBFloat16);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y, RmsNorm(x, w, 1e-6).to(torch::kBFloat16)));
  const Tensor up = torch::randn({300, 48});
  (y.to(torch::kFloat32) * up).sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone();
  EXPECT_EQ(gx.scalar_type(), torch::kFloat32);
  x.mutable_grad().reset();
  w.mutable_grad().reset();
  // The reference: the fp32 norm's backward of the bf16-rounded upstream.
  (RmsNorm(x, w, 1e-6) * up.to(torch::kBFloat16).to(torch::kFloat32))
      .sum()
      .backward();
  EXPECT_LT(RelErr(gx, x.grad()), 1e-6);
  EXPECT_LT(RelErr(gw, w.grad()), 1e-6);
}

TEST(FusedRmsNormTest, AddRmsNormWeightGradientDoesNotDependOnThreads) {
  torch::manual_seed(13);
  const Tensor x = torch::randn({1500, 40});
  const Tensor delta = torch::randn({1500, 40}).to(torch::kBFloat16);
  const Tensor w = torch::randn({40});
  const Tensor upstream = torch::randn({1500, 40}, torch::kFloat64);
  const auto norm = [](const std::vector<Tensor>& in) {
    return AddRmsNorm(in[0], in[1], in[2], 1e-6).normed;
  };
  EXPECT_TRUE(
      torch::equal(GradientOnThreads(norm, {x, delta, w}, upstream, 2, 1),
                   GradientOnThreads(norm, {x, delta, w}, upstream, 2, 3)));
}

// ------------------------------------------------------------------- SwiGLU

TEST(FusedSwiGluTest, MatchesFormula) {
  torch::manual_seed(4);
  for (int64_t n : {1, 17, 100000}) {
    const Tensor a = torch::randn({n}, torch::kFloat64) * 4;
    const Tensor b = torch::randn({n}, torch::kFloat64);
    for (const DtypeTol& dt : kDtypes) {
      ExpectMatches(
          [](const std::vector<Tensor>& in) {
            return SwiGluProduct(in[0], in[1]);
          },
          [](const std::vector<Tensor>& in) {
            return torch::silu(in[0]) * in[1];
          },
          {a, b}, dt.dtype, dt.tol,
          "swiglu n=" + std::to_string(n) + " " +
              std::string(c10::toString(dt.dtype)));
    }
  }
}

TEST(FusedSwiGluTest, ExtremeGatesStayFinite) {
  const Tensor a = torch::tensor({-1000.0, -100.0, -88.0, -87.0, -20.0, -1e-3,
                                  0.0, 1e-3, 20.0, 87.0, 100.0, 1000.0},
                                 torch::kFloat64);
  const Tensor b = torch::ones_like(a) * 0.5;
  // silu(-1000) * 0.5 underflows to -0 in either formula; compare per
  // element with an absolute floor.
  for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64}) {
    const Tensor upstream = torch::ones_like(a);
    const Result got = RunWithGrads(
        [](const std::vector<Tensor>& in) {
          return SwiGluProduct(in[0], in[1]);
        },
        {a.to(dtype), b.to(dtype)}, upstream);
    const Result want = RunWithGrads(
        [](const std::vector<Tensor>& in) {
          return torch::silu(in[0]) * in[1];
        },
        {a, b}, upstream);
    EXPECT_TRUE(torch::isfinite(got.out).all().item<bool>());
    EXPECT_TRUE(
        torch::allclose(got.out.to(torch::kFloat64), want.out, 1e-6, 1e-30));
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(torch::isfinite(got.grads[i]).all().item<bool>());
      EXPECT_TRUE(torch::allclose(got.grads[i].to(torch::kFloat64),
                                  want.grads[i], 1e-5, 1e-30))
          << "gradient " << i << ": " << got.grads[i] << " vs "
          << want.grads[i];
    }
  }
}

TEST(FusedSwiGluTest, ExtremeGatesStayFiniteInBf16) {
  const Tensor a = torch::tensor({-1000.0, -100.0, -88.0, -87.0, -20.0, -1e-3,
                                  0.0, 1e-3, 20.0, 87.0, 100.0, 1000.0},
                                 torch::kFloat64)
                       .to(torch::kBFloat16)
                       .to(torch::kFloat64);
  const Tensor b = torch::ones_like(a) * 0.5;
  const Tensor upstream = torch::ones_like(a);
  const Result got = RunWithGrads(
      [](const std::vector<Tensor>& in) { return SwiGluProduct(in[0], in[1]); },
      {a.to(torch::kBFloat16), b.to(torch::kBFloat16)}, upstream);
  const Result want = RunWithGrads(
      [](const std::vector<Tensor>& in) { return torch::silu(in[0]) * in[1]; },
      {a, b}, upstream);
  EXPECT_TRUE(
      torch::allclose(got.out.to(torch::kFloat64), want.out, 1e-2, 1e-30));
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(torch::allclose(got.grads[i].to(torch::kFloat64), want.grads[i],
                                1e-2, 1e-30))
        << "gradient " << i << ": " << got.grads[i] << " vs " << want.grads[i];
  }
}

// The float loops for CPUs without AVX-512 against the ones this CPU takes
// (the same where it has none), over every tail length of a 16-lane step.
TEST(FusedSwiGluTest, PortableLoopsMatchTheDispatchedOnes) {
  torch::manual_seed(6);
  for (int64_t n = 1; n <= 40; ++n) {
    const Tensor a = torch::randn({n}) * 6;
    const Tensor b = torch::randn({n});
    const Tensor g = torch::randn({n});
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    const float* gp = g.data_ptr<float>();
    std::vector<float> y0(n), y1(n), da0(n), da1(n), db0(n), db1(n);
    internal::SwiGluForwardPortable(ap, bp, n, y0.data());
    internal::SwiGluForward(ap, bp, n, y1.data());
    internal::SwiGluBackwardPortable(ap, bp, gp, n, da0.data(), db0.data());
    internal::SwiGluBackward(ap, bp, gp, n, da1.data(), db1.data());
    for (int64_t i = 0; i < n; ++i) {
      const auto near = [](float x, float y) {
        return std::fabs(x - y) <= 1e-6f * std::max(std::fabs(x), 1e-30f);
      };
      EXPECT_TRUE(near(y0[i], y1[i])) << n << " " << i;
      EXPECT_TRUE(near(da0[i], da1[i])) << n << " " << i;
      EXPECT_TRUE(near(db0[i], db1[i])) << n << " " << i;
    }
  }
}

TEST(FusedSwiGluTest, FeedForwardUsesIt) {
  torch::manual_seed(5);
  SwiGLU ffn(8, 12, 0.5, 0.5);
  const Tensor x = torch::randn({2, 5, 8});
  const Tensor want =
      ffn->down_proj(torch::silu(ffn->gate_proj(x)) * ffn->up_proj(x));
  EXPECT_LT(RelErr(ffn->forward(x), want), 1e-6);
}

// --------------------------------------------------------------------- RoPE

Tensor RopeFormula(const Tensor& x, double theta) {
  const int64_t t = x.size(2), d = x.size(3);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  const Tensor inv_freq = torch::pow(theta, -torch::arange(0, d, 2, f64) / d);
  const Tensor angles = torch::outer(torch::arange(t, f64), inv_freq);
  const Tensor emb = torch::cat({angles, angles}, -1);
  const std::vector<Tensor> halves = x.chunk(2, -1);
  return x * emb.cos() + torch::cat({-halves[1], halves[0]}, -1) * emb.sin();
}

TEST(FusedRopeTest, MatchesFormulaForProjectionViewsAndSplits) {
  torch::manual_seed(6);
  // (B, T, H, D) as a projection's view, transposed to (B, H, T, D); half
  // of D below, at and past one 16-lane step.
  for (const int64_t d : {10, 40, 64}) {
    for (const DtypeTol& dt : kDtypes) {
      const Tensor base = torch::randn({2, 37, 4, d}, torch::kFloat64);
      const std::string name =
          std::string(c10::toString(dt.dtype)) + " D=" + std::to_string(d);
      ExpectMatches(
          [](const std::vector<Tensor>& in) {
            return ApplyRope(in[0].transpose(1, 2), 500.0);
          },
          [](const std::vector<Tensor>& in) {
            return RopeFormula(in[0].transpose(1, 2), 500.0);
          },
          {base}, dt.dtype, dt.tol, "rope view " + name);
      // A split of the heads (as head-wise SWA makes): not dense.
      ExpectMatches(
          [](const std::vector<Tensor>& in) {
            return ApplyRope(in[0].transpose(1, 2).narrow(1, 1, 2), 500.0);
          },
          [](const std::vector<Tensor>& in) {
            return RopeFormula(in[0].transpose(1, 2).narrow(1, 1, 2), 500.0);
          },
          {base}, dt.dtype, dt.tol, "rope split " + name);
    }
  }
}

TEST(FusedRopeTest, KeepsTheMemoryOrderOfADenseInput) {
  const Tensor x = torch::randn({1, 9, 2, 6}).transpose(1, 2);  // (1,2,9,6)
  const Tensor y = ApplyRope(x, 1e4);
  EXPECT_EQ(y.strides(), x.strides());
  const Tensor c = torch::randn({1, 2, 9, 6});
  EXPECT_TRUE(ApplyRope(c, 1e4).is_contiguous());
}

// ------------------------------------------------------- bf16 conversions

// NarrowToBf16 (the AVX512-BF16 instruction where the CPU has it) and the
// portable loop round as LibTorch does: to nearest, ties to even, over
// random values, exact ties, the largest finite floats and infinities.
TEST(Bf16ConversionTest, NarrowRoundsAsLibTorchAndWidenIsExact) {
  std::vector<float> x;
  const Tensor r = torch::randn({4099}) * torch::exp(torch::randn({4099}) * 8);
  for (int64_t i = 0; i < r.numel(); ++i) x.push_back(r[i].item<float>());
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x7f7fffffu,
                     0xff7fffffu, 0x7f800000u, 0xff800000u, 0x00800000u}) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    x.push_back(f);
  }
  x.push_back(0.0f);
  x.push_back(-0.0f);
  const auto n = static_cast<int64_t>(x.size());
  const Tensor want = torch::from_blob(x.data(), {n}).to(torch::kBFloat16);
  std::vector<internal::Bf16> y(x.size()), portable(x.size());
  internal::NarrowToBf16(x.data(), y.data(), n);
  internal::NarrowToBf16Portable(x.data(), portable.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i].bits, want[i].item<at::BFloat16>().x)
        << "element " << i << " = " << x[i];
    ASSERT_EQ(portable[i].bits, want[i].item<at::BFloat16>().x)
        << "portable loop, element " << i << " = " << x[i];
  }
  std::vector<float> back(x.size());
  internal::WidenBf16(y.data(), back.data(), static_cast<int64_t>(x.size()));
  const Tensor want_back = want.to(torch::kFloat32);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(back[i], want_back[i].item<float>()) << "element " << i;
  }
  // NaN stays NaN.
  const float nan = std::nanf("");
  internal::Bf16 nan_bf16;
  internal::NarrowToBf16(&nan, &nan_bf16, 1);
  float nan_back;
  internal::WidenBf16(&nan_bf16, &nan_back, 1);
  EXPECT_TRUE(std::isnan(nan_back));
}

// The comparisons above test the fused loops only if the CPU takes them.
TEST(FusedElementwiseTest, CpuTensorsTakeTheFusedNodes) {
  for (torch::ScalarType dtype :
       {torch::kFloat32, torch::kFloat64, torch::kBFloat16}) {
    const auto opts = torch::TensorOptions().dtype(dtype);
    const Tensor x = torch::randn({2, 3, 4, 8}, opts).requires_grad_(true);
    const Tensor w = torch::ones({8}).requires_grad_(true);
    EXPECT_NE(RmsNorm(x, w, 1e-6).grad_fn()->name().find("RmsNormFunction"),
              std::string::npos);
    EXPECT_NE(SwiGluProduct(x, x).grad_fn()->name().find("SwiGluFunction"),
              std::string::npos);
    EXPECT_NE(ApplyRope(x, 1e4).grad_fn()->name().find("RopeFunction"),
              std::string::npos);
    EXPECT_NE(GatedRmsNorm(x, x, w, 1e-6)
                  .grad_fn()
                  ->name()
                  .find("GatedRmsNormFunction"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace hlab::model
