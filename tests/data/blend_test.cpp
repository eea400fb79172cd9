#include "data/blend.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <cmath>
#include <thread>

namespace mh::data {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// A part whose sample i is {tag, i}: shows where a blended sample came from.
class TaggedSamples final : public Samples {
 public:
  TaggedSamples(int32_t tag, int64_t size) : tag_(tag), size_(size) {}
  int64_t size() const override { return size_; }
  void get(int64_t index, int32_t* out) const override {
    out[0] = tag_;
    out[1] = static_cast<int32_t>(index);
  }
  bool masks_loss() const override { return tag_ == 1; }
  void get_loss_mask(int64_t, const int32_t*, uint8_t* mask) const override { mask[0] = static_cast<uint8_t>(tag_); }

 private:
  int32_t tag_;
  int64_t size_;
};

BlendedSamples blend(std::vector<double> weights) {
  std::vector<std::unique_ptr<Samples>> parts;
  for (size_t d = 0; d < weights.size(); ++d) parts.push_back(std::make_unique<TaggedSamples>(int32_t(d), 100));
  return BlendedSamples(std::move(parts), std::move(weights));
}

TEST(ParseBlend, ReadsMegatronsWeightedList) {
  std::vector<BlendEntry> entries = parse_blend("0.3 data/a 0.7 data/b", "data.paths");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].weight, 0.3);
  EXPECT_EQ(entries[1].prefix, "data/b");
}

TEST(ParseBlend, OnePrefixAloneHasWeightOne) {
  std::vector<BlendEntry> entries = parse_blend("data/a", "data.paths");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].weight, 1.0);
}

TEST(ParseBlend, UnpairedOrBadWeightsAreAClearError) {
  EXPECT_THAT([] { parse_blend("0.3 a 0.7", "data.paths"); },
              ThrowsMessage<Error>(HasSubstr("data.paths = \"0.3 a 0.7\": weights and prefixes must come in pairs")));
  EXPECT_THAT([] { parse_blend("x a 1 b", "data.train_paths"); },
              ThrowsMessage<Error>(HasSubstr("'x' is not a non-negative weight")));
  EXPECT_THAT([] { parse_blend("0 a 0 b", "data.paths"); }, ThrowsMessage<Error>(HasSubstr("sum to zero")));
}

TEST(ParseBlend, DatasetsOfWeightZeroAreLeftOut) {
  EXPECT_EQ(parse_blend("0 a 1 b", "data.paths").size(), 1u);
}

TEST(BlendedSamples, EveryPrefixOfTheOrderFollowsTheWeights) {
  BlendedSamples samples = blend({0.2, 0.5, 0.3});
  std::vector<int64_t> counts(3, 0);
  int32_t out[2];
  for (int64_t i = 0; i < 5000; ++i) {
    samples.get(i, out);
    ++counts[size_t(out[0])];
    EXPECT_EQ(out[1], counts[size_t(out[0])] - 1) << "each part is read in order";
    for (size_t d = 0; d < 3; ++d) {
      const double expected = std::vector<double>{0.2, 0.5, 0.3}[d] * double(i + 1);
      ASSERT_LE(std::abs(double(counts[d]) - expected), 1.5) << "sample " << i << ", part " << d;
    }
  }
}

TEST(BlendedSamples, ASampleDependsOnlyOnItsIndexWhateverTheOrderOfReading) {
  BlendedSamples forward = blend({1, 2, 3}), backward = blend({1, 2, 3});
  const int64_t n = 10000;
  std::vector<std::array<int32_t, 2>> first(n), second(n);
  for (int64_t i = 0; i < n; ++i) forward.get(i, first[size_t(i)].data());
  // Read backwards by four threads at once, as ranks of another layout (or a
  // resumed run starting late) would.
  std::vector<std::thread> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.emplace_back([&, r] {
      for (int64_t i = n - 1 - r; i >= 0; i -= 4) backward.get(i, second[size_t(i)].data());
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(first, second);
}

TEST(ConcatenatedSamples, VisitsEveryPartOnceThenStartsOver) {
  std::vector<std::unique_ptr<Samples>> parts;
  parts.push_back(std::make_unique<TaggedSamples>(0, 2));
  parts.push_back(std::make_unique<TaggedSamples>(1, 3));
  ConcatenatedSamples samples(std::move(parts));
  ASSERT_EQ(samples.size(), 5);
  std::vector<std::array<int32_t, 2>> got(6);
  for (int64_t i = 0; i < 6; ++i) samples.get(i, got[size_t(i)].data());
  using S = std::array<int32_t, 2>;
  EXPECT_EQ(got, (std::vector<S>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}, {0, 2}}));
}

TEST(ConcatenatedSamples, AMaskComesFromThePartItsSampleDoes) {
  std::vector<std::unique_ptr<Samples>> parts;
  parts.push_back(std::make_unique<TaggedSamples>(0, 2));
  parts.push_back(std::make_unique<TaggedSamples>(1, 3));
  ConcatenatedSamples samples(std::move(parts));
  EXPECT_TRUE(samples.masks_loss());  // one part masks
  const int32_t tokens[2] = {};
  uint8_t mask = 9;
  samples.get_loss_mask(3, tokens, &mask);
  EXPECT_EQ(mask, 1);
  samples.get_loss_mask(5, tokens, &mask);
  EXPECT_EQ(mask, 0);
}

TEST(BlendedSamples, AMaskComesFromThePartItsSampleDoes) {
  BlendedSamples samples = blend({1, 2, 3});
  EXPECT_TRUE(samples.masks_loss());
  for (int64_t i = 0; i < 50; ++i) {
    int32_t tokens[2];
    uint8_t mask = 9;
    samples.get(i, tokens);
    samples.get_loss_mask(i, tokens, &mask);
    EXPECT_EQ(mask, tokens[0]);
  }
}

}  // namespace
}  // namespace mh::data
