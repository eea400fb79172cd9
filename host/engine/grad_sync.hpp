// Data-parallel gradient synchronisation, bucket by bucket: a bucket's
// reduction starts as soon as backward has finalised all its gradients
// (with overlap; otherwise all start after backward), and finish() waits
// for every one before the optimizer reads the gradients.
//
// Before a bucket goes to the data group its gradients get the other sums
// they need: the tensor group's for replicated parameters under sequence
// parallelism and for QK-norm's weights under any tensor parallelism, and the embedding group's for the tied embedding shared by
// the first and last pipeline stages. The latter is a blocking collective
// with a stage that may still be running its schedule, so that bucket waits
// for finish().
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/grad_buckets.hpp"
#include "engine/optimizer.hpp"
#include "engine/params.hpp"

namespace mh {

struct GradSyncGroups {
  Collectives* data = nullptr;       // null: nothing to reduce over data-parallel replicas
  Collectives* expert_data = nullptr;  // the expert weights' replicas; null: nothing to reduce
  Collectives* tensor = nullptr;     // null: replicated gradients are complete
  Collectives* heads = nullptr;      // the tensor group with t > 1: per-head gradients are its ranks' parts
  Collectives* embedding = nullptr;  // null: the tied embedding lives on one stage
};

// What the last step's synchronisation did, for the metrics.
struct GradSyncStats {
  int32_t buckets = 0;
  int32_t started_in_backward = 0;  // buckets started before backward ended
  double overlap_s = 0;             // from the first bucket's start to the end of backward
  double wait_s = 0;                // from the end of backward until every bucket was reduced
};

class GradSync {
 public:
  GradSync(ParamSet& params, Optimizer& optimizer, std::vector<GradBucket> buckets, GradSyncGroups groups);

  // Backward made its last contribution of the step to the gradients of
  // `ids`. Starts every bucket this completes.
  void finalised(std::span<const int> ids);
  // After backward: starts the buckets not started yet, in order, and waits
  // for all; readies the next step.
  void finish();
  const GradSyncStats& stats() const { return stats_; }

 private:
  using Clock = std::chrono::steady_clock;
  void start(size_t bucket);
  void reset();

  ParamSet& params_;
  Optimizer& optimizer_;
  std::vector<GradBucket> buckets_;
  GradSyncGroups groups_;
  std::vector<size_t> first_range_;   // per bucket: index of its first range in the optimizer's list
  std::vector<size_t> bucket_of_;     // per parameter id
  std::vector<int32_t> uses_;         // per parameter id: finalisations backward makes per step
  std::vector<int32_t> uses_left_;    // per parameter id, this step
  std::vector<int32_t> params_left_;  // per bucket, this step
  std::vector<bool> started_;
  Clock::time_point first_start_;
  std::vector<PendingCollective> pending_;
  GradSyncStats stats_;
};

// Every bucket's data-group ranges in bucket order: the optimizer's list.
std::vector<GroupRange> reduction_ranges(const std::vector<GradBucket>& buckets);

}  // namespace mh
