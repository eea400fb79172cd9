#include "data/permutation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace mh::data {
namespace {

std::vector<uint64_t> order(uint64_t n, uint64_t key) {
  Permutation permutation(n, key);
  std::vector<uint64_t> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = permutation(i);
  return out;
}

TEST(Permutation, IsABijectionForAnySize) {
  for (uint64_t n : {1u, 2u, 3u, 5u, 16u, 17u, 1000u, 4097u}) {
    std::vector<uint64_t> sorted = order(n, 42);
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint64_t> identity(n);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(sorted, identity) << "n = " << n;
  }
}

TEST(Permutation, DependsOnTheKeyOnly) {
  EXPECT_EQ(order(1000, 7), order(1000, 7));
  EXPECT_NE(order(1000, 7), order(1000, 8));
}

TEST(Permutation, Shuffles) {
  std::vector<uint64_t> shuffled = order(1000, 1);
  int fixed_points = 0;
  for (uint64_t i = 0; i < shuffled.size(); ++i) fixed_points += shuffled[i] == i;
  // A random permutation has one fixed point on average.
  EXPECT_LT(fixed_points, 10);
}

}  // namespace
}  // namespace mh::data
