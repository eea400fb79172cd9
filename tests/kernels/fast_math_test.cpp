#include "ops/fast_math.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mh::kernels::cpu {
namespace {

TEST(FastExp, IsWithinOneTenMillionthOfExp) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0013f)
    worst = std::max(worst, std::abs(fast_exp(x) - std::exp(double{x})) / std::exp(double{x}));
  EXPECT_LT(worst, 1e-7);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
}

TEST(FastExp, ClampsTheEndsAndKeepsNaN) {
  EXPECT_LT(fast_exp(-std::numeric_limits<float>::infinity()), 1e-37f);
  EXPECT_GT(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_GT(fast_exp(std::numeric_limits<float>::infinity()), 1e38f);
  EXPECT_TRUE(std::isfinite(fast_exp(std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastTanh, IsWithinTwoTenMillionthsOfTanhAndSaturates) {
  double worst = 0;
  for (float x = -20.0f; x <= 20.0f; x += 0.0007f) worst = std::max(worst, std::abs(fast_tanh(x) - std::tanh(double{x})));
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(fast_tanh(100.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-100.0f), -1.0f);
  EXPECT_TRUE(std::isnan(fast_tanh(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace
}  // namespace mh::kernels::cpu
