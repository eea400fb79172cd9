// Megatron-Core context parallelism as a plan: the sequence of every sample
// is split over the cp ranks of the context group, and attention exchanges
// keys and values over it. With load balancing (Megatron's, for causal
// attention) the sequence is cut into 2 cp chunks and rank r holds chunks r
// and 2 cp - 1 - r, so every rank does the same causal work.
// docs/parallelism.md has the memory formula.
#pragma once

#include <megahost/plugin.hpp>

#include <cstdint>
#include <string>

namespace mh::context {

inline constexpr int64_t kMaxSize = 1024;

inline constexpr MH_OptionSpec kOptions[] = {
    opt_int("size", "1", 1, kMaxSize,
            "context-parallel ranks cp; with load_balance the sequence is cut into 2 cp chunks, so 2 cp must "
            "divide seq_len"),
    opt_choice("comm_type", "\"all_gather\"", "all_gather|p2p|a2a",
               "how attention exchanges keys and values over the context group: all_gather (Megatron's "
               "allgather, as Llama 3 trains), p2p (ring attention: key/value blocks passed around the group, "
               "partial results merged; the flash core) or a2a (Ulysses: all-to-all to whole sequences of 1/cp of "
               "the heads and back; cp must divide the key/value heads of each tensor rank)"),
    opt_bool("load_balance", "true",
             "rank r holds chunks r and 2 cp - 1 - r of 2 cp (equal causal work), else the r-th of cp chunks"),
};

class MegatronContextParallel {
 public:
  static constexpr MH_Kind kind = MH_KIND_CONTEXT_PARALLEL;

  explicit MegatronContextParallel(const CreateContext& ctx);

  // Fills the plan, or throws MH_INVALID_ARGUMENT listing every dimension
  // the split does not divide.
  void plan(const MH_ContextPlanArgs& args, MH_ContextPlan& out) const;

 private:
  std::string size_key_, comm_key_;
  int32_t size_;
  int32_t comm_;
  bool load_balance_;
};

// The "megatron" component of kind MH_KIND_CONTEXT_PARALLEL.
MH_ComponentDesc megatron_component();

}  // namespace mh::context
