// Every recurrent mixer module (Lightning, Mamba-2, Gated DeltaNet, with
// and without the short conv): parameter counts against the layout, the
// chunked forward against the reference in fp64 with gradients and in fp32,
// causality.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "tests/model/recurrent_test_util.h"

namespace hlab::model {
namespace {

struct ModuleCase {
  std::string name;
  MixerSpec spec;
};

void PrintTo(const ModuleCase& c, std::ostream* os) { *os << c.name; }

std::vector<ModuleCase> ModuleCases() {
  std::vector<ModuleCase> cases;
  MixerSpec lightning;
  lightning.kind = MixerKind::kLightning;
  lightning.chunk = 16;
  cases.push_back({"lightning", lightning});

  MixerSpec mamba2;
  mamba2.kind = MixerKind::kMamba2;
  mamba2.ssm_state = 4;
  mamba2.ssm_head_dim = 8;
  mamba2.chunk = 16;
  cases.push_back({"mamba2", mamba2});
  mamba2.short_conv = true;
  mamba2.conv_size = 3;
  cases.push_back({"mamba2_conv", mamba2});

  // Grouped (the default: q, k with 2 heads for 4 value heads here) and
  // mha (q, k with a head per value head).
  MixerSpec gdn;
  gdn.kind = MixerKind::kGatedDeltaNet;
  gdn.chunk = 16;
  cases.push_back({"gdn", gdn});
  gdn.short_conv = true;
  cases.push_back({"gdn_conv", gdn});
  gdn.short_conv = false;
  gdn.gdn_heads = 2;
  gdn.gdn_head_dim = 12;
  cases.push_back({"gdn_2heads_dim12", gdn});
  MixerSpec mha;
  mha.kind = MixerKind::kGatedDeltaNet;
  mha.chunk = 16;
  mha.gdn_mha = true;
  cases.push_back({"gdn_mha", mha});
  mha.short_conv = true;
  cases.push_back({"gdn_mha_conv", mha});
  return cases;
}

std::shared_ptr<Mixer> Build(const ModelConfig& config, const MixerSpec& spec) {
  switch (spec.kind) {
    case MixerKind::kLightning:
      return std::make_shared<Lightning>(config, spec, /*layer_index=*/0);
    case MixerKind::kMamba2:
      return std::make_shared<Mamba2>(config, spec);
    case MixerKind::kGatedDeltaNet:
      return std::make_shared<GatedDeltaNet>(config, spec);
    default:
      return nullptr;
  }
}

// The parameter layout of model/config/param_count.h, written out here.
int64_t LayoutParameterCount(const ModelConfig& c, const MixerSpec& s) {
  const int64_t d = c.d_model;
  switch (s.kind) {
    case MixerKind::kLightning: {
      const int64_t inner = c.n_heads * c.head_dim;
      const int64_t kv = c.n_kv_heads * c.head_dim;
      return d * inner + 2 * d * kv + inner * d + inner + d * c.head_dim +
             c.head_dim * inner;
    }
    case MixerKind::kMamba2: {
      const int64_t di = s.ssm_expand * d, n = s.ssm_state;
      const int64_t hm = di / s.ssm_head_dim;
      return d * (2 * di + 2 * n + hm) + 3 * hm + di + di * d +
             (s.short_conv ? (di + 2 * n) * (s.conv_size + 1) : 0);
    }
    case MixerKind::kGatedDeltaNet: {
      const int64_t hg = s.gdn_heads > 0 ? s.gdn_heads : c.n_heads;
      const int64_t hqk = s.gdn_mha ? hg : hg * c.n_kv_heads / c.n_heads;
      const int64_t dh = s.gdn_head_dim > 0 ? s.gdn_head_dim : c.head_dim;
      return 2 * d * hqk * dh + 2 * d * hg * dh + hg * dh * d + 2 * d * hg +
             2 * hg + dh +
             (s.short_conv ? (2 * hqk + hg) * dh * s.conv_size : 0);
    }
    default:
      return -1;
  }
}

class MixerModuleTest : public ::testing::TestWithParam<ModuleCase> {
 protected:
  void SetUp() override {
    torch::manual_seed(11);
    config_ = SmallConfig();
    mixer_ = Build(config_, GetParam().spec);
    ASSERT_NE(mixer_, nullptr);
  }
  ModelConfig config_;
  std::shared_ptr<Mixer> mixer_;
};

TEST_P(MixerModuleTest, ParameterCountMatchesLayout) {
  int64_t count = 0;
  for (const torch::Tensor& p : mixer_->parameters()) count += p.numel();
  EXPECT_EQ(count, LayoutParameterCount(config_, GetParam().spec));
  // The closed form the coordinator uses, implemented from the same layout.
  EXPECT_EQ(count, CountMixerParameters(config_, GetParam().spec));
}

TEST_P(MixerModuleTest, ChunkedMatchesReferenceInFp64WithGradients) {
  mixer_->to(torch::kFloat64);
  const int64_t t = 37;  // not a multiple of the chunk (16)
  const torch::Tensor x =
      torch::randn({2, t, config_.d_model}, torch::kFloat64).requires_grad_();
  const torch::Tensor dout =
      torch::randn({2, t, config_.d_model}, torch::kFloat64);
  std::vector<torch::Tensor> inputs = {x};
  std::vector<std::string> names = {"x"};
  for (const auto& item : mixer_->named_parameters()) {
    inputs.push_back(item.value());
    names.push_back(item.key());
  }
  const Result got =
      RunWithGrads([&] { return mixer_->forward(x); }, inputs, dout);
  const Result ref =
      RunWithGrads([&] { return mixer_->forward_reference(x); }, inputs, dout);
  ASSERT_EQ(got.out.sizes(), x.sizes());
  EXPECT_LT(MaxRelError(got.out, ref.out), kFp64Tolerance);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_TRUE(got.grads[i].defined() && ref.grads[i].defined()) << names[i];
    EXPECT_GT(ref.grads[i].abs().max().item<double>(), 0) << names[i];
    EXPECT_LT(MaxRelError(got.grads[i], ref.grads[i]), kFp64Tolerance)
        << names[i];
  }
}

TEST_P(MixerModuleTest, ChunkedFp32MatchesFp64Reference) {
  const torch::Tensor x = torch::randn({2, 37, config_.d_model});
  const torch::Tensor y32 = mixer_->forward(x).detach();
  ASSERT_EQ(y32.scalar_type(), torch::kFloat32);
  mixer_->to(torch::kFloat64);
  const torch::Tensor y64 =
      mixer_->forward_reference(x.to(torch::kFloat64)).detach();
  EXPECT_LT(RelRmsError(y32, y64), kFp32Tolerance);
}

TEST_P(MixerModuleTest, IsCausal) {
  mixer_->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  const int64_t t = 40;
  const torch::Tensor x =
      torch::randn({2, t, config_.d_model}, torch::kFloat64);
  const torch::Tensor y = mixer_->forward(x);
  for (const int64_t pos : {0, 15, 16, 20, 38}) {
    torch::Tensor x2 = x.clone();
    x2.narrow(1, pos + 1, t - pos - 1).normal_();
    const torch::Tensor y2 = mixer_->forward(x2);
    EXPECT_LT(MaxRelError(y2.narrow(1, 0, pos + 1), y.narrow(1, 0, pos + 1)),
              1e-13)
        << "pos=" << pos;
    // The later outputs do change: the check above can fail.
    EXPECT_GT(MaxRelError(y2.narrow(1, pos + 1, t - pos - 1),
                          y.narrow(1, pos + 1, t - pos - 1)),
              1e-3)
        << "pos=" << pos;
  }
}

INSTANTIATE_TEST_SUITE_P(Mixers, MixerModuleTest,
                         ::testing::ValuesIn(ModuleCases()),
                         [](const auto& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace hlab::model
