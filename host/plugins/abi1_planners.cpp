// The planning kinds and the tuner built for ABI 1.x behind 2.0 tables. 2.0
// packed each plan call's arguments into an args struct, which the
// trampolines unpack, and named weights and activations where 1.x indexed
// arrays by enums, which they map (abi1_names.cpp): a weight 1.x never knew
// cannot be planned by a 1.x plan (the plugin must be rebuilt), an
// activation 1.x never knew is kept (keeping is always correct).
#include <megahost/error.hpp>

#include <vector>

#include "plugins/abi1_component.hpp"

namespace mh::abi1 {
namespace {

MH_Instance* inner(MH_Instance* self) { return instance(self).inner; }

// ------------------------------------------------------------------------
// Tensor parallelism: the plan of 1.x's fixed weights, read per name
// ------------------------------------------------------------------------

std::vector<int32_t> weight_indices(const Component& c, const MH_TensorPlanArgs& args) {
  std::vector<int32_t> indices;
  for (size_t w = 0; w < args.num_weights; ++w) {
    const int32_t index = weight_index(args.weights[w]);
    require(index >= 0, c.name + " was built for plugin ABI 1.x, whose tensor plans know the weights " +
                            known_weights() + ", not '" +
                            std::string(args.weights[w] != nullptr ? args.weights[w] : "(null)") +
                            "': rebuild the plugin for plugin ABI 2 to shard this model");
    indices.push_back(index);
  }
  return indices;
}

MH_Error* tensor_plan(MH_Instance* self, const MH_TensorPlanArgs* args, MH_TensorPlan* out) {
  return guard([&] {
    const std::vector<int32_t> indices = weight_indices(*instance(self).component, *args);
    V1TensorPlan plan{};
    plan.struct_size = sizeof(plan);
    check(v1<V1TensorParallelApi>(self).plan(inner(self), args->shape, &plan));
    out->size = plan.size;
    out->sequence_parallel = plan.sequence_parallel;
    for (size_t w = 0; w < indices.size(); ++w) out->shard[w] = plan.shard[indices[w]];
    out->enter_fwd = plan.enter_fwd;
    out->enter_bwd = plan.enter_bwd;
    out->exit_fwd = plan.exit_fwd;
    out->exit_bwd = plan.exit_bwd;
    out->reduce_norm_grads = plan.reduce_norm_grads;
  });
}

// ------------------------------------------------------------------------
// Pipeline, data, context and expert parallelism: arguments unpacked
// ------------------------------------------------------------------------

MH_Error* pipeline_plan(MH_Instance* self, const MH_PipelinePlanArgs* args, MH_PipelinePlan* out) {
  return v1<V1PipelineParallelApi>(self).plan(inner(self), args->shape, args->data_parallel, out);
}

MH_Error* pipeline_schedule(MH_Instance* self, int32_t stage, const MH_PipeAction** actions, size_t* count) {
  return v1<V1PipelineParallelApi>(self).schedule(inner(self), stage, actions, count);
}

MH_Error* data_plan(MH_Instance* self, const MH_DataPlanArgs* args, MH_DataPlan* out) {
  return v1<V1DataParallelApi>(self).plan(inner(self), args->data_parallel, args->param_bytes, args->num_params, out);
}

MH_Error* context_plan(MH_Instance* self, const MH_ContextPlanArgs* args, MH_ContextPlan* out) {
  return v1<V1ContextParallelApi>(self).plan(inner(self), args->shape, out);
}

MH_Error* expert_plan(MH_Instance* self, const MH_ExpertPlanArgs* args, MH_ExpertPlan* out) {
  return v1<V1ExpertParallelApi>(self).plan(inner(self), args->experts, args->data_parallel, out);
}

// ------------------------------------------------------------------------
// Recomputation: the name asked as 1.x's enum
// ------------------------------------------------------------------------

MH_Error* decide(MH_Instance* self, const MH_RecomputeQuery* query, int32_t* decision) {
  const int32_t activation = activation_index(query->activation);
  if (activation < 0) {
    *decision = MH_KEEP;
    return nullptr;
  }
  const V1RecomputeQuery theirs{sizeof(theirs),      query->layer, query->stage_first_layer,
                                query->stage_layers, activation,   query->bytes};
  return v1<V1RecomputeApi>(self).decide(inner(self), &theirs, decision);
}

// ------------------------------------------------------------------------
// Tuner: the keep table's columns in 1.x's order
// ------------------------------------------------------------------------

// 1.x's keep[l * kActivations + a] from 2.0's named columns; an activation
// the 2.0 table does not list is kept, as a policy keeps what it is not
// asked about.
std::vector<int32_t> v1_keep(const MH_Estimate& e) {
  std::vector<int32_t> keep(size_t(e.keep_layers) * kActivations, MH_KEEP);
  for (int64_t a = 0; a < e.num_activations; ++a) {
    const int32_t index = activation_index(e.activations[a]);
    if (index < 0) continue;
    for (int64_t l = 0; l < e.keep_layers; ++l)
      keep[size_t(l * kActivations + index)] = e.keep[l * e.num_activations + a];
  }
  return keep;
}

MH_Error* tuner_next(MH_Instance* self, const MH_ModelShape* shape, MH_Candidate* out, int32_t* done) {
  return v1<V1TunerApi>(self).next(inner(self), shape, out, done);
}

MH_Error* tuner_report(MH_Instance* self, const MH_Candidate* candidate, const MH_Estimate* estimate) {
  std::vector<int32_t> keep;
  V1Estimate theirs{};
  std::memcpy(&theirs, estimate, sizeof(theirs));  // 1.8's fields are 2.0's first ones
  theirs.struct_size = sizeof(theirs);
  if (estimate->keep != nullptr) {
    keep = v1_keep(*estimate);
    theirs.keep = keep.data();
  }
  return v1<V1TunerApi>(self).report(inner(self), candidate, &theirs);
}

MH_Error* tuner_needs(MH_Instance* self, MH_TunerNeeds* out) { return v1<V1TunerApi>(self).needs(inner(self), out); }

MH_Error* tuner_begin(MH_Instance* self, const MH_ModelShape* shape, const MH_Hardware* hardware) {
  return v1<V1TunerApi>(self).begin(inner(self), shape, hardware);
}

MH_Error* tuner_results(MH_Instance* self, const MH_TunerResult** rows, size_t* count) {
  return v1<V1TunerApi>(self).results(inner(self), rows, count);
}

MH_Error* tuner_recompute_policies(MH_Instance* self, const char* const* names, size_t count) {
  return v1<V1TunerApi>(self).recompute_policies(inner(self), names, count);
}

MH_TunerApi tuner_table(const V1TunerApi& v) {
  return MH_TunerApi{sizeof(MH_TunerApi),
                     &tuner_next,
                     &tuner_report,
                     if_present(&tuner_needs, v.needs),
                     if_present(&tuner_begin, v.begin),
                     if_present(&tuner_results, v.results),
                     if_present(&tuner_recompute_policies, v.recompute_policies)};
}

}  // namespace

void fill_planner(Component& c) {
  switch (c.kind) {
    case MH_KIND_TENSOR_PARALLEL: c.ours = MH_TensorParallelApi{sizeof(MH_TensorParallelApi), &tensor_plan}; break;
    case MH_KIND_PIPELINE_PARALLEL:
      c.ours = MH_PipelineParallelApi{sizeof(MH_PipelineParallelApi), &pipeline_plan, &pipeline_schedule};
      break;
    case MH_KIND_DATA_PARALLEL: c.ours = MH_DataParallelApi{sizeof(MH_DataParallelApi), &data_plan}; break;
    case MH_KIND_CONTEXT_PARALLEL: c.ours = MH_ContextParallelApi{sizeof(MH_ContextParallelApi), &context_plan}; break;
    case MH_KIND_EXPERT_PARALLEL: c.ours = MH_ExpertParallelApi{sizeof(MH_ExpertParallelApi), &expert_plan}; break;
    case MH_KIND_RECOMPUTE: c.ours = MH_RecomputeApi{sizeof(MH_RecomputeApi), &decide}; break;
    default: c.ours = tuner_table(c.v1<V1TunerApi>()); break;
  }
}

}  // namespace mh::abi1
