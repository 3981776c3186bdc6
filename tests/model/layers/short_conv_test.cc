// ShortConv: the causal depthwise convolution against the explicit sum.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

TEST(ShortConvTest, MatchesExplicitCausalSum) {
  torch::manual_seed(10);
  ShortConv conv(6, 3, /*bias=*/true);
  conv->to(torch::kFloat64);
  const torch::Tensor x = torch::randn({2, 9, 6}, torch::kFloat64);
  const torch::Tensor y = conv->forward(x).detach();
  ASSERT_EQ(y.sizes(), x.sizes());
  const torch::Tensor w = conv->weight.detach().squeeze(1);  // (C, K)
  for (int64_t t = 0; t < 9; ++t) {
    torch::Tensor expected = conv->bias.detach().clone().expand({2, 6});
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t src = t - 2 + j;
      if (src >= 0) expected = expected + w.select(1, j) * x.select(1, src);
    }
    EXPECT_LT(MaxRelError(y.select(1, t), expected), 1e-14) << "t=" << t;
  }
}

}  // namespace
}  // namespace hlab::model
