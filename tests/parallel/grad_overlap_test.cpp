// Overlapped gradient reduction really overlaps: with overlap_grad_reduce
// the data-parallel buckets start while backward still runs, without it
// they all start after backward.
#include <gtest/gtest.h>

#include "layout_run.hpp"

namespace mh::test {
namespace {

constexpr const char* kDp2 = "comm.world_size=2 parallel.data.bucket_mb=0.05 ";

TEST(GradOverlap, BucketsStartBeforeBackwardEnds) {
  LayoutResult r = run_layout(std::string(kDp2) + "parallel.data.overlap_grad_reduce=true");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const std::vector<double> buckets = series(r, "grad_buckets"), early = series(r, "grad_buckets_in_backward");
  ASSERT_EQ(early.size(), 5u) << r.metrics;
  EXPECT_GE(buckets.front(), 8) << "0.05 MiB buckets over a 4-layer, h = 64 model";
  const std::vector<double> overlap = series(r, "grad_overlap_s");
  for (size_t step = 0; step < early.size(); ++step) {
    EXPECT_EQ(early[step], buckets[step]) << "step " << step + 1;
    // The first bucket (the last layer's) starts with most of backward still to run.
    EXPECT_GT(overlap[step], 0) << "step " << step + 1;
  }
}

TEST(GradOverlap, WithoutOverlapOneBucketStartsAfterBackward) {
  LayoutResult r = run_layout(std::string(kDp2) + "parallel.data.overlap_grad_reduce=false");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  for (double b : series(r, "grad_buckets")) EXPECT_EQ(b, 1);
  for (double e : series(r, "grad_buckets_in_backward")) EXPECT_EQ(e, 0);
  for (double s : series(r, "grad_overlap_s")) EXPECT_EQ(s, 0);
}

TEST(GradOverlap, PipelineStageDefersOnlyTheTiedEmbeddingsBucket) {
  // Stage 0 (the metrics' rank) finalises its layers in its last backward;
  // the bucket holding the tied embedding waits for the embedding group's
  // reduction after the schedule.
  LayoutResult r = run_layout(std::string(kDp2) + "comm.world_size=4 parallel.pipeline.size=2");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const std::vector<double> buckets = series(r, "grad_buckets"), early = series(r, "grad_buckets_in_backward");
  ASSERT_EQ(early.size(), 5u) << r.metrics;
  for (size_t step = 0; step < early.size(); ++step) {
    EXPECT_GE(buckets[step], 3) << "step " << step + 1;
    EXPECT_EQ(early[step], buckets[step] - 1) << "step " << step + 1;
  }
}

}  // namespace
}  // namespace mh::test
