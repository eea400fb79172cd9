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

// AdamW over a rank's parameters. With a data group, it is Megatron's
// distributed optimizer: the flat gradient buffer is reduced in `ranges`
// (the whole buffer, or one per run of a gradient bucket's parameters), each
// split evenly over the d data-parallel ranks as Megatron shards each
// bucket. Gradients are reduce-scattered in place, so each rank's piece of
// the buffer holds the sum; AdamW's state, and under mixed precision the
// f32 master weights, exist only for the owned pieces; the updated pieces
// are all-gathered in place, in the compute dtype. Ranges of expert weights
// (ParamSet::experts) are split over the expert-data group instead: the d / ep
// ranks that hold the same experts.
class Optimizer {
 public:
  // `params` without master weights (ParamSet::holds_master) needs a data
  // group: the optimizer then keeps them, starting from the parameters.
  Optimizer(Device& device, ParamSet& params, const AdamWConfig& config, Collectives* data_group = nullptr,
            const std::vector<GroupRange>& ranges = {}, Collectives* expert_data_group = nullptr);
  bool distributed() const { return data_ != nullptr; }
  // Whether parameter `id` is one the optimizer updates (not frozen).
  bool trains(int id) const { return params_.trainable(id); }
  // Distributed: starts summing range `range`'s gradients over the data
  // group into this rank's piece of it.
  PendingCollective reduce_scatter_start(size_t range);

  // Global gradient L2 norm: the squares of `ranges` of this rank's
  // gradients (of its own pieces under the distributed optimizer), summed
  // over `groups` (each rank counts what it alone holds; a null group is
  // skipped).
  double grad_norm(const std::vector<GroupRange>& ranges, std::initializer_list<Collectives*> groups);
  // Clips to clip_grad given the norm, then applies AdamW for `step` to the
  // f32 master weights; publish them next (ParamGather).
  void step(int64_t step, double norm);
  // Rounds the master weights into the parameters every op reads and, when
  // distributed, gathers every rank's pieces: after a step or a load.
  void publish();
  // publish() in two halves, for a gather that overlaps the next forward:
  // the rounding, then each range's in-place gather, started.
  void round_master();
  PendingCollective all_gather_start(size_t range);

  // Flat elements [flat, flat + count) of the parameters, held at `local`
  // in the AdamW state (and master weight) buffers.
  struct Piece {
    int64_t flat, local, count;
  };
  // What this rank updates: one piece per range, or the whole buffer.
  const std::vector<Piece>& owned() const { return owned_; }
  // AdamW's first and second moments of the owned pieces.
  float* exp_avg() const { return m_.f32(); }
  float* exp_avg_sq() const { return v_.f32(); }
  // The f32 master weights of the owned pieces when the optimizer keeps
  // them, else null (they are ParamSet's values).
  float* master() const { return master_.f32(); }

 private:
  // The owned parts of `r` (flat coordinates).
  std::vector<Piece> owned_within(GroupRange r) const;
  // The group range `range` is split over.
  Collectives& group_of(size_t range) const;
  // Where AdamW updates piece `p`'s master weights.
  float* master_of(const Piece& p) const;
  // The buffer the gathers fill.
  TypedPtr gathered() const;
  void keep_master_weights();

  Device& device_;
  ParamSet& params_;
  AdamWConfig config_;
  Collectives* data_;
  Collectives* expert_data_;
  std::vector<GroupRange> ranges_;
  std::vector<Piece> owned_;  // one per range, or the whole buffer when not distributed
  int64_t owned_count_ = 0;
  Buffer m_, v_, master_;
};

}  // namespace mh
