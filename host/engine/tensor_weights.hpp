// The weights the engine asks the tensor-parallel plan to shard, by their
// ABI names (abi.h, MH_TensorPlanArgs), and the plan's answer for each.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mh {

// Every name the engine may list. "mlp.gate" comes last, so that a model
// without a gated MLP lists the others as a prefix and a weight's index is
// the same in every model.
inline constexpr std::array<const char*, 6> kTensorWeights = {
    "embedding", "attention.qkv", "attention.proj", "mlp.fc1", "mlp.fc2", "mlp.gate"};

// Storage for MH_TensorPlan.shard, one entry per kTensorWeights name; it
// must live as long as the plan that points to it.
using TensorShards = std::array<int32_t, kTensorWeights.size()>;

// The names a model lists: "mlp.gate" only for a gated MLP.
inline std::span<const char* const> tensor_weights(bool gated_mlp) {
  return std::span<const char* const>(kTensorWeights).first(kTensorWeights.size() - (gated_mlp ? 0 : 1));
}

// The arguments of MH_TensorParallelApi.plan for `shape`'s weights; `shape`
// is borrowed. The caller points the plan's shard at its TensorShards.
inline MH_TensorPlanArgs tensor_plan_args(const MH_ModelShape& shape) {
  const std::span<const char* const> names = tensor_weights(shape.gated_mlp != 0);
  return MH_TensorPlanArgs{MH_STRUCT_SIZE(MH_TensorPlanArgs, num_weights), nullptr, &shape, names.data(),
                           names.size()};
}

// The MH_ShardDim the plan wrote for `name`, one of kTensorWeights that the
// plan was asked for.
inline MH_ShardDim weight_shard(const MH_TensorPlan& plan, std::string_view name) {
  const auto* at = std::find(kTensorWeights.begin(), kTensorWeights.end(), name);
  require(at != kTensorWeights.end(), "the engine has no weight named '" + std::string(name) + "'",
          MH_INTERNAL);
  return MH_ShardDim(plan.shard[at - kTensorWeights.begin()]);
}

}  // namespace mh
