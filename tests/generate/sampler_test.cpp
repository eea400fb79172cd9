#include "generate/sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace mh::generate {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};

TEST(Sampler, GreedyTakesTheLargestLogitAndTheLowestIdOnTies) {
  EXPECT_EQ(sample(kLogits, Sampling{}, 0, 0), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  for (uint64_t t = 0; t < 50; ++t) EXPECT_EQ(sample(kLogits, Sampling{1.5, 1, 1.0, 7}, 3, t), 1);
}

TEST(Sampler, DrawsDependOnlyOnSeedRequestAndTokenIndex) {
  const Sampling s{1.0, 0, 1.0, 42};
  for (uint64_t t = 0; t < 20; ++t) EXPECT_EQ(sample(kLogits, s, 5, t), sample(kLogits, s, 5, t));
  int differ = 0;
  for (uint64_t t = 0; t < 20; ++t) differ += sample(kLogits, s, 5, t) != sample(kLogits, Sampling{1.0, 0, 1.0, 43}, 5, t);
  EXPECT_GT(differ, 0);
}

TEST(Sampler, FrequenciesFollowTheSoftmaxAtTheTemperature) {
  const std::vector<float> logits = {0.0f, 1.0f};
  const Sampling s{2.0, 0, 1.0, 1};
  int ones = 0;
  const int n = 20000;
  for (int t = 0; t < n; ++t) ones += sample(logits, s, 0, uint64_t(t));
  const double expected = 1.0 / (1.0 + std::exp(-0.5));  // softmax of {0, 0.5}
  EXPECT_NEAR(double(ones) / n, expected, 0.015);
}

// It read ids[-1] (keep 0) and emitted token 0.
TEST(Sampler, TopPZeroKeepsTheLikeliestTokenAndIsGreedy) {
  for (uint64_t t = 0; t < 50; ++t) EXPECT_EQ(sample(kLogits, Sampling{1.0, 0, 0.0, 7}, 2, t), 1);
}

TEST(Sampler, TopPKeepsTheFewestTokensReachingTheMass) {
  // Probabilities at temperature 1: ~0.64, 0.24, 0.09, 0.03 for logits 3, 2, 1, 0.
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.0f};
  std::map<int32_t, int> seen;
  for (uint64_t t = 0; t < 2000; ++t) ++seen[sample(logits, Sampling{1.0, 0, 0.8, 9}, 1, t)];
  EXPECT_EQ(seen.size(), 2u);  // 0.64 < 0.8 <= 0.64 + 0.24
  EXPECT_GT(seen[1], seen[3]);
}

}  // namespace
}  // namespace mh::generate
