// The distributed optimizer's overlapped parameter gather
// (parallel.data.overlap_param_gather): the gathers start after the step
// and the next forward waits for each bucket just before it reads it, so a
// run computes what the blocking gather computes -- the same losses to the
// bit, fp32 and bf16, data parallel alone and beside tensor and pipeline
// parallelism -- and its metrics say how long rank 0 was blocked on them.
#include <gtest/gtest.h>

#include <string>

#include "layout_run.hpp"

namespace mh::test {
namespace {

constexpr const char* kDistributed = " parallel.data.bucket_mb=0.05 parallel.data.distributed_optimizer=true";
constexpr const char* kOverlap = " parallel.data.overlap_param_gather=true";

struct Case {
  const char* name;
  const char* overrides;
};

class OverlappedParamGather : public ::testing::TestWithParam<Case> {};

TEST_P(OverlappedParamGather, ComputesWhatTheBlockingGatherComputes) {
  const std::string base = std::string(GetParam().overrides) + kDistributed;
  const LayoutResult blocking = run_layout(base);
  const LayoutResult overlapped = run_layout(base + kOverlap);
  ASSERT_EQ(blocking.exit_code, 0) << blocking.log;
  ASSERT_EQ(overlapped.exit_code, 0) << overlapped.log;
  ASSERT_EQ(overlapped.losses.size(), 5u) << overlapped.log;
  expect_same_function(blocking, overlapped, false);
  for (size_t i = 0; i < blocking.losses.size(); ++i)
    EXPECT_EQ(overlapped.losses[i], blocking.losses[i]) << "step " << i + 1;
}

TEST_P(OverlappedParamGather, MetricsSayHowLongTheRankWaitedForTheGather) {
  const std::string base = std::string(GetParam().overrides) + kDistributed;
  for (const std::string& overrides : {base, base + kOverlap}) {
    const LayoutResult r = run_layout(overrides);
    ASSERT_EQ(r.exit_code, 0) << r.log;
    const bool overlap = overrides.find(kOverlap) != std::string::npos;
    EXPECT_NE(r.metrics.find(overlap ? "\"param_gather_overlap\":true" : "\"param_gather_overlap\":false"),
              std::string::npos)
        << r.metrics;
    const std::vector<double> waits = series(r, "param_gather_wait_s");
    ASSERT_EQ(waits.size(), 5u) << r.metrics;
    for (double w : waits) EXPECT_GE(w, 0.0);
  }
}

const Case kCases[] = {
    {"dp2_fp32", "comm.world_size=2"},
    {"dp2_bf16", "comm.world_size=2 kernels.dtype=bf16"},
    {"tp2_pp2_dp2_fp32", "comm.world_size=8 parallel.tensor.size=2 parallel.pipeline.size=2"},
    {"tp2_pp2_dp2_bf16", "comm.world_size=8 parallel.tensor.size=2 parallel.pipeline.size=2 kernels.dtype=bf16"},
};

INSTANTIATE_TEST_SUITE_P(Layouts, OverlappedParamGather, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(OverlappedParamGatherOption, NeedsTheDistributedOptimizer) {
  const LayoutResult r = run_layout(std::string("comm.world_size=2") + kOverlap);
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_NE(r.log.find("overlap_param_gather = true needs distributed_optimizer = true"), std::string::npos) << r.log;
}

}  // namespace
}  // namespace mh::test
