// Gradient norm and clipping, AdamW over the parameter groups, and the
// learning-rate schedule (linear warm-up, cosine decay to min_lr).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/params.hpp"

namespace mh {

struct AdamWConfig {
  double lr, min_lr;
  int64_t warmup_steps, decay_steps;
  double weight_decay, beta1, beta2, eps, clip_grad;
};

// Learning rate of optimizer step `step` (from 1).
double learning_rate(const AdamWConfig& c, int64_t step);

// AdamW over a rank's parameters. With a data group (the distributed
// optimizer), each data-parallel rank owns 1/d of the flat parameter
// buffer: gradients are reduce-scattered to their owner, AdamW state exists
// only for the owned shard, and the updated shards are all-gathered.
class Optimizer {
 public:
  Optimizer(Device& device, ParamSet& params, const AdamWConfig& config, Collectives* data_group = nullptr);
  bool distributed() const { return data_ != nullptr; }
  // Distributed: sums the gradients over the data group into this rank's shard.
  void reduce_scatter_gradients();

  // Global gradient L2 norm: the squares of `ranges` of this rank's
  // gradients, summed over `groups` (each rank counts what it alone holds).
  double grad_norm(const std::vector<GroupRange>& ranges, std::initializer_list<Collectives*> groups);
  // Clips to clip_grad given the norm, then applies AdamW for `step` to the
  // f32 master weights (and refreshes the GEMMs' copy of them).
  void step(int64_t step, double norm);

 private:
  // The gradients this rank updates and where they sit in the flat buffer.
  float* grads() const { return distributed() ? shard_grads_.f32() : params_.grads().f32(); }
  GroupRange owned() const;
  // `r` (flat coordinates) clipped to the owned range, or empty.
  GroupRange clip(GroupRange r) const;

  Device& device_;
  ParamSet& params_;
  AdamWConfig config_;
  Collectives* data_;
  Buffer m_, v_, shard_grads_, staging_;
};

}  // namespace mh
