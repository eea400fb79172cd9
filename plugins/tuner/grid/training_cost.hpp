// The cost model of one training step: every op megahost's engine runs
// (host/engine/transformer.cpp), priced on the target machine -- GEMMs at
// the calibrated rate of their shape, memory-bound ops at their measured
// bandwidth, collectives at latency + bytes / bandwidth of the link their
// group spans -- summed per micro-batch, then laid out by the pipeline
// schedule: (m + (p - 1) / v) micro-batch slots of the slowest stage -- the
// (p - 1) / v of filling and draining at the load of the stages computing
// then -- plus the gradient reduction and the optimizer once per step.
// Recomputation is priced from the candidate's keep table
// (recompute_cost.hpp).
#pragma once

#include "layout.hpp"
#include "machine.hpp"
#include "op_pricer.hpp"

namespace mh::tuner {

struct StepCost {
  Seconds layer_forward, layer_backward;  // one layer, one micro-batch
  Seconds layer_recompute;                // the first stage's per micro-batch, over its layers
  Seconds stage;                                           // one micro-batch on the slowest stage, all computing
  Seconds step_end;                                        // gradient reduction and optimizer
  double bubble_slots = 0;                                 // (p - 1) / v
  double step_seconds = 0;
};

// `keep`: every layer's keep table (KeepTable(model.layers) keeps nothing,
// a table of all-true rows everything).
StepCost training_step(const Machine& machine, const Model& model, const Layout& layout, const Placement& where,
                       const KeepTable& keep);

// Model FLOPs of one step (the SDK's megahost/model_flops.hpp, which the
// engine reports MFU from too).
double model_flops(const Model& model);

// Parameters one rank of `stage` holds (the engine's ParamSet); of a
// mixture of experts, the k active routed experts' (its FLOPs' width).
int64_t params_per_rank(const Model& model, const Layout& layout, int32_t stage);

// A mixture of experts' routed expert weights per rank of a stage: the
// E / ep it holds, and the k active ones params_per_rank counts.
int64_t routed_expert_params(const Model& model, const Layout& layout);
int64_t active_expert_params(const Model& model, const Layout& layout);

}  // namespace mh::tuner
