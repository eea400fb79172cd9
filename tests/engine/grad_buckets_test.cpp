// Gradient buckets: every parameter in exactly one bucket, in the order
// backward finalises them, as runs of the flat buffer that split evenly
// over the data group.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "../support/engine_env.hpp"
#include "../support/single_rank_engine.hpp"
#include "engine/device.hpp"
#include "engine/grad_buckets.hpp"
#include "engine/params.hpp"

namespace mh {
namespace {

constexpr int64_t kDataParallel = 3;

ModelDims dims() {
  ModelDims d{};
  d.layers = 3;
  d.hidden = 10;  // odd sizes everywhere, so slots need padding to a multiple of 3
  d.heads = 2;
  d.ffn = 22;
  d.seq = 7;
  d.vocab = 29;
  d.micro_batch = 1;
  d.init_std = 0.02f;
  return d;
}

struct Rank {
  Rank()
      : kernels(env.slot(MH_KIND_KERNELS), 1, 0),
        dev(kernels),
        params(dev, dims(), test::SingleRankEngine::single_rank_plan(), 1, owned(), ParamStorage{kDataParallel}) {}
  static OwnedParts owned() { return OwnedParts{{0, 1, 2}, true, true}; }
  test::EngineEnv env{"[model]\nlayers = 3\n"};
  Instance kernels;
  Device dev;
  ParamSet params;
  std::vector<ChunkSpec> chunks{ChunkSpec{0, 3, true, true}};
};

MH_DataPlan plan_of(const std::vector<int32_t>& bucket_of, bool overlap) {
  MH_DataPlan p{};
  p.struct_size = sizeof(p);
  p.size = int32_t(kDataParallel);
  p.overlap = overlap;
  p.bucket_of = bucket_of.data();
  p.num_buckets = bucket_of.empty() ? 0 : bucket_of.back() + 1;
  return p;
}

TEST(GradBuckets, BackwardOrderListsEveryParameterOnceEndingWithTheTiedEmbedding) {
  Rank s;
  const std::vector<int> order = backward_order(s.params, s.chunks);
  EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), s.params.infos().size());
  EXPECT_EQ(order.size(), s.params.infos().size());
  EXPECT_EQ(order.front(), s.params.lnf_w());
  EXPECT_EQ(order[2], s.params.layer(2).fc2_w);
  EXPECT_EQ(order.back(), s.params.wte());
}

TEST(GradBuckets, EachBucketIsRunsOfWholeSlotsThatSplitOverTheDataGroup) {
  Rank s;
  const std::vector<int> order = backward_order(s.params, s.chunks);
  std::vector<int32_t> bucket_of;
  for (size_t i = 0; i < order.size(); ++i) bucket_of.push_back(int32_t(i / 5));
  const std::vector<GradBucket> buckets = make_buckets(s.params, order, plan_of(bucket_of, true));
  ASSERT_EQ(buckets.size(), size_t(bucket_of.back() + 1));
  int64_t covered = 0;
  for (const GradBucket& b : buckets) {
    for (const GroupRange& r : b.ranges) {
      EXPECT_EQ(r.count % kDataParallel, 0);
      covered += r.count;
    }
    int64_t slots = 0;
    for (int id : b.params) slots += s.params.slot(id);
    int64_t in_ranges = 0;
    for (const GroupRange& r : b.ranges) in_ranges += r.count;
    EXPECT_EQ(in_ranges, slots);
  }
  EXPECT_EQ(covered, s.params.numel());
  EXPECT_TRUE(buckets.back().tied_embedding);
  EXPECT_FALSE(buckets.front().tied_embedding);
}

TEST(GradBuckets, WithoutOverlapOneBucketIsTheWholeBuffer) {
  Rank s;
  const std::vector<int> order = backward_order(s.params, s.chunks);
  const std::vector<int32_t> bucket_of(order.size(), 0);
  const std::vector<GradBucket> buckets = make_buckets(s.params, order, plan_of(bucket_of, false));
  ASSERT_EQ(buckets.size(), 1u);
  ASSERT_EQ(buckets[0].ranges.size(), 1u);
  EXPECT_EQ(buckets[0].ranges[0].offset, 0);
  EXPECT_EQ(buckets[0].ranges[0].count, s.params.numel());
  // Layernorms, row-parallel biases and positions: two adjacent groups, one run.
  EXPECT_EQ(buckets[0].replicated.size(), 1u);
}

}  // namespace
}  // namespace mh
