// What the kernels do by device, checked without a GPU: autocast turned off
// on the CPU and on CUDA inside a kernel and restored after it, in both
// LibTorch spellings (model/autocast.h); the blockwise attention's host
// threads fanned out on the CPU only (model/kernels/attention_blocks.h).
// A CUDA torch::Device is only a value here: nothing touches a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/autocast.h"
#include "model/kernels/attention_blocks.h"

namespace hlab::model {
namespace {

// Restores autocast on the CPU and CUDA and the thread count at the end of a
// test, whatever it set.
class DevicePolicyTest : public ::testing::Test {
 protected:
  void TearDown() override {
    SetAutocast(torch::kCPU, false);
    SetAutocast(torch::kCUDA, false);
    at::autocast::clear_cache();
    at::set_num_threads(threads_);
  }
  int threads_ = at::get_num_threads();
};

TEST_F(DevicePolicyTest, ScopedAutocastOffCoversTheCpuAndCuda) {
  SetAutocast(torch::kCPU, true, torch::kBFloat16);
  SetAutocast(torch::kCUDA, true, torch::kFloat16);
  ASSERT_TRUE(AutocastEnabled(torch::kCPU));
  ASSERT_TRUE(AutocastEnabled(torch::kCUDA));
  {
    ScopedAutocastOff off;
    EXPECT_FALSE(AutocastEnabled(torch::kCPU));
    // The old ScopedCpuAutocastOff left this on: a kernel's fp32
    // recurrences would have run in half precision under CUDA autocast.
    EXPECT_FALSE(AutocastEnabled(torch::kCUDA));
  }
  EXPECT_TRUE(AutocastEnabled(torch::kCPU));
  EXPECT_TRUE(AutocastEnabled(torch::kCUDA));
  EXPECT_EQ(AutocastDtype(torch::kCPU), torch::kBFloat16);
  EXPECT_EQ(AutocastDtype(torch::kCUDA), torch::kFloat16);
}

TEST_F(DevicePolicyTest, ScopedAutocastOffLeavesOffWhatWasOff) {
  SetAutocast(torch::kCPU, true, torch::kBFloat16);
  { ScopedAutocastOff off; }
  EXPECT_TRUE(AutocastEnabled(torch::kCPU));
  EXPECT_FALSE(AutocastEnabled(torch::kCUDA));
}

TEST_F(DevicePolicyTest, Bf16AutocastIsPerDevice) {
  SetAutocast(torch::kCUDA, true, torch::kBFloat16);
  EXPECT_TRUE(AutocastToBf16(torch::kCUDA));
  EXPECT_FALSE(AutocastToBf16(torch::kCPU));
  SetAutocast(torch::kCPU, true, torch::kBFloat16);
  SetAutocast(torch::kCUDA, true, torch::kFloat16);
  EXPECT_TRUE(AutocastToBf16(torch::kCPU));
  EXPECT_FALSE(AutocastToBf16(torch::kCUDA));
  EXPECT_FALSE(AutocastEnabled(torch::kMeta));
}

TEST_F(DevicePolicyTest, AttentionBlocksFanOutOnTheCpuOnly) {
  at::set_num_threads(3);
  const torch::Device cpu(torch::kCPU), cuda(torch::kCUDA, 0);
  EXPECT_EQ(internal::BlockThreads(cpu), 3);
  EXPECT_EQ(internal::BlockThreads(cuda), 1);
  const std::vector<internal::WorkItem> items(8);
  EXPECT_EQ(internal::WorkerCount(items, cpu), 3);
  EXPECT_EQ(internal::WorkerCount(items, cuda), 1);
  // One item cannot use more than one worker anywhere.
  EXPECT_EQ(internal::WorkerCount({internal::WorkItem{}}, cpu), 1);
}

}  // namespace
}  // namespace hlab::model
