#include "data/gpt_samples.hpp"

#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <algorithm>
#include <optional>
#include <set>

namespace mh::data {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr int64_t kSeqLen = 7;
constexpr char kWeights[] = "80,20,0";

// 40 documents of 0..12 tokens (some empty) whose tokens are their own
// positions in the whole file, so a sample shows where it was cut from.
class GptSamplesTest : public ::testing::Test {
 protected:
  GptSamplesTest() {
    IndexedDatasetWriter writer(prefix_, TokenDType::kInt32);
    int32_t position = 0;
    for (int d = 0; d < 40; ++d) {
      document_starts_.push_back(position);
      std::vector<int32_t> tokens((d * 5) % 13);
      for (int32_t& t : tokens) t = position++;
      writer.add_document(tokens);
    }
    document_starts_.push_back(position);
    writer.finish();
    dataset_.emplace(prefix_);
  }

  GptSamples samples(Split split, uint64_t seed = 1234, int64_t seq_len = kSeqLen) const {
    return GptSamples(*dataset_, split, kWeights, seq_len, seed);
  }
  // The first position of every sample index in [begin, end).
  static std::vector<int32_t> starts(const GptSamples& samples, int64_t begin, int64_t end) {
    std::vector<int32_t> out, tokens(kSeqLen + 1);
    for (int64_t i = begin; i < end; ++i) {
      samples.get(i, tokens.data());
      out.push_back(tokens[0]);
    }
    return out;
  }
  int64_t document_of(int32_t position) const {
    auto it = std::upper_bound(document_starts_.begin(), document_starts_.end(), position);
    return it - document_starts_.begin() - 1;
  }
  // Train is documents [0, 32) and valid [32, 40) under "80,20,0".
  int32_t split_tokens(Split split) const {
    return split == Split::kTrain ? document_starts_[32]
                                  : document_starts_[40] - document_starts_[32];
  }

  testing::TempDir dir_;
  std::string prefix_ = dir_.file("positions");
  std::vector<int32_t> document_starts_;
  std::optional<IndexedDataset> dataset_;
};

TEST_F(GptSamplesTest, WindowsAreContiguousAndCoverTheSplit) {
  for (Split split : {Split::kTrain, Split::kValid}) {
    GptSamples s = samples(split);
    const int32_t first = split == Split::kTrain ? 0 : document_starts_[32];
    ASSERT_EQ(s.size(), (split_tokens(split) - 1) / kSeqLen);
    std::vector<int32_t> tokens(kSeqLen + 1), window_starts;
    for (int64_t i = 0; i < s.size(); ++i) {
      s.get(i, tokens.data());
      for (int64_t t = 1; t <= kSeqLen; ++t) ASSERT_EQ(tokens[t], tokens[0] + t);
      window_starts.push_back(tokens[0]);
    }
    std::sort(window_starts.begin(), window_starts.end());
    for (int64_t w = 0; w < s.size(); ++w) EXPECT_EQ(window_starts[w], first + w * kSeqLen);
  }
}

TEST_F(GptSamplesTest, SameSeedSameOrder) {
  GptSamples s = samples(Split::kTrain);
  EXPECT_EQ(starts(s, 0, s.size()), starts(samples(Split::kTrain), 0, s.size()));
}

TEST_F(GptSamplesTest, DifferentSeedDifferentOrder) {
  GptSamples s = samples(Split::kTrain, 1);
  EXPECT_NE(starts(s, 0, s.size()), starts(samples(Split::kTrain, 2), 0, s.size()));
}

TEST_F(GptSamplesTest, EveryEpochVisitsEveryWindowOnceInANewOrder) {
  GptSamples s = samples(Split::kTrain);
  std::vector<int32_t> first = starts(s, 0, s.size());
  std::vector<int32_t> second = starts(s, s.size(), 2 * s.size());
  EXPECT_NE(first, second);
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  EXPECT_EQ(first, second);
  EXPECT_EQ(std::set<int32_t>(first.begin(), first.end()).size(), first.size());
}

TEST_F(GptSamplesTest, TrainAndValidNeverShareDocuments) {
  auto documents = [&](Split split) {
    GptSamples s = samples(split);
    std::set<int64_t> seen;
    std::vector<int32_t> tokens(kSeqLen + 1);
    for (int64_t i = 0; i < s.size(); ++i) {
      s.get(i, tokens.data());
      for (int32_t t : tokens) seen.insert(document_of(t));
    }
    return seen;
  };
  std::set<int64_t> train = documents(Split::kTrain), valid = documents(Split::kValid);
  for (int64_t d : valid) EXPECT_EQ(train.count(d), 0u) << "document " << d;
  EXPECT_FALSE(train.empty());
  EXPECT_FALSE(valid.empty());
}

TEST_F(GptSamplesTest, SplitShorterThanASampleIsAClearError) {
  const int32_t tokens = split_tokens(Split::kValid);
  EXPECT_THAT([&] { samples(Split::kValid, 1, tokens); },
              ThrowsMessage<Error>(AllOf(HasSubstr("valid split"),
                                         HasSubstr("has " + std::to_string(tokens) + " tokens"),
                                         HasSubstr("seq_len " + std::to_string(tokens)))));
  EXPECT_THAT([&] { samples(Split::kTest); }, ThrowsMessage<Error>(HasSubstr("test split")));
}

}  // namespace
}  // namespace mh::data
