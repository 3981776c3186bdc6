// Tests of model/layers/linear.h: LinearProduct's split GEMMs against
// at::linear (fp64 to 1e-12, fp32 to 4e-6, as dw sums up to 8400 products;
// outputs and both gradients), results that do not depend on the thread count
// in fp32 and under bf16 autocast, and the fallbacks (autocast, bias).
#include "model/layers/linear.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/config/model_config.h"
#include "model/cpu/blas.h"
#include "tests/model/model_test_util.h"

namespace hlab::model {
namespace {

using torch::Tensor;

struct Result {
  Tensor y, dx, dw;
};

Result Product(bool ours, const Tensor& x0, const Tensor& w0,
               const Tensor& upstream) {
  const Tensor x = x0.detach().clone().requires_grad_(true);
  const Tensor w = w0.detach().clone().requires_grad_(true);
  const Tensor y = ours ? LinearProduct(x, w) : at::linear(x, w);
  (y * upstream).sum().backward();
  return {y.detach(), x.grad(), w.grad()};
}

TEST(LinearTest, MatchesAtLinear) {
  torch::manual_seed(1);
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  for (const auto& shape : std::vector<std::vector<int64_t>>{
           {1, 3}, {5, 7}, {2, 301, 64}, {1, 1000, 48}, {3, 2800, 40}}) {
    const int64_t in = shape.back();
    for (int64_t out : {1, 9, 130}) {
      for (const auto& [dtype, tol] :
           std::vector<std::pair<torch::ScalarType, double>>{
               {torch::kFloat64, 1e-12}, {torch::kFloat32, 4e-6}}) {
        const auto opts = torch::TensorOptions().dtype(dtype);
        const Tensor x = torch::randn(shape, opts);
        const Tensor w = torch::randn({out, in}, opts);
        std::vector<int64_t> out_shape = shape;
        out_shape.back() = out;
        const Tensor upstream = torch::randn(out_shape, opts);
        const Result got = Product(true, x, w, upstream);
        const Result want = Product(false, x, w, upstream);
        const std::string what = "x " + std::to_string(x.numel()) + " out " +
                                 std::to_string(out) + " " +
                                 std::string(c10::toString(dtype));
        EXPECT_EQ(got.y.sizes(), want.y.sizes()) << what;
        EXPECT_LT(RelErr(got.y, want.y), tol) << what;
        EXPECT_LT(RelErr(got.dx, want.dx), tol) << what;
        EXPECT_LT(RelErr(got.dw, want.dw), tol) << what;
      }
    }
  }
  at::set_num_threads(threads);
}

// Runs product(x, w, upstream) on 1-4 threads for each (m, in, out) shape
// and expects y, dx and dw to be the same bits on every thread count.
template <typename Fn>
void ExpectTheSameOnAnyThreadCount(
    const std::vector<std::array<int64_t, 3>>& shapes, const Fn& product) {
  const int threads = at::get_num_threads();
  for (const auto& [m, in, out] : shapes) {
    const Tensor x = torch::randn({1, m, in});
    const Tensor w = torch::randn({out, in});
    const Tensor upstream = torch::randn({1, m, out});
    std::vector<Result> results;
    for (int n : {1, 2, 3, 4}) {
      at::set_num_threads(n);
      results.push_back(product(x, w, upstream));
    }
    at::set_num_threads(threads);
    const std::string what = std::to_string(m) + " x " + std::to_string(in) +
                             " -> " + std::to_string(out) + ", threads ";
    for (size_t i = 1; i < results.size(); ++i) {
      EXPECT_TRUE(torch::equal(results[i].y, results[0].y)) << what << i + 1;
      EXPECT_TRUE(torch::equal(results[i].dx, results[0].dx)) << what << i + 1;
      EXPECT_TRUE(torch::equal(results[i].dw, results[0].dw)) << what << i + 1;
    }
  }
}

// Bitwise, in fp32, over shapes where a split by thread would give calls of
// few rows: the BLAS picks its kernel, and so its order of summation, by
// the shape of the call (model/layers/linear.cc, ForEachBlock).
TEST(LinearTest, ResultsDoNotDependOnTheThreadCount) {
  torch::manual_seed(2);
  ExpectTheSameOnAnyThreadCount(
      {{999, 96, 200},
       {70, 512, 300},
       {130, 256, 24},
       {2000, 512, 40},
       {4100, 64, 640},
       {300, 32, 16},
       {9000, 24, 40}},
      [](const Tensor& x, const Tensor& w, const Tensor& upstream) {
        return Product(true, x, w, upstream);
      });
}

// The fp32 forward product, bit for bit as main made it in 64-row blocks
// (one call where that gives the same bits: model/layers/linear.cc,
// ForwardBlockRows), over the demo's products at d_model 24-72 (q/k/v, o,
// the FFN, the vocabulary; GDN's concatenated inputs) for 64-512 rows, and
// row counts that are not whole 64-row blocks.
TEST(LinearTest, ForwardKeepsTheBitsOfSixtyFourRowBlocks) {
  torch::manual_seed(3);
  for (int64_t d : {24, 32, 48, 72}) {
    const int64_t ffn = DefaultFfnHidden(d);
    const std::vector<std::array<int64_t, 2>> products = {
        {d, 2 * d}, {d, d},     {d, ffn},      {ffn, d},
        {d, 258},   {d, d / 2}, {d, 2 * d + 8}};
    for (int64_t m : {64, 100, 128, 256, 300, 448, 512}) {
      for (const auto& [in, out] : products) {
        const Tensor x = torch::randn({m, in});
        const Tensor w = torch::randn({out, in});
        const Tensor y = LinearProduct(x, w);
        Tensor want = torch::empty({m, out});
        for (int64_t r0 = 0; r0 < m; r0 += 64) {
          internal::Gemm(false, true, std::min<int64_t>(64, m - r0), out, in,
                         1.0f, x.data_ptr<float>() + r0 * in, in,
                         w.data_ptr<float>(), in, 0.0f,
                         want.data_ptr<float>() + r0 * out, out);
        }
        EXPECT_TRUE(torch::equal(y, want)) << m << " x " << in << " -> " << out;
      }
    }
  }
}

TEST(LinearTest, ModuleKeepsTorchNamesAndTakesTheSplitPath) {
  Linear layer(LinearOptions(8, 4).bias(false));
  const auto params = layer->named_parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params.begin()->key(), "weight");
  const Tensor x = torch::randn({2, 3, 8}, torch::requires_grad());
  const Tensor y = layer->forward(x);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 4}));
  // y is the product's own output: one node, no views around it.
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_NE(y.grad_fn()->name().find("LinearFunction"), std::string::npos)
      << y.grad_fn()->name();
  // x is a leaf: the product's first edge is x's AccumulateGrad, not a view.
  const auto input = y.grad_fn()->next_edges().at(0).function;
  ASSERT_NE(input, nullptr);
  EXPECT_NE(input->name().find("AccumulateGrad"), std::string::npos)
      << input->name();
}

TEST(LinearTest, BiasTakesAtLinear) {
  Linear biased(LinearOptions(8, 4));
  const Tensor x = torch::randn({5, 8});
  EXPECT_LT(
      RelErr(biased->forward(x), at::linear(x, biased->weight, biased->bias)),
      1e-6);
}

// One product over concatenated weights gives each layer's output and the
// same gradients as separate layers (whose dx sum), with and without bias.
TEST(LinearTest, ConcatenatedLinearMatchesSeparateLayers) {
  torch::manual_seed(4);
  for (bool bias : {false, true}) {
    std::vector<Linear> layers;
    for (int64_t out : {16, 8, 3}) {
      layers.push_back(Linear(LinearOptions(12, out).bias(bias)));
    }
    const Tensor x0 = torch::randn({2, 33, 12});
    const Tensor upstream = torch::randn({2, 33, 27});
    auto run = [&](bool concatenated) {
      for (Linear& l : layers) l->zero_grad();
      const Tensor x = x0.clone().requires_grad_(true);
      Tensor y;
      if (concatenated) {
        y = ConcatenatedLinear(x, layers);
      } else {
        std::vector<Tensor> outs;
        for (Linear& l : layers) outs.push_back(l->forward(x));
        y = torch::cat(outs, -1);
      }
      (y * upstream).sum().backward();
      std::vector<Tensor> got = {y.detach(), x.grad()};
      for (Linear& l : layers) got.push_back(l->weight.grad().clone());
      return got;
    };
    const std::vector<Tensor> want = run(false), got = run(true);
    EXPECT_EQ(got[0].sizes(), want[0].sizes());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_LT(RelErr(got[i], want[i]), 1e-6)
          << (bias ? "bias, " : "") << "tensor " << i;
    }
  }
}

// Under bf16 autocast: a bf16 output like autocast's linear, within bf16
// rounding of the fp64 product, and gradients in the inputs' dtypes (dw in
// fp32 from the fp32 accumulator).
TEST(LinearTest, Bf16AutocastMatchesTheProductWithinBf16Rounding) {
  torch::manual_seed(3);
  const Tensor x0 = torch::randn({2, 150, 64});
  const Tensor w0 = torch::randn({48, 64}) * 0.1;
  const Tensor upstream = torch::randn({2, 150, 48});
  const Tensor x = x0.clone().requires_grad_(true);
  const Tensor w = w0.clone().requires_grad_(true);
  hlab::model::SetAutocastEnabled(torch::kCPU, true);
  const Tensor y = LinearProduct(x, w);
  const Tensor want_y = at::linear(x0, w0);  // autocast's own
  hlab::model::SetAutocastEnabled(torch::kCPU, false);
  at::autocast::clear_cache();
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(want_y.scalar_type(), torch::kBFloat16);
  const auto product = y.grad_fn()->next_edges().at(0).function;
  ASSERT_NE(product, nullptr);
  EXPECT_NE(product->name().find("LinearBf16Function"), std::string::npos)
      << product->name();
  (y.to(torch::kFloat32) * upstream).sum().backward();
  EXPECT_EQ(x.grad().scalar_type(), torch::kFloat32);
  EXPECT_EQ(w.grad().scalar_type(), torch::kFloat32);

  const Result exact =
      Product(false, x0.to(torch::kFloat64), w0.to(torch::kFloat64),
              upstream.to(torch::kFloat64));
  EXPECT_LT(RelErr(y, exact.y), 1e-2);
  EXPECT_LT(RelErr(y, want_y), 1e-2);
  EXPECT_LT(RelErr(x.grad(), exact.dx), 2e-2);
  EXPECT_LT(RelErr(w.grad(), exact.dw), 2e-2);
}

// Under bf16 autocast too, bitwise, y, dx and dw on 1-4 threads.
TEST(LinearTest, Bf16AutocastResultsDoNotDependOnTheThreadCount) {
  torch::manual_seed(4);
  ExpectTheSameOnAnyThreadCount(
      {{999, 96, 200},
       {70, 512, 300},
       {4100, 64, 640},
       {2000, 512, 40},
       {20000, 16, 8}},
      [](const Tensor& x0, const Tensor& w0, const Tensor& upstream) {
        const Tensor x = x0.clone().requires_grad_(true);
        const Tensor w = w0.clone().requires_grad_(true);
        hlab::model::SetAutocastEnabled(torch::kCPU, true);
        const Tensor y = LinearProduct(x, w);
        hlab::model::SetAutocastEnabled(torch::kCPU, false);
        at::autocast::clear_cache();
        (y.to(torch::kFloat32) * upstream).sum().backward();
        return Result{y.detach(), x.grad(), w.grad()};
      });
}

// The dtype a producer writes for a linear: bf16 under CPU bf16 autocast
// for fp32 or bf16, else the dtype itself; a bf16 input gives the same
// product as the fp32 one rounded.
TEST(LinearTest, InputDtypeFollowsAutocast) {
  EXPECT_EQ(LinearInputDtype(torch::kFloat32), torch::kFloat32);
  EXPECT_EQ(LinearInputDtype(torch::kFloat64), torch::kFloat64);
  hlab::model::SetAutocastEnabled(torch::kCPU, true);
  EXPECT_EQ(LinearInputDtype(torch::kFloat32), torch::kBFloat16);
  EXPECT_EQ(LinearInputDtype(torch::kBFloat16), torch::kBFloat16);
  EXPECT_EQ(LinearInputDtype(torch::kFloat64), torch::kFloat64);
  torch::manual_seed(4);
  const Tensor x = torch::randn({40, 32});
  const Tensor w = torch::randn({24, 32});
  const Tensor from_fp32 = LinearProduct(x, w);
  const Tensor from_bf16 = LinearProduct(x.to(torch::kBFloat16), w);
  hlab::model::SetAutocastEnabled(torch::kCPU, false);
  at::autocast::clear_cache();
  EXPECT_TRUE(torch::equal(from_fp32, from_bf16));
}

}  // namespace
}  // namespace hlab::model
