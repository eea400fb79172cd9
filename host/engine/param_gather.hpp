// The distributed optimizer's all-gather of the updated parameters after
// each step, bucket by bucket (the gradient buckets' ranges). Blocking, it
// completes before the step ends. Overlapped (Megatron's
// overlap_param_gather), every bucket's gather starts without blocking, in
// the order the next forward reads the buckets (the reverse of backward's),
// and the forward waits for a bucket just before it first reads one of its
// parameters, so later buckets travel while earlier layers compute.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/grad_buckets.hpp"
#include "engine/optimizer.hpp"

namespace mh {

class ParamGather {
 public:
  // `buckets` as the optimizer's ranges were made from them
  // (reduction_ranges); `overlap` needs the optimizer distributed.
  ParamGather(Optimizer& optimizer, const std::vector<GradBucket>& buckets, size_t num_params, bool overlap);
  ParamGather(const ParamGather&) = delete;
  ParamGather& operator=(const ParamGather&) = delete;

  // After the optimizer's step: publishes the updated parameters.
  void publish();
  // The forward is about to read the parameters `ids`.
  void needed(std::span<const int> ids);
  // Anything else is about to read the parameters (a checkpoint, the end).
  void wait_all();
  bool overlapped() const { return overlap_; }
  // Seconds the rank was blocked on gathers since the last call: the whole
  // gather without overlap; with it, only what the forward (or anything
  // else reading the parameters) still had to wait for. Measured, so the
  // difference between the two is the part of the gather overlap hid.
  double take_wait_s();

 private:
  using Clock = std::chrono::steady_clock;
  void wait(size_t bucket);

  Optimizer& optimizer_;
  std::vector<size_t> first_range_, num_ranges_;  // per bucket, into the optimizer's ranges
  std::vector<size_t> bucket_of_;                 // per parameter id
  std::vector<std::vector<PendingCollective>> pending_;  // per bucket; empty when complete
  bool overlap_;
  double wait_s_ = 0;
};

}  // namespace mh
