// Specification of the "megatron" data-parallel plan: gradient buckets of
// consecutive parameters in backward order, and the options it passes on.
#include "component_harness.hpp"
#include "plugin_module.hpp"
#include "megatron_data_parallel.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

using mh::testing::describe;
using mh::testing::Instance;
using mh::testing::Overrides;

constexpr uint64_t kMiB = 1024 * 1024;

struct Planned {
  std::string status;
  MH_DataPlan plan;
  std::vector<int32_t> bucket_of;
};

Planned plan_with(const Overrides& options, const std::vector<uint64_t>& param_bytes,
                  int32_t data_parallel = 4) {
  Instance<MH_DataParallelApi> dp(mh::data::megatron_component(), "parallel.data", options);
  const MH_DataPlanArgs args{MH_STRUCT_SIZE(MH_DataPlanArgs, num_params), nullptr, data_parallel, param_bytes.data(),
                             param_bytes.size()};
  Planned out{};
  out.plan.struct_size = sizeof(MH_DataPlan);
  out.status = describe(dp.api().plan(dp.self(), &args, &out.plan));
  if (out.plan.bucket_of != nullptr)
    out.bucket_of.assign(out.plan.bucket_of, out.plan.bucket_of + param_bytes.size());
  return out;
}

TEST(DataParallelPlan, DefaultBucketsHoldFortyMiBOfGradients) {
  Planned p = plan_with({}, std::vector<uint64_t>(9, 10 * kMiB));
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.bucket_of, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 2}));
  EXPECT_EQ(p.plan.num_buckets, 3);
}

TEST(DataParallelPlan, DefaultOverlapsReductionWithoutDistributedOptimizer) {
  Planned p = plan_with({}, {kMiB});
  EXPECT_EQ(p.plan.size, 4);
  EXPECT_EQ(p.plan.overlap, 1);
  EXPECT_EQ(p.plan.distributed_optimizer, 0);
}

TEST(DataParallelPlan, PassesTheOptimizerAndOverlapChoicesOn) {
  Planned p = plan_with({{"distributed_optimizer", true}, {"overlap_grad_reduce", false}}, {kMiB});
  EXPECT_EQ(p.plan.overlap, 0);
  EXPECT_EQ(p.plan.distributed_optimizer, 1);
}

TEST(DataParallelPlan, PassesTheOverlappedParameterGatherOn) {
  EXPECT_EQ(plan_with({}, {kMiB}).plan.overlap_param_gather, 0);
  Planned p = plan_with({{"distributed_optimizer", true}, {"overlap_param_gather", true}}, {kMiB});
  EXPECT_EQ(p.plan.overlap_param_gather, 1);
  EXPECT_EQ(p.plan.struct_size, MH_STRUCT_SIZE(MH_DataPlan, overlap_param_gather));
}

// As Megatron asserts: the gather is the distributed optimizer's, per bucket.
TEST(DataParallelPlan, RefusesToOverlapAGatherThereIsNot) {
  for (const Overrides& options : {Overrides{{"overlap_param_gather", true}},
                                   Overrides{{"overlap_param_gather", true}, {"distributed_optimizer", true},
                                             {"overlap_grad_reduce", false}}}) {
    try {
      plan_with(options, {kMiB});
      FAIL() << "accepted overlap_param_gather";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("overlap_param_gather = true needs distributed_optimizer = true and "
                                           "overlap_grad_reduce = true"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(DataParallelPlan, ABucketClosesAtTheFirstParameterThatFillsIt) {
  Planned p = plan_with({{"bucket_mb", 1.0}}, {600000, 600000, 100, kMiB - 100, 1, kMiB - 2, 1, 5});
  EXPECT_EQ(p.bucket_of, (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 2, 3}));
  EXPECT_EQ(p.plan.num_buckets, 4);
}

TEST(DataParallelPlan, AParameterLargerThanABucketClosesTheBucketItJoins) {
  Planned p = plan_with({{"bucket_mb", 1.0}}, {5 * kMiB, 10, 5 * kMiB, 5 * kMiB});
  EXPECT_EQ(p.bucket_of, (std::vector<int32_t>{0, 1, 1, 2}));
}

TEST(DataParallelPlan, BucketSizeZeroGivesEachParameterItsOwnBucket) {
  Planned p = plan_with({{"bucket_mb", 0.0}}, {1, 2, 3});
  EXPECT_EQ(p.bucket_of, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(p.plan.num_buckets, 3);
}

TEST(DataParallelPlan, FractionalBucketSizesAreInMiB) {
  Planned p = plan_with({{"bucket_mb", 0.5}}, {kMiB / 2 - 1, 1, kMiB / 2 - 1, 1});
  EXPECT_EQ(p.bucket_of, (std::vector<int32_t>{0, 0, 1, 1}));
}

TEST(DataParallelPlan, NoParametersMeansNoBuckets) {
  Planned p = plan_with({}, {});
  ASSERT_EQ(p.status, "OK");
  EXPECT_EQ(p.plan.num_buckets, 0);
}

TEST(DataParallelPlan, RefusesADataParallelSizeBelowOne) {
  EXPECT_EQ(plan_with({}, {kMiB}, 0).status,
            "INVALID_ARGUMENT: the data-parallel size must be at least 1 (got 0)");
}

TEST(ParallelDataModule, DeclaresTheMegatronDataParallelComponent) {
  EXPECT_EQ(mh::testing::describe_module(MH_TEST_PLUGIN),
            "parallel_data 1.0.0 " + mh::testing::kBuiltAbi + ": data_parallel megatron "
            "[distributed_optimizer, overlap_grad_reduce, overlap_param_gather, bucket_mb]");
}

}  // namespace
