// Megatron-Core expert parallelism (--expert-model-parallel-size) as a plan:
// the ep ranks of an expert group are drawn from the data-parallel
// dimension (its replicas and their context ranks: d = data x context), each
// owns experts / ep consecutive experts, and expert weights are reduced over
// the d / ep ranks that hold the same experts.
// docs/parallelism.md ("Expert parallelism") has the groups and the memory.
#pragma once

#include <megahost/plugin.hpp>

#include <cstdint>
#include <string>

namespace mh::expert {

inline constexpr int64_t kMaxSize = 1024;

inline constexpr MH_OptionSpec kOptions[] = {
    opt_int("size", "1", 1, kMaxSize,
            "expert-parallel ranks ep, drawn from the data-parallel ranks and their context ranks; must divide "
            "model.experts and the data-parallel x context size"),
};

class MegatronExpertParallel {
 public:
  static constexpr MH_Kind kind = MH_KIND_EXPERT_PARALLEL;

  explicit MegatronExpertParallel(const CreateContext& ctx);

  // Fills the plan, or throws MH_INVALID_ARGUMENT listing every number the
  // size does not divide.
  void plan(const MH_ExpertPlanArgs& args, MH_ExpertPlan& out) const;

 private:
  std::string size_key_;
  int32_t size_;
};

// The "megatron" component of kind MH_KIND_EXPERT_PARALLEL.
MH_ComponentDesc megatron_component();

}  // namespace mh::expert
