#include "data/gpt_samples.hpp"
#include "data/loss_mask.hpp"

#include "temp_dir.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/error.hpp>

#include <algorithm>
#include <functional>
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

  // Writes the dataset's loss mask: `mask(position)` for each token, with
  // `documents` of the tokens' documents, in `dtype`.
  void write_mask(const std::function<int32_t(int32_t)>& mask, int documents = 40,
                  TokenDType dtype = TokenDType::kUint8) const {
    IndexedDatasetWriter writer(loss_mask_prefix(prefix_), dtype);
    for (int d = 0; d < documents; ++d) {
      std::vector<int32_t> values;
      for (int32_t p = document_starts_[size_t(d)]; p < document_starts_[size_t(d) + 1]; ++p) values.push_back(mask(p));
      writer.add_document(values);
    }
    writer.finish();
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

TEST_F(GptSamplesTest, ASamplesMaskIsTheSameWindowOfTheLossMask) {
  write_mask([](int32_t p) { return p % 3 == 0 ? 1 : 0; });
  const std::unique_ptr<IndexedDataset> mask = open_loss_mask(*dataset_);
  ASSERT_NE(mask, nullptr);
  const GptSamples s(*dataset_, Split::kTrain, kWeights, kSeqLen, 1234, mask.get());
  EXPECT_TRUE(s.masks_loss());
  std::vector<int32_t> tokens(kSeqLen + 1);
  std::vector<uint8_t> got(kSeqLen + 1);
  for (int64_t i = 0; i < 2 * s.size(); ++i) {
    s.get(i, tokens.data());
    s.get_loss_mask(i, tokens.data(), got.data());
    for (size_t j = 0; j < tokens.size(); ++j) EXPECT_EQ(got[j], tokens[j] % 3 == 0 ? 1 : 0) << i << " " << j;
  }
}

TEST_F(GptSamplesTest, WithoutALossMaskEveryTargetIsTrainedOn) {
  EXPECT_EQ(open_loss_mask(*dataset_), nullptr);
  const GptSamples s = samples(Split::kTrain);
  EXPECT_FALSE(s.masks_loss());
  std::vector<int32_t> tokens(kSeqLen + 1);
  std::vector<uint8_t> got(kSeqLen + 1, 7);
  s.get(0, tokens.data());
  s.get_loss_mask(0, tokens.data(), got.data());
  EXPECT_EQ(got, std::vector<uint8_t>(kSeqLen + 1, 1));
}

TEST_F(GptSamplesTest, EodMaskLossLeavesOutTheTargetAfterEachEod) {
  // Position 10 stands for the EOD: the target after it, 11, is not trained on.
  const GptSamples s(*dataset_, Split::kTrain, kWeights, kSeqLen, 1234, nullptr, 10);
  EXPECT_TRUE(s.masks_loss());
  std::vector<int32_t> tokens(kSeqLen + 1);
  std::vector<uint8_t> got(kSeqLen + 1);
  for (int64_t i = 0; i < s.size(); ++i) {
    s.get(i, tokens.data());
    s.get_loss_mask(i, tokens.data(), got.data());
    for (size_t j = 1; j < tokens.size(); ++j) EXPECT_EQ(got[j], tokens[j - 1] == 10 ? 0 : 1);
  }
}

TEST_F(GptSamplesTest, ALossMaskThatIsNotTheTokensIsRefusedNamingBoth) {
  write_mask([](int32_t) { return 1; }, 39);
  EXPECT_THAT([&] { open_loss_mask(*dataset_); },
              ThrowsMessage<Error>(AllOf(HasSubstr(loss_mask_prefix(prefix_) + ".idx: "), HasSubstr(prefix_ + ".idx has"),
                                         HasSubstr("megahost_prepare --format=sft"))));
  write_mask([](int32_t) { return 1; }, 40, TokenDType::kUint16);
  EXPECT_THAT([&] { open_loss_mask(*dataset_); }, ThrowsMessage<Error>(HasSubstr("a loss mask holds uint8")));
  write_mask([](int32_t p) { return p == 3 ? 2 : 1; });
  const std::unique_ptr<IndexedDataset> mask = open_loss_mask(*dataset_);
  std::vector<int32_t> values(size_t(dataset_->sequence_length(1)));
  EXPECT_THAT([&] { mask->read(1, 0, int64_t(values.size()), values.data()); },
              ThrowsMessage<Error>(HasSubstr("a loss mask holds 0 and 1 only")));
}

}  // namespace
}  // namespace mh::data
