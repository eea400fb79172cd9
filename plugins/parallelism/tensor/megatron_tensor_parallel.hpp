// Megatron tensor parallelism (Shoeybi et al. 2019) with optional sequence
// parallelism (Korthikanti et al. 2022), as a plan: how each weight is split
// across the t ranks of the tensor group and which collective sits at each
// boundary of a parallel region. docs/parallelism.md has the tables.
#pragma once

#include <megahost/plugin.hpp>

#include <cstdint>
#include <string>

namespace mh::plan {
class Problems;
}

namespace mh::tensor {

inline constexpr int64_t kMaxSize = 1024;

inline constexpr MH_OptionSpec kOptions[] = {
    opt_int(
        "size", "1", 1, kMaxSize,
        "tensor-parallel ranks t; must divide heads, hidden, ffn_hidden, vocab and the world size"),
    opt_bool("sequence_parallel", "false",
             "shard layernorm and dropout regions along the sequence (needs t | seq_len); "
             "ignored when size = 1"),
};

class MegatronTensorParallel {
 public:
  static constexpr MH_Kind kind = MH_KIND_TENSOR_PARALLEL;

  explicit MegatronTensorParallel(const CreateContext& ctx);

  // Fills the plan and the shard of each weight args names, or throws
  // MH_INVALID_ARGUMENT listing every weight it does not know and every
  // dimension the size does not divide.
  void plan(const MH_TensorPlanArgs& args, MH_TensorPlan& out) const;

 private:
  void check_divisibility(const MH_ModelShape& shape, plan::Problems& problems) const;

  std::string size_key_;
  std::string sequence_parallel_key_;
  int32_t size_;
  bool sequence_parallel_;
};

// The "megatron" component of kind MH_KIND_TENSOR_PARALLEL.
MH_ComponentDesc megatron_component();

}  // namespace mh::tensor
