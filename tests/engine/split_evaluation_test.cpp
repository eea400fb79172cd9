// A pass over a whole split visits every sample once, on any number of
// replicas, and reports what the user reads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/split_evaluation.hpp"

namespace mh {
namespace {

// How often each of a split's samples is counted over all replicas.
std::vector<int> counts(int64_t samples, int64_t micro_batch, int32_t replicas) {
  std::vector<int> seen(size_t(samples + micro_batch), 0);
  for (int32_t r = 0; r < replicas; ++r)
    for (const SplitBatch& b : whole_split_batches(samples, micro_batch, replicas, r))
      for (int64_t i = 0; i < b.counted; ++i) ++seen[size_t(b.first_sample + i)];
  return seen;
}

TEST(WholeSplitBatches, CountsEverySampleOnceOnAnyNumberOfReplicas) {
  for (int64_t samples : {1, 7, 8, 9, 100})
    for (int64_t b : {1, 3, 8})
      for (int32_t d : {1, 2, 3, 5}) {
        const std::vector<int> seen = counts(samples, b, d);
        for (size_t i = 0; i < seen.size(); ++i)
          EXPECT_EQ(seen[i], i < size_t(samples) ? 1 : 0) << samples << " samples, b " << b << ", d " << d << ": " << i;
      }
}

TEST(WholeSplitBatches, LastMicroBatchCountsOnlyTheSplitsSamples) {
  const std::vector<SplitBatch> one = whole_split_batches(10, 4, 1, 0);
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(one[2].first_sample, 8);
  EXPECT_EQ(one[2].counted, 2);
  EXPECT_EQ(one[0].counted, 4);
}

TEST(WholeSplitBatches, ReplicasTakeMicroBatchesInTurn) {
  const std::vector<SplitBatch> second = whole_split_batches(10, 2, 2, 1);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].first_sample, 2);
  EXPECT_EQ(second[1].first_sample, 6);
  EXPECT_TRUE(whole_split_batches(2, 2, 3, 2).empty());
}

TEST(SplitReport, LineAndRecordCarryLossPerplexityTokensAndRate) {
  const SplitLoss r{2.5, 1000, 0.5};
  EXPECT_EQ(split_line("valid", r), "valid: loss 2.5000, perplexity 12.18 over 1000 tokens (2000 tokens/s)");
  const nlohmann::json j = split_record("test", r);
  EXPECT_EQ(j["evaluate"], "test");
  EXPECT_DOUBLE_EQ(j["loss"].get<double>(), 2.5);
  EXPECT_NEAR(j["perplexity"].get<double>(), 12.1825, 1e-4);
  EXPECT_EQ(j["tokens"].get<int64_t>(), 1000);
  EXPECT_DOUBLE_EQ(j["tokens_per_s"].get<double>(), 2000);
}

TEST(SplitReport, PerplexityOfAHugeLossStaysFinite) {
  EXPECT_TRUE(std::isfinite(SplitLoss{1e6, 1, 1}.perplexity()));
}

}  // namespace
}  // namespace mh
