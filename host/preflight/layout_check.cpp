#include "preflight/layout_check.hpp"

#include <megahost/error.hpp>

#include <cstdlib>
#include <sstream>

#include "engine/parts/moe_mlp.hpp"
#include "engine/tensor_weights.hpp"
#include "preflight/kernel_ops_check.hpp"
#include "run/run.hpp"

namespace mh {
namespace {

// The world as the comm's options or the launcher state it; 0 if unknown.
// A wrapper's section holds its inner communicator's options too (ABI 1.5).
int32_t known_world(const Assembly& a) {
  const Slot& comm = *a.slot(MH_KIND_COMM);
  for (const MH_Options* o : {comm.options.view(), comm.inner_options.view()})
    for (size_t i = 0; i < o->count; ++i)
      if (std::string(o->values[i].name) == "world_size") return int32_t(o->values[i].value.i);
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(name)) return int32_t(std::strtol(v, nullptr, 10));
  return 0;
}

// Each line of a plugin's error (its problems, one per line) as a problem
// located at the slot's section.
void report(MH_Error* raw, const Config& config, const Slot& slot, Diagnostics& diag) {
  if (raw == nullptr) return;
  ErrorPtr error(raw);
  std::istringstream lines(error->message != nullptr ? error->message : "(no message)");
  const std::string where = config.where(find_table(config.root(), slot.section));
  for (std::string line; std::getline(lines, line);)
    diag.error(where, line.rfind(slot.section, 0) == 0 ? line : slot.section + ": " + line);
}

MH_ModelShape shape(const ModelDims& d, const Assembly& a, int32_t world) {
  Options train = a.train.options();
  return model_shape(d, train.get_int("micro_batch"), train.get_int("global_batch"), world);
}

// The tensor size, or 0 when the plan failed (reported).
int32_t plan_tensor(const Config& config, const Assembly& a, const ModelDims& d, const MH_ModelShape& s,
                    Diagnostics& diag) {
  const Slot& slot = *a.slot(MH_KIND_TENSOR_PARALLEL);
  Instance tensor(slot, 1, -1);
  const MH_TensorPlanArgs args = tensor_plan_args(s);
  TensorShards shards{};
  MH_TensorPlan plan{};
  plan.struct_size = sizeof plan;
  plan.shard = shards.data();
  MH_Error* error = tensor.api<MH_TensorParallelApi>()->plan(tensor.get(), &args, &plan);
  report(error, config, slot, diag);
  if (error != nullptr) return 0;
  const std::string moe = moe_tensor_layout_problem(d, plan.size, plan.sequence_parallel != 0, a.generates || a.serves);
  if (!moe.empty()) diag.error(config.where(find_table(config.root(), slot.section)), moe);
  return plan.size;
}

// The context size, or 0 when the plan failed (reported).
int32_t plan_context(const Config& config, const Assembly& a, const MH_ModelShape& s, Diagnostics& diag) {
  const Slot& slot = *a.slot(MH_KIND_CONTEXT_PARALLEL);
  Instance context(slot, 1, -1);
  const MH_ContextPlanArgs args{MH_STRUCT_SIZE(MH_ContextPlanArgs, shape), nullptr, &s};
  MH_ContextPlan plan{};
  plan.struct_size = sizeof plan;
  MH_Error* error = context.api<MH_ContextParallelApi>()->plan(context.get(), &args, &plan);
  report(error, config, slot, diag);
  return error == nullptr ? plan.size : 0;
}

// With `tp` or `cp` 0 (unknown: its plan failed), only what needs no
// data-parallel size is planned. The data-parallel size, or 0 when it is
// unknown (a problem reported).
int32_t plan_pipeline(const Config& config, const Assembly& a, const MH_ModelShape& s, int32_t tp, int32_t cp,
                   Diagnostics& diag) {
  const Slot& slot = *a.slot(MH_KIND_PIPELINE_PARALLEL);
  Instance pipeline(slot, 1, -1);
  const auto* api = pipeline.api<MH_PipelineParallelApi>();
  MH_PipelinePlanArgs args{MH_STRUCT_SIZE(MH_PipelinePlanArgs, data_parallel), nullptr, &s, 1};
  MH_PipelinePlan plan{};
  plan.struct_size = sizeof plan;
  MH_Error* error = api->plan(pipeline.get(), &args, &plan);
  report(error, config, slot, diag);
  if (tp == 0 || cp == 0) return 0;  // a plan failed: the data-parallel size is unknown
  if (error != nullptr || s.world_size % (tp * cp * plan.size) != 0) {
    if (error == nullptr)
      diag.error(config.where(find_table(config.root(), "comm")),
                 "the world size " + std::to_string(s.world_size) + " is not a multiple of parallel.tensor.size (" +
                     std::to_string(tp) + ") x parallel.context.size (" + std::to_string(cp) +
                     ") x parallel.pipeline.size (" + std::to_string(plan.size) +
                     "); the data-parallel size is world / (tensor x context x pipeline)");
    return 0;
  }
  const int32_t dp = s.world_size / (tp * cp * plan.size);
  args.data_parallel = dp;
  report(api->plan(pipeline.get(), &args, &plan), config, slot, diag);
  return dp;
}

// The expert-parallel size must divide the experts and `data_group`, the
// stage's ranks it draws from (data-parallel x context x tensor; 0:
// unknown).
void plan_expert(const Config& config, const Assembly& a, int64_t experts, int32_t data_group, Diagnostics& diag) {
  if (data_group == 0) return;
  const Slot& slot = *a.slot(MH_KIND_EXPERT_PARALLEL);
  Instance expert(slot, 1, -1);
  const MH_ExpertPlanArgs args{MH_STRUCT_SIZE(MH_ExpertPlanArgs, data_parallel), nullptr, experts, data_group};
  MH_ExpertPlan plan{};
  plan.struct_size = sizeof plan;
  report(expert.api<MH_ExpertParallelApi>()->plan(expert.get(), &args, &plan), config, slot, diag);
}

// The data-parallel component checks how its options combine when it
// starts (overlap_param_gather needs the distributed optimizer).
void start_data_parallel(const Config& config, const Assembly& a, Diagnostics& diag) {
  const Slot& slot = *a.slot(MH_KIND_DATA_PARALLEL);
  try {
    Instance data(slot, 1, -1);
  } catch (const Error& e) {
    diag.error(config.where(find_table(config.root(), slot.section)), e.what());
  }
}

}  // namespace

void check_layout(const Config& config, const Assembly& a, Diagnostics& diag) {
  if (a.slot(MH_KIND_TUNER) != nullptr) return;  // a search space, not one layout
  ModelDims dims;
  const std::string model = config.where(find_table(config.root(), "model"));
  try {
    dims = model_dims(a, config);
  } catch (const Error& e) {
    diag.error(model, e.what());
    return;
  }
  // Each reported, and the layout still planned: its problems are others.
  for (const std::string& problem : shape_problems(dims)) diag.error(model, problem);
  check_kernel_ops(config, a, dims.spec, diag);
  start_data_parallel(config, a, diag);
  const int32_t world = known_world(a);
  if (world <= 0) return;
  try {
    const MH_ModelShape s = shape(dims, a, world);
    const int32_t tp = plan_tensor(config, a, dims, s, diag), cp = plan_context(config, a, s, diag);
    plan_expert(config, a, dims.spec.experts, plan_pipeline(config, a, s, tp, cp, diag) * cp * tp, diag);
  } catch (const Error& e) {
    diag.error(config.file(), e.what());  // a planner that failed to start
  }
}

}  // namespace mh
