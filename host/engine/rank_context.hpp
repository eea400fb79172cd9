// What one rank computes with, built in one place for training,
// evaluation, generation and calibration: its kernels instance and device,
// its coordinates in the layout, its process groups and the model's
// dimensions as the rank sees them.
#pragma once

#include <cstdint>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/run_setup.hpp"
#include "plugins/assembly.hpp"
#include "plugins/observer.hpp"

namespace mh {

// A rank's kernels instance and the device it drives.
struct RankDevice {
  RankDevice(const Slot& kernels, int32_t ranks_on_node, int32_t rank) : kernels(kernels, ranks_on_node, rank), dev(this->kernels) {}
  RankDevice(const RankDevice&) = delete;

  Instance kernels;
  Device dev;
};

// Megatron's rank order: tensor fastest, then context, then data, then
// pipeline.
struct RankCoordinates {
  int32_t tp = 0, cp = 0, dp = 0, pp = 0;
  // The rank in the data group, which holds the context ranks too.
  int32_t replica(int32_t cp_size) const { return dp * cp_size + cp; }
  // The rank among the stage's data x context x tensor ranks, which expert
  // parallelism draws from (Megatron-Core's expert tensor-parallel size 1).
  int32_t expert_slot(int32_t cp_size, int32_t tp_size) const { return replica(cp_size) * tp_size + tp; }
};
RankCoordinates rank_coordinates(const RunSetup& setup, int32_t rank);

struct RankGroups {
  // data: every rank of the stage holding the same weights, which reduce
  // their gradients together: the data-parallel replicas and, with context
  // parallelism, their context ranks (Megatron's data group with context).
  Collectives world, tensor, context, data, pipeline;
  // The first and last stage's: both hold the tied embedding. Every other
  // rank is alone in its own.
  Collectives embedding;
  // Megatron-Core's expert groups, both over the stage's data, context and
  // tensor ranks (in the order of RankCoordinates::expert_slot): `expert`,
  // ep consecutive ones that hold different experts (the tokens'
  // all-to-all), and `expert_data`, the d cp t / ep ranks that hold the same
  // experts (their gradients' reduction).
  Collectives expert, expert_data;
  // The ranks holding parts of the same sequences: context x tensor (the
  // mixture of experts' sequence group, PartContext::sequence).
  Collectives sequence;
};

// Process-local rank `local`'s world group; dry in a dry run, ordered after
// `device`'s stream.
Collectives world_group(const MH_CommApi* api, MH_Instance* comm, int32_t local, bool dry, const Device& device);

class RankContext {
 public:
  RankContext(const RunSetup& setup, int32_t local);
  RankContext(const RankContext&) = delete;

  int32_t rank;
  RankCoordinates coords;
  // Before the device, so the observer sees the device's first call and,
  // destroyed after it, its last ([observer]).
  RankObserver observer;
  RankDevice device;
  Device& dev;
  RankGroups groups;
  ModelDims dims;  // the run's, with this rank's tensor-parallel rank
};

}  // namespace mh
