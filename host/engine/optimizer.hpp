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

class Optimizer {
 public:
  Optimizer(Device& device, ParamSet& params, const AdamWConfig& config);

  // Global gradient L2 norm: the squares of `ranges` of this rank's
  // gradients, summed over `groups` (each rank counts what it alone holds).
  double grad_norm(const std::vector<GroupRange>& ranges, std::initializer_list<Collectives*> groups);
  // Clips to clip_grad given the norm, then applies AdamW for `step`.
  void step(int64_t step, double norm);

 private:
  Device& device_;
  ParamSet& params_;
  AdamWConfig config_;
  Buffer m_, v_;
};

}  // namespace mh
