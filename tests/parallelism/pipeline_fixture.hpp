// Planning a pipeline through the component's C table, for the pipeline tests.
#pragma once

#include "component_harness.hpp"
#include "megatron_pipeline_parallel.hpp"

#include <array>
#include <string>
#include <vector>

namespace pipetest {

inline constexpr const char* kSection = "parallel.pipeline";

// A model with `layers` layers, m = global_batch / micro_batch microbatches
// per data-parallel replica, on p * d ranks.
inline MH_ModelShape shape(int64_t layers, int64_t global_batch, int32_t world_size) {
  MH_ModelShape s{};
  s.struct_size = MH_STRUCT_SIZE(MH_ModelShape, world_size);
  s.layers = layers;
  s.hidden = 64;
  s.heads = 4;
  s.ffn_hidden = 256;
  s.seq_len = 32;
  s.vocab = 128;
  s.micro_batch = 1;
  s.global_batch = global_batch;
  s.world_size = world_size;
  return s;
}

struct Pipeline {
  explicit Pipeline(const mh::testing::Overrides& options)
      : instance(mh::pipeline::megatron_component(), kSection, options) {
    plan.struct_size = sizeof(MH_PipelinePlan);
  }

  // "OK" or the error plan returned.
  std::string plan_for(const MH_ModelShape& s, int32_t data_parallel = 1) {
    const MH_PipelinePlanArgs args{MH_STRUCT_SIZE(MH_PipelinePlanArgs, data_parallel), nullptr, &s, data_parallel};
    return mh::testing::describe(instance.api().plan(instance.self(), &args, &plan));
  }

  // {stage, chunk, first layer, layer count} of every model chunk.
  std::vector<std::array<int32_t, 4>> layers() const {
    std::vector<std::array<int32_t, 4>> out;
    for (size_t i = 0; i < plan.num_layers; ++i)
      out.push_back(
          {plan.layers[i].stage, plan.layers[i].chunk, plan.layers[i].first, plan.layers[i].count});
    return out;
  }

  std::vector<MH_PipeAction> schedule(int32_t stage) const {
    const MH_PipeAction* actions = nullptr;
    size_t count = 0;
    mh::check(instance.api().schedule(instance.self(), stage, &actions, &count), "schedule");
    return {actions, actions + count};
  }

  std::vector<std::vector<MH_PipeAction>> schedules() const {
    std::vector<std::vector<MH_PipeAction>> all;
    for (int32_t s = 0; s < plan.size; ++s) all.push_back(schedule(s));
    return all;
  }

  mh::testing::Instance<MH_PipelineParallelApi> instance;
  MH_PipelinePlan plan{};
};

}  // namespace pipetest
