// Megatron data parallelism as a plan: gradients are reduced over the d
// data-parallel replicas in buckets of consecutive parameters, taken in the
// order backward finalises them, so each bucket's reduction can start while
// backward still runs; optionally the reduction is a reduce-scatter and the
// AdamW state is sharded 1/d (Megatron's distributed optimizer, ZeRO-1),
// whose parameter all-gather may overlap the next forward.
#pragma once

#include <megahost/plugin.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace mh::data {

inline constexpr MH_OptionSpec kOptions[] = {
    opt_bool("distributed_optimizer", "false",
             "reduce-scatter gradients and shard the AdamW state 1/d, then all-gather the "
             "parameters (Megatron's distributed optimizer)"),
    opt_bool("overlap_grad_reduce", "true",
             "start a bucket's reduction as soon as backward has finalised all its gradients"),
    opt_bool("overlap_param_gather", "false",
             "with the distributed optimizer and overlap_grad_reduce: gather each bucket's updated "
             "parameters without blocking after the step and wait for it just before the next "
             "forward first reads it (Megatron's overlap_param_gather)"),
    opt_double("bucket_mb", "40", 0, 1e6,
               "gradient bucket size in MiB: a bucket closes at the first parameter that brings "
               "it to this size; 0 gives each parameter its own bucket"),
};

// Bucket index of each parameter: consecutive parameters fill a bucket
// until it holds at least `bucket_bytes`, then the next one starts.
std::vector<int32_t> assign_buckets(std::span<const uint64_t> param_bytes, uint64_t bucket_bytes);

class MegatronDataParallel {
 public:
  static constexpr MH_Kind kind = MH_KIND_DATA_PARALLEL;

  explicit MegatronDataParallel(const CreateContext& ctx);

  // Buckets args.param_bytes, each parameter's gradient size in the order
  // backward finalises them.
  void plan(const MH_DataPlanArgs& args, MH_DataPlan& out);

 private:
  bool distributed_optimizer_;
  bool overlap_;
  bool overlap_param_gather_;
  uint64_t bucket_bytes_;
  std::vector<int32_t> bucket_of_;
};

// The "megatron" component of kind MH_KIND_DATA_PARALLEL.
MH_ComponentDesc megatron_component();

}  // namespace mh::data
