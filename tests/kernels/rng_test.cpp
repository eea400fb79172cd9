#include <megahost/rng.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace mh::rng {
namespace {

struct KnownAnswer {
  PhiloxBlock counter;
  PhiloxKey key;
  PhiloxBlock expected;
};

// Random123's tests/kat_vectors, the three "philox4x32 10" lines: counter,
// key, expected output.
constexpr KnownAnswer kKnownAnswers[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     {{0x00000000, 0x00000000}},
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

TEST(Philox, MatchesRandom123KnownAnswers) {
  for (const KnownAnswer& kat : kKnownAnswers) {
    const PhiloxBlock got = philox4x32_10(kat.counter, kat.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], kat.expected.v[i]) << "word " << i;
  }
}

TEST(Philox, CounterFillsTheLowWordsAndSeedTheKey) {
  const PhiloxBlock got = draw(0x299f31d0'a4093822ull, 0x85a308d3'243f6a88ull);
  const PhiloxBlock expected = philox4x32_10({{0x243f6a88, 0x85a308d3, 0, 0}}, {{0xa4093822, 0x299f31d0}});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], expected.v[i]) << "word " << i;
}

TEST(Uniform, IsTheTop24BitsOfTheFirstWord) {
  EXPECT_EQ(uniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) / 16777216.0f);
  EXPECT_EQ(unit_float(0), 0.0f);
  EXPECT_LT(unit_float(0xffffffffu), 1.0f);
}

TEST(Uniform, IsUniformOnTheUnitInterval) {
  constexpr int n = 1 << 16;
  double sum = 0, sum_sq = 0;
  int low_quarter = 0;
  for (uint64_t c = 0; c < n; ++c) {
    const float u = uniform(42, c);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_sq += u * u;
    low_quarter += u < 0.25f;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.002);
  EXPECT_NEAR(static_cast<double>(low_quarter) / n, 0.25, 0.01);
}

TEST(Uniform, DependsOnSeedAndCounterOnly) {
  EXPECT_EQ(uniform(7, 123456789), uniform(7, 123456789));
  EXPECT_NE(uniform(7, 123456789), uniform(8, 123456789));
  EXPECT_NE(uniform(7, 123456789), uniform(7, 123456790));
  EXPECT_NE(uniform(7, 1ull << 40), uniform(7, 0));  // the counter's high half counts too
}

TEST(Normal, IsBoxMullerOfTheFirstTwoWords) {
  const double radius = std::sqrt(-2.0 * std::log(((0x6627e8d5u >> 8) + 1) / 16777216.0));
  const double angle = 2.0 * M_PI * ((0xe169c58du >> 8) / 16777216.0);
  EXPECT_NEAR(normal(0, 0), radius * std::cos(angle), 1e-5);
}

TEST(Normal, HasZeroMeanAndUnitVariance) {
  constexpr int n = 1 << 16;
  double sum = 0, sum_sq = 0;
  for (uint64_t c = 0; c < n; ++c) {
    const float z = normal(3, c);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum_sq += static_cast<double>(z) * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.02);
}

}  // namespace
}  // namespace mh::rng
