// Tests of the warmup-stable-decay schedule.
#include "task/lr_schedule.h"

#include <gtest/gtest.h>

namespace hlab::task {
namespace {

TEST(WsdScheduleTest, WarmupStableDecayPhases) {
  WsdSchedule s({.peak_lr = 1.0,
                 .warmup_steps = 10,
                 .total_steps = 100,
                 .decay_fraction = 0.2,
                 .min_lr_ratio = 0.1});
  EXPECT_DOUBLE_EQ(s.LearningRate(0), 0.1);
  EXPECT_DOUBLE_EQ(s.LearningRate(9), 1.0);
  EXPECT_DOUBLE_EQ(s.LearningRate(50), 1.0);
  EXPECT_EQ(s.DecayStart(), 80);
  EXPECT_DOUBLE_EQ(s.LearningRate(79), 1.0);
  EXPECT_LT(s.LearningRate(80), 1.0);
  EXPECT_DOUBLE_EQ(s.LearningRate(99), 0.1);  // ends at the minimum
  for (int64_t step = 80; step < 99; ++step) {
    EXPECT_GT(s.LearningRate(step), s.LearningRate(step + 1)) << step;
  }
}

TEST(WsdScheduleTest, ShapesDifferInsideTheDecayOnly) {
  WsdConfig c{.peak_lr = 1.0, .warmup_steps = 0, .total_steps = 100};
  c.shape = DecayShape::kLinear;
  WsdSchedule linear(c);
  c.shape = DecayShape::kCosine;
  WsdSchedule cosine(c);
  c.shape = DecayShape::kOneMinusSqrt;
  WsdSchedule sqrt(c);
  // 30% into the decay: cosine above linear above 1-sqrt.
  EXPECT_GT(cosine.LearningRate(92), linear.LearningRate(92));
  EXPECT_GT(linear.LearningRate(92), sqrt.LearningRate(92));
  EXPECT_DOUBLE_EQ(cosine.LearningRate(99), sqrt.LearningRate(99));
}

TEST(WsdScheduleTest, BudgetsShareTheirStablePhase) {
  WsdSchedule small({.peak_lr = 3e-3, .warmup_steps = 5, .total_steps = 100});
  WsdSchedule large({.peak_lr = 3e-3, .warmup_steps = 5, .total_steps = 400});
  for (int64_t step = 0; step < small.DecayStart(); ++step) {
    EXPECT_EQ(small.LearningRate(step), large.LearningRate(step)) << step;
  }
}

TEST(WsdScheduleTest, InvalidConfigsNameTheField) {
  EXPECT_NE(ValidateWsdConfig({.total_steps = 0}).message().find("total_steps"),
            std::string::npos);
  EXPECT_NE(ValidateWsdConfig({.warmup_steps = 10, .total_steps = 5})
                .message()
                .find("warmup_steps"),
            std::string::npos);
  EXPECT_NE(ValidateWsdConfig({.peak_lr = -1}).message().find("lr"),
            std::string::npos);
  EXPECT_TRUE(ValidateWsdConfig({.warmup_steps = 1, .total_steps = 5}).ok());
}

}  // namespace
}  // namespace hlab::task
